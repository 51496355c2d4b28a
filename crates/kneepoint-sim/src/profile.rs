//! Simulator profiles: the parameters of the modelled engine.

use serde::{Deserialize, Serialize};

use crate::{Error, FaultPlan};

/// The smallest [`SimProfile::time_scale`]: a thousand times faster than the modelled GPU. A
/// 5 ms step then sleeps 5 µs, already below what the engine thread's sleep can time, so a
/// smaller scale would only make the simulator less faithful, not faster.
pub const MIN_TIME_SCALE: f64 = 1e-3;

/// The largest [`SimProfile::time_scale`]: a thousand times slower than the modelled GPU (a
/// 27.5 ms step sleeps 27.5 s). Slower than that, one request outlasts any sensible timeout,
/// and the step times stop being representable wall-clock durations long before the `f64`
/// runs out.
pub const MAX_TIME_SCALE: f64 = 1e3;

/// Parameters of the simulated continuous-batching engine. Times are model (GPU) time; the
/// server sleeps `time × time_scale` of wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SimProfile {
    /// The profile's name.
    pub name: String,
    /// The model name the server reports.
    pub model: String,
    /// The most sequences running at once (vLLM's `max_num_seqs`); the rest wait in a FIFO.
    pub max_num_seqs: u32,
    /// Tokens one engine step may process (decode tokens plus prefill chunks).
    pub max_num_batched_tokens: u32,
    /// KV-cache capacity in tokens; a sequence reserves prompt + output tokens on admission.
    pub kv_cache_tokens: u64,
    /// The longest prompt + output accepted (vLLM's `max_model_len`).
    pub max_model_len: u32,
    /// Fixed cost of one engine step, in ms.
    pub step_base_ms: f64,
    /// Added step cost per decoding sequence, in ms.
    pub step_per_seq_ms: f64,
    /// Added step cost per token of context held by decoding sequences, in µs.
    pub step_per_context_token_us: f64,
    /// Added step cost per prefilled prompt token, in µs.
    pub prefill_per_token_us: f64,
    /// Relative standard deviation of each step's duration (0 = deterministic).
    pub jitter: f64,
    /// A slowly varying slowdown, as other tenants or a neighbour's load cause: every step's
    /// cost is multiplied by `exp(drift × x)`, where `x` is a standard normal that wanders with
    /// a correlation time of [`DRIFT_STEPS`](crate::DRIFT_STEPS) steps (0 = none).
    /// Unlike `jitter`, which averages out over a request, it moves whole stretches of a level.
    pub drift: f64,
    /// A server that slows as it runs (a leak, a filling cache, thermal throttling): each step
    /// costs `1 + degrade × t` times more, `t` the model seconds the engine has spent stepping
    /// (its busy time; 0 = none). A level on such a server is not steady: its last time slice is slower than
    /// its first.
    pub degrade: f64,
    /// Wall seconds slept per model second (0.1 runs ten times faster than the modelled GPU).
    pub time_scale: f64,
    /// Seed for output lengths and jitter.
    pub seed: u64,
    /// Output length when a request sets no maximum.
    pub default_max_tokens: u32,
    /// Mean of the "natural" output length (when the model would stop by itself without
    /// `ignore_eos`); exponential, clamped to `[min_tokens, max_tokens]`.
    pub natural_output_mean: u32,
    /// Faults to inject (none by default).
    pub faults: Option<FaultPlan>,
    /// Zero-latency mode for measuring clients: every response is answered at once with a
    /// pre-rendered body (no engine, no ground truth), so the server costs next to nothing.
    pub instant: bool,
    /// Fixed-latency mode for measuring clients' fidelity: no engine; every request gets its
    /// first token `ttft_ms` after it arrives and each further token `itl_ms` later, whatever
    /// the load, and the server records when each token was actually written.
    pub fixed: Option<FixedTiming>,
    /// A reasoning model's share of each chat response (0 by default): the first
    /// `round(share × output tokens)` tokens stream as `reasoning_content` deltas, the rest as
    /// the answer, and usage says how many were reasoning
    /// (`completion_tokens_details.reasoning_tokens`). At least one answer token stays.
    #[serde(default)]
    pub reasoning_share: f64,
    /// A mixture-of-experts model's weight reads (none by default): each step also costs
    /// `read_all_ms` times the share of experts its tokens touch.
    #[serde(default)]
    pub experts: Option<ExpertReads>,
}

/// The routed experts a step reads: with `experts` per layer and `per_token` of them used by
/// each token, a step of `n` tokens (decoding plus prefilled) touches `1 − (1 − per_token /
/// experts)^n` of them, and reading them all takes `read_all_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpertReads {
    /// Routed experts per layer.
    pub experts: u32,
    /// Experts each token uses.
    pub per_token: u32,
    /// Model time to read every routed expert once, ms.
    pub read_all_ms: f64,
}

