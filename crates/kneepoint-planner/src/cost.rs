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

use crate::search::{SearchPlanner, StopReason};

/// Doubling + bisection's levels stop after this many probes, whatever the answer.
const BASELINE_LIMIT: usize = 64;

/// What one probe spent, as measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeSpend {
    /// Requests sent (over every run of the level).
    pub requests: u64,
    /// Seconds of load on the endpoint.
    pub seconds: f64,
}

/// What a search spent, and what doubling + bisection would have spent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchCost {
    /// Probes run (repeats included).
    pub probes: u32,
    /// Requests sent, over every probe.
    pub requests: u64,
    /// Seconds of load on the endpoint, over every probe (when every duration was measured).
    pub endpoint_seconds: Option<f64>,
    /// What doubling + bisection would have spent to locate the same boundary to the same
    /// precision; only once the search has located it (converged, or the answer lies at an
    /// end of the range).
    pub baseline: Option<BaselineCost>,
}

/// What doubling + bisection would have spent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BaselineCost {
    /// The levels it would have probed.
    pub levels: Vec<u32>,
    /// Their count.
    pub probes: u32,
    /// Requests they would have sent (as many per level as this search sent per planned
    /// request, so that repeated runs count alike).
    pub requests: u64,
    /// Seconds of load they would have taken (an estimate, when durations were measured).
    pub endpoint_seconds: Option<f64>,
}

impl SearchPlanner {
    /// What the search spent so far (planned requests, no endpoint time), beside doubling +
    /// bisection.
    pub fn cost(&self) -> SearchCost {
        self.cost_with(&[])
    }

