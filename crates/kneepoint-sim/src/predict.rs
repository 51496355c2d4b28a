//! Closed-loop runs of the engine model in virtual time: what a perfect client would measure.
//! Used to calibrate profiles and as the known truth the live server is checked against.

use crate::engine::{EngineModel, SeqSpec};
use crate::SimProfile;

/// The outcome of a virtual closed-loop level.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// Concurrency of the level.
    pub concurrency: u32,
    /// Requests completed.
    pub requests: u32,
    /// Model seconds from the first arrival to the last token.
    pub duration_s: f64,
    /// Output tokens per model second.
    pub output_tokens_per_s: f64,
    /// TTFT of each request, ms, in completion order.
    pub ttft_ms: Vec<f64>,
    /// End-to-end latency of each request, ms.
    pub latency_ms: Vec<f64>,
    /// Each request's arrival, first token and last token, ms of model time, in completion
    /// order (what a perfect client would record).
    pub timeline_ms: Vec<[f64; 3]>,
    /// Each request's place in the order sent (0-based), in completion order: which of
    /// `timeline_ms` were, say, a lead-in's or fillers.
    pub sent_index: Vec<u32>,
}

/// Runs `requests` requests of `spec` with `concurrency` in flight (a new one arrives the moment
/// one finishes) through the engine model, in model time.
pub fn predict_closed_loop(
    profile: &SimProfile,
    concurrency: u32,
    requests: u32,
    spec: SeqSpec,
) -> Prediction {
    predict_closed_loop_with(profile, concurrency, requests, |_| spec)
}

/// [`predict_closed_loop`] with each request's lengths from `spec(i)` (request `i`, 0-based, in
/// the order sent): a workload whose output lengths vary.
pub fn predict_closed_loop_with(
    profile: &SimProfile,
    concurrency: u32,
    requests: u32,
    spec: impl Fn(u32) -> SeqSpec,
) -> Prediction {
    let mut engine = EngineModel::new(profile.clone());
    let mut now = 0.0f64;
    let mut arrival = Vec::with_capacity(requests as usize);
    let mut first = vec![f64::NAN; requests as usize];
    let mut ttft = Vec::new();
    let mut latency = Vec::new();
    let mut timeline = Vec::new();
    let mut sent_index = Vec::new();
    let mut submitted = 0u32;
    let mut tokens = 0u64;
    while submitted < concurrency.min(requests) {
        if engine
            .submit(u64::from(submitted), spec(submitted))
            .is_err()
        {
            break;
        }
        arrival.push(now);
        submitted += 1;
    }
    while let Some(step) = engine.step() {
        now += step.duration_ms;
        for e in step.emitted {
            let i = e.id as usize;
            tokens += 1;
            if e.index == 0 {
                first[i] = now;
                ttft.push(now - arrival[i]);
            }
            if e.finished {
                latency.push(now - arrival[i]);
                timeline.push([arrival[i], first[i], now]);
                sent_index.push(e.id as u32);
                if submitted < requests
                    && engine.submit(u64::from(submitted), spec(submitted)).is_ok()
                {
                    arrival.push(now);
                    submitted += 1;
                }
            }
        }
    }
    let duration_s = now / 1000.0;
    Prediction {
        concurrency,
        requests: latency.len() as u32,
        duration_s,
        output_tokens_per_s: if duration_s > 0.0 {
            tokens as f64 / duration_s
        } else {
            0.0
        },
        ttft_ms: ttft,
        latency_ms: latency,
        timeline_ms: timeline,
        sent_index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p99(v: &[f64]) -> f64 {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * 0.99).round() as usize]
    }

    /// The calibrated profile reproduces the shape of the source documents' sweep
    /// (ISL 1024 / OSL 256): ~490 tok/s at 16, ~1.4k at 64, ~2.8k at 256, flat beyond.
    #[test]
    fn calibrated_profile_matches_the_source_curve() {
        let p = SimProfile::calibrated();
        let spec = SeqSpec {
            prompt_tokens: 1024,
            output_tokens: 256,
        };
        let source = [
            (16, 492.5),
            (32, 904.2),
            (64, 1433.4),
            (128, 2066.8),
            (256, 2823.4),
            (512, 2782.3),
        ];
        let mut p99s = Vec::new();
        for (c, want) in source {
            let pred = predict_closed_loop(&p, c, 1024.max(c * 4), spec);
            let got = pred.output_tokens_per_s;
            assert!(
                (got - want).abs() / want < 0.12,
                "concurrency {c}: {got:.0} tok/s, source {want}"
            );
            p99s.push(p99(&pred.latency_ms));
        }
        // p99 latency climbs past the knee
        assert!(p99s[5] > p99s[4] * 1.6, "{p99s:?}");
    }
}
