//! What a search spent, beside what plain doubling + bisection would have spent to locate the
//! same boundary to the same precision (SageMaker's documented recipe: double from
//! `concurrency_min` until an SLA breaks, then narrow the bracket).
//!
//! The comparison replays doubling + bisection on a curve whose boundary is the one this search
//! found (every level up to the answer passes, every level above it fails), without a probe
//! budget. Endpoint time is summed from the probes' measured durations; for the baseline it is
//! estimated level by level as requests / request throughput, the throughput read from the
//! nearest probed levels (log-log interpolation, held flat beyond the probed range).

use serde::{Deserialize, Serialize};

use crate::search::{Search, StopReason};

/// Doubling + bisection's levels stop after this many probes, whatever the answer.
const BASELINE_LIMIT: usize = 64;

/// What a search spent, and what doubling + bisection would have spent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchCost {
    /// Probes run (repeats included).
    pub probes: u32,
    /// Requests sent, over every probe.
    pub requests: u64,
    /// Seconds of load on the endpoint, over every probe (when durations were given).
    pub endpoint_seconds: Option<f64>,
    /// The levels doubling + bisection would have probed to locate the same boundary to the
    /// same precision.
    pub baseline_levels: Vec<u32>,
    /// Their count.
    pub baseline_probes: u32,
    /// Requests they would have sent.
    pub baseline_requests: u64,
    /// Seconds of load they would have taken (an estimate; when durations were given).
    pub baseline_endpoint_seconds: Option<f64>,
}

impl Search {
    /// What the search spent so far, beside doubling + bisection (without endpoint time).
    pub fn cost(&self) -> SearchCost {
        self.cost_with(&[])
    }

    /// [`Search::cost`] with each probe's measured duration in seconds, in probe order (as
    /// many as there are probes, or none).
    pub fn cost_with(&self, durations_s: &[f64]) -> SearchCost {
        let history = self.history();
        let config = self.config();
        let requests_at = |c: u32| u64::from(config.request_count.max(c));
        let o = self.outcome();
        let levels = baseline_levels(self, o.feasible_max, o.stop_reason);
        let timed = durations_s.len() == history.len() && !history.is_empty();
        // request throughput per probed level, from its requests and duration
        let mut rates: Vec<(f64, f64)> = history
            .iter()
            .zip(durations_s)
            .filter(|(_, d)| **d > 0.0 && d.is_finite())
            .map(|(r, d)| {
                (
                    f64::from(r.probe.concurrency),
                    f64::from(r.probe.request_count) / d,
                )
            })
            .collect();
        rates.sort_by(|a, b| a.0.total_cmp(&b.0));
        let estimate = |c: u32| rate_at(&rates, f64::from(c)).map(|r| requests_at(c) as f64 / r);
        SearchCost {
            probes: history.len() as u32,
            requests: history
                .iter()
                .map(|r| u64::from(r.probe.request_count))
                .sum(),
            endpoint_seconds: timed.then(|| durations_s.iter().sum()),
            baseline_probes: levels.len() as u32,
            baseline_requests: levels.iter().map(|&c| requests_at(c)).sum(),
            baseline_endpoint_seconds: if timed && !rates.is_empty() {
                levels.iter().map(|&c| estimate(c)).sum()
            } else {
                None
            },
            baseline_levels: levels,
        }
    }
}

/// Request throughput at `c`, interpolated in log-log between the probed levels.
fn rate_at(rates: &[(f64, f64)], c: f64) -> Option<f64> {
    let first = rates.first()?;
    let last = rates.last()?;
    if c <= first.0 {
        return Some(first.1);
    }
    if c >= last.0 {
        return Some(last.1);
    }
    let w = rates.windows(2).find(|w| c <= w[1].0)?;
    let ((c0, r0), (c1, r1)) = (w[0], w[1]);
    if c1 <= c0 {
        return Some(r1);
    }
    let t = (c / c0).ln() / (c1 / c0).ln();
    Some((r0.ln() + (r1.ln() - r0.ln()) * t).exp())
}