impl ExpertReads {
    /// Model time a step of `tokens` tokens spends reading experts, ms.
    pub fn step_ms(&self, tokens: u64) -> f64 {
        if tokens == 0 || self.experts == 0 {
            return 0.0;
        }
        let share = f64::from(self.per_token.min(self.experts)) / f64::from(self.experts);
        self.read_all_ms * (1.0 - (1.0 - share).powf(tokens as f64))
    }
}

/// Per-request timing of the fixed-latency mode (wall milliseconds, scaled by `time_scale`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedTiming {
    /// From a request's arrival to its first token.
    pub ttft_ms: f64,
    /// Between consecutive tokens.
    pub itl_ms: f64,
}

impl Default for SimProfile {
    fn default() -> Self {
        Self::calibrated()
    }
}

impl SimProfile {
    /// A profile calibrated on the source documents' example (a 30B MoE model on one GPU,
    /// ISL 1024 / OSL 256): output throughput rises to about 2.8k tokens/s near concurrency
    /// 256 and is flat beyond it, while latency climbs. See `docs/simulator.md`.
    pub fn calibrated() -> Self {
        SimProfile {
            name: "calibrated".into(),
            model: "kneepoint-sim/nemotron-like-30b-a3b".into(),
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            kv_cache_tokens: 400_000,
            max_model_len: 10_240,
            step_base_ms: 27.5,
            step_per_seq_ms: 0.12,
            step_per_context_token_us: 0.06,
            prefill_per_token_us: 15.0,
            jitter: 0.03,
            drift: 0.0,
            degrade: 0.0,
            time_scale: 1.0,
            seed: 0,
            default_max_tokens: 256,
            natural_output_mean: 200,
            faults: None,
            instant: false,
            fixed: None,
            reasoning_share: 0.0,
            experts: None,
        }
    }

    /// A small, quick profile for tests: 5 ms steps, 64 sequences, no jitter.
    pub fn fast() -> Self {
        SimProfile {
            name: "fast".into(),
            model: "kneepoint-sim/fast".into(),
            max_num_seqs: 64,
            max_num_batched_tokens: 4096,
            kv_cache_tokens: 200_000,
            max_model_len: 8192,
            step_base_ms: 5.0,
            step_per_seq_ms: 0.02,
            step_per_context_token_us: 0.0,
            prefill_per_token_us: 5.0,
            jitter: 0.0,
            drift: 0.0,
            degrade: 0.0,
            time_scale: 1.0,
            seed: 0,
            default_max_tokens: 64,
            natural_output_mean: 32,
            faults: None,
            instant: false,
            fixed: None,
            reasoning_share: 0.0,
            experts: None,
        }
    }

    /// Zero latency: responses are pre-rendered and sent at once (for client capacity
    /// measurements; `instant`). Output lengths follow the request as in `fast`.
    pub fn instant() -> Self {
        SimProfile {
            name: "instant".into(),
            model: "kneepoint-sim/instant".into(),
            max_model_len: 1 << 20,
            kv_cache_tokens: 1 << 40,
            instant: true,
            ..Self::fast()
        }
    }

    /// Fixed latency, independent of load: TTFT 50 ms, then a token every 10 ms (for
    /// measuring how much time a client adds; `fixed`). Output lengths follow the request as
    /// in `fast`.
    pub fn fixed() -> Self {
        SimProfile {
            name: "fixed".into(),
            model: "kneepoint-sim/fixed".into(),
            max_model_len: 1 << 20,
            kv_cache_tokens: 1 << 40,
            fixed: Some(FixedTiming {
                ttft_ms: 50.0,
                itl_ms: 10.0,
            }),
            ..Self::fast()
        }
    }

    /// How many of a chat response's `output_tokens` are reasoning (see
    /// [`SimProfile::reasoning_share`]).
    pub fn reasoning_tokens(&self, output_tokens: u32) -> u32 {
        if output_tokens < 2 {
            return 0;
        }
        ((self.reasoning_share * f64::from(output_tokens)).round() as u32).min(output_tokens - 1)
    }

    /// A profile by name: `calibrated`, `fast`, `instant` or `fixed`.
    pub fn by_name(name: &str) -> Result<Self, Error> {
        match name {
            "calibrated" => Ok(Self::calibrated()),
            "fast" => Ok(Self::fast()),
            "instant" => Ok(Self::instant()),
            "fixed" => Ok(Self::fixed()),
            other => Err(Error::UnknownProfile {
                name: other.to_owned(),
            }),
        }
    }

