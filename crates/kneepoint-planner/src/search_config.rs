//! The search's parameters: SageMaker's `search_params` (`concurrency_min`, `concurrency_max`,
//! `search_max_iterations`, the SLAs) and kneepoint's own (precision, confirmation margin).

use serde::{Deserialize, Serialize};

use crate::sla::Sla;
use crate::Error;

/// Parameters of the search (SageMaker's `search_params` names in the comments).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SearchConfig {
    /// Every SLA must hold at the answer.
    pub slas: Vec<Sla>,
    /// `concurrency_min` (default 16).
    pub concurrency_min: u32,
    /// `concurrency_max` (default 4096).
    pub concurrency_max: u32,
    /// `search_max_iterations`: probes in all, confirmations included (default 10).
    pub max_iterations: u32,
    /// `request_count` per probe (default 1024); a probe sends at least one request per slot.
    pub request_count: u32,
    /// `search_initial_points`: above this level the bracketing grows ×4 instead of ×2 when no
    /// SLA predicts where it will break (optional).
    pub initial_points: Option<u32>,
    /// Relative width at which the bracket counts as converged (default 0.05).
    pub precision: f64,
    /// A passing answer with a smaller relative SLA margin is probed again, unless the search's
    /// noise estimate is well under that margin (default 0.05; 0 disables confirmation).
    pub confirm_margin: f64,
    /// Whether responses are streamed (TTFT/TPOT SLAs need it).
    pub streaming: bool,
    /// Probes the search may run beyond `max_iterations` when the readings report noise and
    /// the 90 % interval on the boundary is still wider than twice `precision` (default 4;
    /// 0 makes `max_iterations` a hard cap). Exact readings never use them.
    #[serde(default = "default_noise_iterations")]
    pub noise_iterations: u32,
}

fn default_noise_iterations() -> u32 {
    4
}

impl SearchConfig {
    /// Defaults of the source documents' recipe with the given SLAs.
    pub fn new(slas: Vec<Sla>) -> Self {
        SearchConfig {
            slas,
            concurrency_min: 16,
            concurrency_max: 4096,
            max_iterations: 10,
            request_count: 1024,
            initial_points: None,
            precision: 0.05,
            confirm_margin: 0.05,
            streaming: true,
            noise_iterations: default_noise_iterations(),
        }
    }

    /// The bracketing step without a prediction: ×2, ×4 above `search_initial_points`, capped
    /// at `concurrency_max`.
    pub(crate) fn next_doubling(&self, lo: u32) -> u32 {
        let factor = if self.initial_points.is_some_and(|p| lo >= p) {
            4
        } else {
            2
        };
        lo.saturating_mul(factor).min(self.concurrency_max)
    }

    /// A bracket [pass, fail] narrower than the precision.
    pub(crate) fn converged(&self, lo: u32, hi: u32) -> bool {
        hi - lo <= 1 || f64::from(hi - lo) <= self.precision * f64::from(hi)
    }

    /// Checks the configuration.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |field: &'static str, reason: String| Err(Error::InvalidSearch { field, reason });
        if self.slas.is_empty() {
            return bad(
                "slas",
                "give at least one SLA (ttft_sla_ms, tpot_sla_ms, e2e_sla_ms, error_rate_sla or metric:stat:op:threshold)".into(),
            );
        }
        if self.concurrency_min == 0 {
            return bad("concurrency_min", "must be at least 1".into());
        }
        if self.concurrency_max > crate::MAX_CONCURRENCY {
            return bad(
                "concurrency_max",
                format!("must be at most {}", crate::MAX_CONCURRENCY),
            );
        }
        if self.concurrency_min > self.concurrency_max {
            return bad(
                "concurrency_min",
                format!(
                    "{} is greater than concurrency_max {}",
                    self.concurrency_min, self.concurrency_max
                ),
            );
        }
        if self.max_iterations == 0 {
            return bad("search_max_iterations", "must be at least 1".into());
        }
        if self.request_count == 0 {
            return bad("request_count", "must be at least 1".into());
        }
        if !(self.precision > 0.0 && self.precision < 1.0) {
            return bad("precision", "must be between 0 and 1 (exclusive)".into());
        }
        if !(self.confirm_margin >= 0.0 && self.confirm_margin.is_finite()) {
            return bad("confirm_margin", "must be a finite number ≥ 0".into());
        }
        if !self.streaming {
            if let Some(s) = self.slas.iter().find(|s| s.requires_streaming()) {
                return bad(
                    "streaming",
                    format!(
                        "{} needs streaming responses ({} is measured per token)",
                        s.name, s.metric
                    ),
                );
            }
        }
        Ok(())
    }
}