/// The levels of doubling from `concurrency_min` (×2; ×4 above `search_initial_points`) and then
/// integer bisection until `(fail − pass) ≤ precision × fail`, on a curve that passes up to
/// `answer` and fails above it.
fn baseline_levels(search: &Search, answer: Option<u32>, stop: Option<StopReason>) -> Vec<u32> {
    let c = search.config();
    let mut levels = Vec::new();
    if stop.is_none() && answer.is_none() {
        return levels;
    }
    let passes = |x: u32| answer.is_some_and(|a| x <= a);
    let mut at = c.concurrency_min;
    levels.push(at);
    if !passes(at) {
        return levels;
    }
    let (mut lo, mut hi) = loop {
        let factor = if c.initial_points.is_some_and(|p| at >= p) {
            4
        } else {
            2
        };
        let next = at.saturating_mul(factor).min(c.concurrency_max);
        if next == at || levels.len() >= BASELINE_LIMIT {
            return levels;
        }
        levels.push(next);
        if passes(next) {
            at = next;
        } else {
            break (at, next);
        }
    };
    while hi - lo > 1
        && f64::from(hi - lo) > c.precision * f64::from(hi)
        && levels.len() < BASELINE_LIMIT
    {
        let mid = lo + (hi - lo) / 2;
        levels.push(mid);
        if passes(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    levels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Measurement, SearchConfig, Sla};

    #[test]
    fn the_baseline_replays_doubling_and_bisection_on_the_same_boundary() {
        // p99 latency crossing 50 s at 330
        let mut s = Search::new(SearchConfig::new(vec![Sla::e2e_ms(50_000.0).unwrap()])).unwrap();
        let mut durations = Vec::new();
        while let Some(p) = s.next_probe() {
            let ms = 100.0 * f64::from(p.concurrency) + 17_000.0;
            s.observe(
                p.concurrency,
                &Measurement::new(1.0).with("request_latency", "p99", ms),
            )
            .unwrap();
            // a closed loop: requests / (concurrency / latency)
            durations.push(f64::from(p.request_count) * ms / 1000.0 / f64::from(p.concurrency));
        }
        let o = s.outcome();
        let cost = s.cost_with(&durations);
        assert_eq!(cost.probes, o.probes);
        assert_eq!(cost.requests, u64::from(o.probes) * 1024);
        let answer = o.feasible_max.unwrap();
        // doubling 16 … 512, then bisection inside [256, 512] down to 5 %
        assert_eq!(&cost.baseline_levels[..6], &[16, 32, 64, 128, 256, 512]);
        assert!(cost.baseline_probes > cost.probes, "{cost:?}");
        assert!(cost.baseline_levels.iter().all(|&c| c > 0));
        let last_pass = cost
            .baseline_levels
            .iter()
            .filter(|&&c| c <= answer)
            .max()
            .copied()
            .unwrap();
        assert!(f64::from(last_pass) >= 0.9 * f64::from(answer));
        let (spent, would) = (
            cost.endpoint_seconds.unwrap(),
            cost.baseline_endpoint_seconds.unwrap(),
        );
        assert!((spent - durations.iter().sum::<f64>()).abs() < 1e-9);
        assert!(would > spent, "{would} vs {spent}");
        assert!(s.cost().endpoint_seconds.is_none());
    }

    #[test]
    fn throughput_is_interpolated_in_log_log_and_held_flat_outside() {
        let rates = [(16.0, 10.0), (256.0, 160.0)];
        assert_eq!(rate_at(&rates, 8.0), Some(10.0));
        assert_eq!(rate_at(&rates, 1000.0), Some(160.0));
        assert!((rate_at(&rates, 64.0).unwrap() - 40.0).abs() < 1e-9);
        assert_eq!(rate_at(&[], 64.0), None);
    }
}