    /// [`SearchPlanner::cost`] from what each probe spent, in probe order (as many as there are
    /// probes, or none).
    pub fn cost_with(&self, spent: &[ProbeSpend]) -> SearchCost {
        let history = self.history();
        let config = self.config();
        let planned = |c: u32| u64::from(config.request_count.max(c));
        let measured = spent.len() == history.len() && !history.is_empty();
        let planned_total: u64 = history
            .iter()
            .map(|r| u64::from(r.probe.request_count))
            .sum();
        let requests = if measured {
            spent.iter().map(|s| s.requests).sum()
        } else {
            planned_total
        };
        let per_planned = requests as f64 / planned_total.max(1) as f64;
        let seconds_ok = measured
            && spent
                .iter()
                .all(|s| s.seconds.is_finite() && s.seconds > 0.0);
        // request throughput per probed level
        let mut rates: Vec<(f64, f64)> = if seconds_ok {
            history
                .iter()
                .zip(spent)
                .filter(|(_, s)| s.requests > 0)
                .map(|(r, s)| {
                    (
                        f64::from(r.probe.concurrency),
                        s.requests as f64 / s.seconds,
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        rates.sort_by(|a, b| a.0.total_cmp(&b.0));
        let o = self.outcome();
        let located = matches!(
            o.stop_reason,
            Some(StopReason::Converged | StopReason::FeasibleAtMax | StopReason::InfeasibleAtMin)
        );
        let baseline = located.then(|| {
            let levels = baseline_levels(self, o.feasible_max);
            let at = |c: u32| (planned(c) as f64 * per_planned).round();
            BaselineCost {
                probes: levels.len() as u32,
                requests: levels.iter().map(|&c| at(c) as u64).sum(),
                endpoint_seconds: levels
                    .iter()
                    .map(|&c| rate_at(&rates, f64::from(c)).map(|r| at(c) / r))
                    .sum(),
                levels,
            }
        });
        SearchCost {
            probes: history.len() as u32,
            requests,
            endpoint_seconds: seconds_ok.then(|| spent.iter().map(|s| s.seconds).sum()),
            baseline,
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
    if w[1].0 <= w[0].0 {
        return Some(w[1].1);
    }
    Some(crate::predict::loglog_at(w[0], w[1], c))
}

/// The levels of doubling from `concurrency_min` (×2; ×4 above `search_initial_points`) and then
/// integer bisection until the bracket is narrower than the precision, on a curve that passes
/// up to `answer` and fails above it.
fn baseline_levels(search: &SearchPlanner, answer: Option<u32>) -> Vec<u32> {
    let c = search.config();
    let passes = |x: u32| answer.is_some_and(|a| x <= a);
    let mut at = c.concurrency_min;
    let mut levels = vec![at];
    if !passes(at) {
        return levels;
    }
    let (mut lo, mut hi) = loop {
        let next = c.next_doubling(at);
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
    while !c.converged(lo, hi) && levels.len() < BASELINE_LIMIT {
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
    use crate::{Measurement, Metric, SearchConfig, Sla, Stat};

    #[test]
    fn the_baseline_replays_doubling_and_bisection_on_the_same_boundary() {
        // p99 latency crossing 50 s at 330
        let mut s =
            SearchPlanner::new(SearchConfig::new(vec![Sla::e2e_ms(50_000.0).unwrap()])).unwrap();
        let mut spent = Vec::new();
        while let Some(p) = s.next_probe() {
            let ms = 100.0 * f64::from(p.concurrency) + 17_000.0;
            s.observe(
                p.concurrency,
                &Measurement::new(1.0).with(Metric::RequestLatency, Stat::P99, ms),
            )
            .unwrap();
            // two runs per level; a closed loop: requests / (concurrency / latency)
            let requests = 2 * u64::from(p.request_count);
            spent.push(ProbeSpend {
                requests,
                seconds: requests as f64 * ms / 1000.0 / f64::from(p.concurrency),
            });
        }
        let o = s.outcome();
        assert_eq!(o.stop_reason, Some(StopReason::Converged));
        let cost = s.cost_with(&spent);
        assert_eq!(cost.probes, o.probes);
        assert_eq!(cost.requests, 2 * 1024 * u64::from(o.probes));
        assert_eq!(s.cost().requests, 1024 * u64::from(o.probes));
        let b = cost.baseline.clone().unwrap();
        // doubling 16 … 512, then bisection inside [256, 512] to 5 %: 256 + 128 = 384 fails,
        // 320 passes, 352 fails, 336 fails, 328 passes (answer 329 or so)
        assert_eq!(&b.levels[..6], &[16, 32, 64, 128, 256, 512]);
        assert_eq!(b.probes as usize, b.levels.len());
        assert!(b.probes > cost.probes, "{cost:?}");
        assert_eq!(
            b.requests,
            2 * 1024 * u64::from(b.probes),
            "two runs a level"
        );
        let answer = o.feasible_max.unwrap();
        let last_pass = b
            .levels
            .iter()
            .filter(|&&c| c <= answer)
            .max()
            .copied()
            .unwrap();
        assert!(f64::from(last_pass) >= 0.95 * f64::from(answer));
        let (spent_s, would) = (cost.endpoint_seconds.unwrap(), b.endpoint_seconds.unwrap());
        assert!((spent_s - spent.iter().map(|s| s.seconds).sum::<f64>()).abs() < 1e-9);
        assert!(would > spent_s, "{would} vs {spent_s}");
        // without durations: no endpoint time
        assert!(s.cost().endpoint_seconds.is_none());
        assert!(s.cost().baseline.unwrap().endpoint_seconds.is_none());
        // a broken duration: no endpoint time rather than NaN
        spent[0].seconds = f64::NAN;
        assert!(s.cost_with(&spent).endpoint_seconds.is_none());
    }

    #[test]
    fn no_baseline_before_the_boundary_is_located() {
        let mut cfg = SearchConfig::new(vec![Sla::e2e_ms(50_000.0).unwrap()]);
        cfg.max_iterations = 2;
        let mut s = SearchPlanner::new(cfg).unwrap();
        while let Some(p) = s.next_probe() {
            let m = Measurement::new(1.0).with(Metric::RequestLatency, Stat::P99, 1_000.0);
            s.observe(p.concurrency, &m).unwrap();
        }
        assert_eq!(s.outcome().stop_reason, Some(StopReason::MaxIterations));
        assert_eq!(s.cost().probes, 2);
        assert!(s.cost().baseline.is_none());
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
