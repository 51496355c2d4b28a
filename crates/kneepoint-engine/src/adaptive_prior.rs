//! What the stage-1 prediction says of a combination on the recommendation's objective, in
//! the units its measurement will be read in: the adaptive strategy's prior.

use kneepoint_core::Metric;
use kneepoint_planner::{Objective, Sla};

use crate::candidate::CandidateSpec;

/// Whether a predicted point meets `slas` on hardware `speed` times as fast as modelled (the
/// latency ones the prediction has: TTFT, ITL as the step time, request latency; a statistic
/// is read as the predicted value).
fn meets(p: &kneepoint_fit::PredictedPoint, slas: &[Sla], speed: f64) -> bool {
    slas.iter().all(|s| {
        let v = match s.metric {
            Metric::TimeToFirstToken => p.ttft_ms,
            Metric::InterTokenLatency => p.step_ms,
            Metric::RequestLatency => p.e2e_ms,
            _ => return true,
        };
        s.holds(v / speed)
    })
}

/// The predicted value of `spec` on `objective` if its hardware ran `speed` times as fast as
/// modelled (every latency divided by it, every rate multiplied: a simulator's time scale, an
/// efficiency the model does not know): from the best predicted level that meets the SLAs (the
/// peak without SLAs); cost per million output tokens at the endpoint's price, output tokens/s
/// per instance, or the latency objective's end-to-end latency at that level (a mean where
/// the ranking reads a p99: the search calibrates the gap away). `None` without a prediction,
/// or when no predicted level meets the SLAs.
pub(crate) fn predicted(
    spec: &CandidateSpec,
    objective: Objective,
    slas: &[Sla],
    speed: f64,
) -> Option<f64> {
    let p = spec.prediction.as_ref()?;
    let best = p
        .points
        .iter()
        .filter(|q| meets(q, slas, speed))
        .max_by(|a, b| a.output_tokens_per_s.total_cmp(&b.output_tokens_per_s));
    let (tput, e2e) = if slas.is_empty() {
        (
            p.peak_output_tokens_per_s,
            best.map_or(f64::NAN, |q| q.e2e_ms),
        )
    } else {
        let q = best?;
        (q.output_tokens_per_s, q.e2e_ms)
    };
    let tput = tput * speed;
    if !(tput.is_finite() && tput > 0.0) {
        return None;
    }
    let instances = f64::from(spec.instance_count.max(1));
    match objective {
        Objective::Cost if spec.price_per_instance_hour > 0.0 => {
            Some(spec.price_per_instance_hour * instances / (tput * 3600.0) * 1e6)
        }
        Objective::Throughput => Some(tput / instances),
        Objective::Latency => Some(e2e / speed).filter(|v| v.is_finite() && *v > 0.0),
        _ => None,
    }
}
