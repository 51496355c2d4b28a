//! What the stage-1 prediction says of a combination on the recommendation's objective, in
//! the units its measurement will be read in: the adaptive strategy's prior.

use kneepoint_core::Metric;
use kneepoint_planner::{Objective, Sla};

use crate::candidate::CandidateSpec;

/// Whether a predicted point meets `slas` (the latency ones the prediction has: TTFT, ITL as
/// the step time, request latency; a statistic is read as the predicted value).
fn meets(p: &kneepoint_fit::PredictedPoint, slas: &[Sla]) -> bool {
    slas.iter().all(|s| {
        let v = match s.metric {
            Metric::TimeToFirstToken => p.ttft_ms,
            Metric::InterTokenLatency => p.step_ms,
            Metric::RequestLatency => p.e2e_ms,
            _ => return true,
        };
        s.holds(v)
    })
}

/// The predicted value of `spec` on `objective`: from the best predicted level that meets the
/// SLAs (the peak without SLAs); cost per million output tokens at the endpoint's price, or
/// output tokens/s per instance. `None` without a prediction, for the latency objective (the
/// prediction's latency is not the p99 at load a ranking reads), or when no predicted level
/// meets the SLAs.
pub(crate) fn predicted(spec: &CandidateSpec, objective: Objective, slas: &[Sla]) -> Option<f64> {
    let p = spec.prediction.as_ref()?;
    let tput = if slas.is_empty() {
        p.peak_output_tokens_per_s
    } else {
        p.points
            .iter()
            .filter(|q| meets(q, slas))
            .map(|q| q.output_tokens_per_s)
            .fold(None, |b: Option<f64>, t| Some(b.map_or(t, |b| b.max(t))))?
    };
    if !(tput.is_finite() && tput > 0.0) {
        return None;
    }
    let instances = f64::from(spec.instance_count.max(1));
    match objective {
        Objective::Cost if spec.price_per_instance_hour > 0.0 => {
            Some(spec.price_per_instance_hour * instances / (tput * 3600.0) * 1e6)
        }
        Objective::Throughput => Some(tput / instances),
        _ => None,
    }
}
