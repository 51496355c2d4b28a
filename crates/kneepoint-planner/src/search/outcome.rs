//! What a search found: the answer, the bracket, the interval and the explanation.

use serde::{Deserialize, Serialize};

use super::explain::{answer_rule, explain, limited};
use super::{evidence, BoundaryInterval, Confidence, SearchPlanner, StopReason, CLIFF_EXPONENT};

/// What the search found so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Outcome {
    /// The answer: the highest concurrency below the lowest failure at which every SLA holds
    /// jointly with probability at least 0.95 on the evidence (the lower end of the boundary
    /// interval's reasoning; with readings that report no noise, the highest that met every
    /// SLA). Never a level the evidence says more likely fails than holds.
    pub feasible_max: Option<u32>,
    /// The point estimate: the highest level whose readings more likely met every SLA than
    /// not, below the lowest that more likely failed. Equal to `feasible_max` on exact
    /// readings; above it when a close call near the boundary is not certain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<u32>,
    /// The lowest concurrency that failed an SLA.
    pub infeasible_min: Option<u32>,
    /// The first SLA breached at `infeasible_min`.
    pub first_breach: Option<String>,
    /// Why the search stopped (None while it runs).
    pub stop_reason: Option<StopReason>,
    /// Output tokens per second at the answer.
    pub throughput_at_answer: Option<f64>,
    /// Probes run.
    pub probes: u32,
    /// (infeasible_min − feasible_max) / infeasible_min.
    pub bracket_width: Option<f64>,
    /// The smallest SLA margin at the answer (over all its observations).
    pub margin_at_answer: Option<f64>,
    /// The answer was observed more than once, passing every time.
    pub confirmed: bool,
    /// Noisy verdicts: a level passed and failed when repeated, or passed above a failure.
    pub non_monotone: bool,
    /// An SLA's load jumps between the answer and the lowest failing level far faster than
    /// any smooth curve (a growth exponent above 8, and a jump well beyond the noise): a
    /// cliff at `infeasible_min`, so the answer holds however the noise falls.
    #[serde(default)]
    pub cliff: bool,
    /// How far to trust the answer.
    pub confidence: Confidence,
    /// Levels the client may have shaped (its own CPU or scheduling lag): their verdicts are
    /// kept, but an answer resting on one is of low confidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_limited: Vec<u32>,
    /// Where the true boundary lies ([`super::INTERVAL_LEVEL`]); `None` before any probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<BoundaryInterval>,
    /// The largest measurement noise seen (relative standard error of one reading), when the
    /// measurements reported it or levels were repeated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
    /// One paragraph for people.
    pub explanation: String,
}

impl SearchPlanner {
    /// What the search found so far.
    pub fn outcome(&self) -> Outcome {
        let (estimate, hi, non_monotone) = self.bracket();
        let v = self.verdicts();
        // The answer: the highest level below the lowest failure at which every SLA holds
        // with certainty on the evidence (the point estimate where readings are exact).
        let lo = evidence::safe_answer(&v, hi);
        let at = |c: Option<u32>| c.and_then(|c| v.get(&c).copied());
        let answer = at(lo);
        let throughput_at_answer = lo.and_then(|l| {
            self.history
                .iter()
                .rev()
                .find(|r| r.probe.concurrency == l)
                .map(|r| r.throughput)
        });
        let first_breach = hi.and_then(|h| {
            self.history
                .iter()
                .find(|r| r.probe.concurrency == h && !r.pass)
                .and_then(|r| r.first_breach.clone())
        });
        let bracket_width = lo.zip(hi).map(|(l, h)| f64::from(h - l) / f64::from(h));
        let confirmed = answer.is_some_and(|a| a.observations > 1 && a.all_pass);
        let margin_at_answer = answer.map(|a| a.min_margin);
        let close = margin_at_answer.is_some_and(|m| m < self.config.confirm_margin);
        let confidence = match self.stop {
            Some(StopReason::Converged) if !non_monotone && (confirmed || !close) => {
                Confidence::High
            }
            Some(StopReason::Converged) => Confidence::Medium,
            _ => Confidence::Low,
        };
        let cliff = lo.zip(hi).is_some_and(|(l, h)| {
            self.evidence()
                .jump(l, h)
                .is_some_and(|(exponent, beyond_noise)| {
                    exponent > CLIFF_EXPONENT && beyond_noise > 0.0
                })
        });
        let interval = (!self.history.is_empty()).then(|| self.interval(hi));
        let mut client_limited: Vec<u32> = self
            .history
            .iter()
            .filter(|r| r.client_limited.is_some())
            .map(|r| r.probe.concurrency)
            .collect();
        client_limited.sort_unstable();
        client_limited.dedup();
        let shaky = [lo, hi]
            .iter()
            .flatten()
            .any(|c| client_limited.contains(c));
        let confidence = if shaky { Confidence::Low } else { confidence };
        let limited_note = if shaky {
            limited(&client_limited)
        } else {
            String::new()
        };
        // High confidence is a narrow answer too: an interval wider than ±10 % of the answer
        // (or open at one end) says the boundary is not pinned down, whatever the bracket did.
        let wide = match (&interval, lo) {
            (Some(i), Some(answer)) => match (i.low, i.high) {
                (Some(l), Some(h)) => f64::from(h.saturating_sub(l)) > 0.2 * f64::from(answer),
                _ => true,
            },
            _ => false,
        };
        let confidence = match confidence {
            Confidence::High if wide => Confidence::Medium,
            c => c,
        };
        let wide_note = if wide && self.stop == Some(StopReason::Converged) {
            "; the 90 % interval is wider than ±10 % of the answer, so confidence is at most medium"
        } else {
            ""
        };
        let noisy = self.evidence().noisy();
        let rule_note = answer_rule(noisy, lo, estimate);
        let explanation = explain(
            self.stop,
            lo,
            hi,
            &first_breach,
            (non_monotone, cliff),
            confirmed,
            close,
        ) + &interval.map_or(String::new(), |i| format!("; boundary: {i}"))
            + &rule_note
            + wide_note
            + &limited_note;
        Outcome {
            feasible_max: lo,
            estimate,
            infeasible_min: hi,
            first_breach,
            stop_reason: self.stop,
            throughput_at_answer,
            probes: self.history.len() as u32,
            bracket_width,
            margin_at_answer: margin_at_answer.filter(|m| m.is_finite()),
            confirmed,
            non_monotone,
            confidence,
            cliff,
            client_limited,
            interval,
            noise: self.evidence().noise(),
            explanation,
        }
    }
}
