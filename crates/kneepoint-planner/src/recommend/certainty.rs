//! How sure a recommendation is: the cost per million tokens and the fleet from the
//! throughput's interval, and the probability that a candidate truly ranks ahead of the next.
//!
//! A throughput's 90 % interval `[low, high]` is read as log-normal: its relative standard
//! error is `ln(high / low) / (2 × 1.645)`. Cost per token is price over throughput, so its
//! interval is the throughput's, inverted; two candidates' costs (or throughputs) differ by
//! `ln(a / b)` with the two spreads added in quadrature.

use statrs::distribution::{ContinuousCDF, Normal};

use super::{Objective, OperatingPoint, PeakPlan, Recommendation};
use crate::fleet::{fleet_size, InstanceCapacity};

/// The normal quantile of a two-sided 90 % interval.
const Z90: f64 = 1.645;

/// The relative standard error behind a point's throughput interval.
fn spread(p: &OperatingPoint) -> Option<f64> {
    let [low, high] = p.output_token_throughput_interval?;
    (low > 0.0 && high >= low).then(|| (high / low).ln() / (2.0 * Z90))
}

/// The 90 % interval of the cost per million output tokens at `p`.
pub(super) fn cost_interval(p: &OperatingPoint, endpoint_price: f64) -> Option<[f64; 2]> {
    let [low, high] = p.output_token_throughput_interval?;
    let cost = |t: f64| endpoint_price / (3600.0 * t) * 1e6;
    (low > 0.0 && high >= low).then(|| [cost(high), cost(low)])
}

/// The fewest and most instances for the peak over the throughput's 90 % interval.
pub(super) fn instances_interval(p: &OperatingPoint, peak: PeakPlan) -> Option<[u32; 2]> {
    let [low, high] = p.output_token_throughput_interval?;
    let t = p.output_token_throughput;
    if !(t > 0.0 && low > 0.0) {
        return None;
    }
    let at = |x: f64| {
        let capacity = InstanceCapacity {
            concurrency: p.concurrency,
            request_throughput: p.request_throughput * x / t,
            output_token_throughput: x,
        };
        fleet_size(peak.peak, &capacity, peak.headroom)
            .ok()
            .map(|f| f.instances)
    };
    Some([at(high)?, at(low)?])
}

/// The probability that `a` truly ranks ahead of `b` on the objective (cost per token or
/// throughput per instance; `None` for latency, or without both spreads).
pub(super) fn ahead(a: &Recommendation, b: &Recommendation, objective: Objective) -> Option<f64> {
    let (pa, pb) = (a.point.as_ref()?, b.point.as_ref()?);
    let se = (spread(pa)?.powi(2) + spread(pb)?.powi(2)).sqrt();
    // ln of b's value over a's, oriented so that positive favours a
    let gap = match objective {
        Objective::Cost => {
            (b.cost_per_million_output_tokens? / a.cost_per_million_output_tokens?).ln()
        }
        Objective::Throughput => {
            (a.output_tokens_per_s_per_instance? / b.output_tokens_per_s_per_instance?).ln()
        }
        Objective::Latency | Objective::Pareto => return None,
    };
    if !gap.is_finite() {
        return None;
    }
    if se == 0.0 {
        return Some(match gap.partial_cmp(&0.0) {
            Some(std::cmp::Ordering::Greater) => 1.0,
            Some(std::cmp::Ordering::Less) => 0.0,
            _ => 0.5,
        });
    }
    Some(Normal::standard().cdf(gap / se))
}