    /// Checks that every parameter is usable.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |field: &'static str, reason: &str| {
            Err(Error::InvalidProfile {
                field,
                reason: reason.to_owned(),
            })
        };
        if self.max_num_seqs == 0 {
            return bad("max_num_seqs", "must be at least 1");
        }
        if self.max_num_batched_tokens == 0 {
            return bad("max_num_batched_tokens", "must be at least 1");
        }
        if self.max_model_len == 0 || u64::from(self.max_model_len) > self.kv_cache_tokens {
            return bad(
                "max_model_len",
                "must be at least 1 and fit in kv_cache_tokens",
            );
        }
        for (field, v) in [
            ("step_base_ms", self.step_base_ms),
            ("step_per_seq_ms", self.step_per_seq_ms),
            ("step_per_context_token_us", self.step_per_context_token_us),
            ("prefill_per_token_us", self.prefill_per_token_us),
            ("jitter", self.jitter),
            ("drift", self.drift),
            ("degrade", self.degrade),
        ] {
            if !v.is_finite() || v < 0.0 {
                return bad(field, "must be a finite number ≥ 0");
            }
        }
        if !(0.0..=1.0).contains(&self.reasoning_share) {
            return bad("reasoning_share", "must be between 0 and 1");
        }
        if let Some(e) = &self.experts {
            if e.experts == 0 || e.per_token == 0 || e.per_token > e.experts {
                return bad("experts", "needs 1 ≤ per_token ≤ experts");
            }
            if !e.read_all_ms.is_finite() || e.read_all_ms < 0.0 {
                return bad("experts", "read_all_ms must be a finite number ≥ 0");
            }
        }
        if self.step_base_ms <= 0.0 {
            return bad("step_base_ms", "must be > 0");
        }
        if !(MIN_TIME_SCALE..=MAX_TIME_SCALE).contains(&self.time_scale) {
            return bad(
                "time_scale",
                &format!(
                    "must be between {MIN_TIME_SCALE} and {MAX_TIME_SCALE} wall seconds per modelled second (got {})",
                    shown(self.time_scale)
                ),
            );
        }
        if self.default_max_tokens == 0 || self.natural_output_mean == 0 {
            return bad("default_max_tokens", "output lengths must be at least 1");
        }
        if let Some(f) = &self.fixed {
            if !f.ttft_ms.is_finite() || f.ttft_ms < 0.0 {
                return bad("fixed.ttft_ms", "must be a finite number ≥ 0");
            }
            if !f.itl_ms.is_finite() || f.itl_ms < 0.0 {
                return bad("fixed.itl_ms", "must be a finite number ≥ 0");
            }
            if self.instant {
                return bad("fixed", "cannot be combined with instant");
            }
        }
        if let Some(f) = &self.faults {
            if !(0.0..=1.0).contains(&f.rate) {
                return bad("faults.rate", "must be a probability between 0 and 1");
            }
        }
        Ok(())
    }
}

/// `x` as a reader writes it: `0.5`, `1000`, but `1e300` rather than its 301 digits.
fn shown(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-4..1e15).contains(&x.abs()) {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid() {
        SimProfile::calibrated().validate().unwrap();
        SimProfile::fast().validate().unwrap();
        SimProfile::fixed().validate().unwrap();
        let mut p = SimProfile::fixed();
        p.fixed = Some(FixedTiming {
            ttft_ms: f64::NAN,
            itl_ms: 1.0,
        });
        assert!(p.validate().is_err());
        assert!(SimProfile::by_name("nope").is_err());
        let mut p = SimProfile::fast();
        p.time_scale = 0.0;
        assert!(p.validate().is_err());
    }

    /// Issue 57 item 19: a time scale outside 0.001..=1000 (`--time-scale 1e300` panicked the
    /// engine thread) is refused, naming the setting, its range and the value.
    #[test]
    fn time_scales_past_the_range_are_refused_naming_it() {
        for bad in [1e300, 1e3 + 1.0, 1e-9, 0.0, -1.0, f64::INFINITY, f64::NAN] {
            let mut p = SimProfile::fast();
            p.time_scale = bad;
            let e = p.validate().unwrap_err().to_string();
            assert!(e.contains("time_scale"), "{bad}: {e}");
            assert!(e.contains("between 0.001 and 1000"), "{bad}: {e}");
        }
        let mut p = SimProfile::fast();
        p.time_scale = 1e300;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("(got 1e300)"), "{e}");
        for good in [MIN_TIME_SCALE, 0.1, 1.0, MAX_TIME_SCALE] {
            p.time_scale = good;
            p.validate().unwrap();
        }
    }
}
