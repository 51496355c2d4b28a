//! Ranked recommendations: candidate deployments measured at their operating points, costed,
//! sized for a peak and ranked by one objective.
//!
//! The unit a candidate is measured as is one *endpoint* (which may hold several instances);
//! fleets are whole endpoints, so instances needed = endpoints × `instance_count`.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::{
    fleet_size, Error, FleetPlan, InstanceCapacity, ParetoFront, ParetoPoint, PeakTraffic,
};

/// Hours in an average month (365 × 24 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// What to optimise for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Lowest cost: the monthly cost of the fleet for the peak, or (without a peak) the cost per
    /// million output tokens at the operating point.
    Cost,
    /// Lowest p99 request latency at the load each endpoint carries (at the peak, or at the
    /// operating point without one).
    Latency,
    /// Highest output tokens per second per instance at the operating point.
    Throughput,
    /// The non-dominated configurations on per-user speed against throughput per dollar (per
    /// GPU, or per instance, when prices or GPU counts are missing), over every measured level
    /// that met the SLAs; ranked fastest per user first.
    Pareto,
}

impl std::str::FromStr for Objective {
    type Err = String;
    /// [`Objective::parse`], with the choices in the error.
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s).ok_or_else(|| {
            format!("objective must be cost, latency, throughput or pareto, not {s:?}")
        })
    }
}

impl Objective {
    /// Parses `cost`, `latency`, `throughput` or `pareto`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cost" | "lowest-cost" | "lowest_cost" => Some(Self::Cost),
            "latency" | "lowest-latency" | "lowest_latency" => Some(Self::Latency),
            "throughput" | "highest-throughput" | "highest_throughput" => Some(Self::Throughput),
            "pareto" | "pareto-front" | "pareto_front" => Some(Self::Pareto),
            _ => None,
        }
    }

    /// What the objective ranks by, in words (`lowest cost`, `pareto front`...).
    pub fn describe(self) -> &'static str {
        match self {
            Self::Cost => "lowest cost",
            Self::Latency => "lowest latency",
            Self::Throughput => "highest throughput",
            Self::Pareto => "pareto front (per-user speed against throughput per dollar)",
        }
    }
}

/// One measured level of a candidate: the curve that latency at a partial load is read from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Concurrency.
    pub concurrency: u32,
    /// p99 request latency, ms.
    pub e2e_p99_ms: f64,
}

/// A candidate's measurements at its operating point (the highest concurrency that meets the
/// SLAs, or the ideal balance of a sweep without SLAs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatingPoint {
    /// Concurrent requests per endpoint.
    pub concurrency: u32,
    /// Output tokens per second per endpoint.
    pub output_token_throughput: f64,
    /// Requests per second per endpoint.
    pub request_throughput: f64,
    /// TTFT p50, ms.
    pub ttft_p50_ms: Option<f64>,
    /// TTFT p99, ms.
    pub ttft_p99_ms: Option<f64>,
    /// Inter-token latency p50, ms.
    pub itl_p50_ms: Option<f64>,
    /// Inter-token latency p99, ms.
    pub itl_p99_ms: Option<f64>,
    /// Request latency p50, ms.
    pub e2e_p50_ms: Option<f64>,
    /// Request latency p90, ms.
    pub e2e_p90_ms: Option<f64>,
    /// Request latency p99, ms.
    pub e2e_p99_ms: Option<f64>,
    /// Error rate.
    pub error_rate: f64,
    /// The 90 % interval of `output_token_throughput` (a block bootstrap over the level's
    /// requests), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_token_throughput_interval: Option<[f64; 2]>,
}

/// A deployment to compare.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// A name people recognise.
    pub name: String,
    /// The instance type (free text, e.g. `ml.g6e.2xlarge`).
    pub instance_type: String,
    /// Instances behind the measured endpoint.
    pub instance_count: u32,
    /// Price of one instance-hour.
    pub price_per_instance_hour: f64,
    /// The operating point, or `None` when no measured level met the SLAs.
    pub point: Option<OperatingPoint>,
    /// Every measured level (for latency at partial load).
    pub curve: Vec<CurvePoint>,
    /// Why there is no operating point (when there is none).
    pub unmet_reason: Option<String>,
    /// Why the operating point is only a lower bound of the capacity (throughput still rising
    /// at the highest level measured, no SLA or error limit, the engine's bound not reached):
    /// such a candidate is not ranked.
    #[serde(default)]
    pub lower_bound: Option<String>,
    /// Every measured level on the per-user speed / throughput plane (per endpoint), with its
    /// SLA verdict, for the Pareto front.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<ParetoPoint>,
    /// GPUs per instance, when known (for throughput per GPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_instance: Option<u32>,
}

/// The peak to size fleets for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PeakPlan {
    /// The traffic.
    pub peak: PeakTraffic,
    /// The fraction of each endpoint's capacity kept in reserve.
    pub headroom: f64,
}

/// One ranked (or unrankable) candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// 1-based rank; `None` for candidates that cannot meet the SLAs.
    pub rank: Option<u32>,
    /// The candidate's name.
    pub name: String,
    /// The instance type.
    pub instance_type: String,
    /// Instances per endpoint.
    pub instance_count: u32,
    /// Price of one instance-hour.
    pub price_per_instance_hour: f64,
    /// The operating point.
    pub point: Option<OperatingPoint>,
    /// Output tokens per second per instance at the operating point.
    pub output_tokens_per_s_per_instance: Option<f64>,
    /// Endpoint price per hour / (3600 × output tokens/s) × 10⁶.
    pub cost_per_million_output_tokens: Option<f64>,
    /// Its 90 % interval, from the throughput's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_million_interval: Option<[f64; 2]>,
    /// The probability that this candidate truly ranks ahead of the next ranked one on the
    /// objective, from both measurements' spreads (cost and throughput objectives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead_of_next: Option<f64>,
    /// Endpoints for the peak (when a peak was given).
    pub fleet: Option<FleetPlan>,
    /// Instances for the peak.
    pub instances_for_peak: Option<u32>,
    /// Monthly cost of those instances (730 hours).
    pub monthly_cost: Option<f64>,
    /// p99 request latency at the load each endpoint carries at the peak (interpolated between
    /// measured levels), or at the operating point without a peak.
    pub latency_at_load_ms: Option<f64>,
    /// The value ranked on.
    pub score: Option<f64>,
    /// Why it is not ranked although it has an operating point: its capacity is a lower
    /// bound, so its cost and fleet are upper bounds (see [`Candidate::lower_bound`]).
    #[serde(default)]
    pub provisional: Option<String>,
    /// Where it stands on the Pareto front (the Pareto objective).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pareto: Option<front::ParetoStanding>,
    /// One line on why it ranks where it does.
    pub explanation: String,
}

/// Piecewise-linear p99 latency at `concurrency` from measured levels; clamps to the ends.
pub fn latency_at(curve: &[CurvePoint], concurrency: f64) -> Option<f64> {
    let mut pts: Vec<CurvePoint> = curve
        .iter()
        .copied()
        .filter(|p| p.e2e_p99_ms.is_finite())
        .collect();
    pts.sort_by_key(|p| p.concurrency);
    let first = pts.first()?;
    if concurrency <= f64::from(first.concurrency) {
        return Some(first.e2e_p99_ms);
    }
    for w in pts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (ca, cb) = (f64::from(a.concurrency), f64::from(b.concurrency));
        if concurrency <= cb {
            let t = if cb > ca {
                (concurrency - ca) / (cb - ca)
            } else {
                1.0
            };
            return Some(a.e2e_p99_ms + t * (b.e2e_p99_ms - a.e2e_p99_ms));
        }
    }
    pts.last().map(|p| p.e2e_p99_ms)
}

fn validate(c: &Candidate) -> Result<(), Error> {
    let bad = |reason: String| {
        Err(Error::InvalidSearch {
            field: "candidates",
            reason,
        })
    };
    if c.instance_count == 0 {
        return bad(format!("{}: instance_count must be at least 1", c.name));
    }
    if !c.price_per_instance_hour.is_finite() || c.price_per_instance_hour < 0.0 {
        return bad(format!(
            "{}: price per instance-hour must be a number ≥ 0",
            c.name
        ));
    }
    Ok(())
}

fn evaluate(c: &Candidate, peak: Option<PeakPlan>) -> Result<Recommendation, Error> {
    validate(c)?;
    let endpoint_price = c.price_per_instance_hour * f64::from(c.instance_count);
    let mut r = Recommendation {
        rank: None,
        name: c.name.clone(),
        instance_type: c.instance_type.clone(),
        instance_count: c.instance_count,
        price_per_instance_hour: c.price_per_instance_hour,
        point: c.point.clone(),
        output_tokens_per_s_per_instance: None,
        cost_per_million_output_tokens: None,
        cost_per_million_interval: None,
        ahead_of_next: None,
        fleet: None,
        instances_for_peak: None,
        monthly_cost: None,
        latency_at_load_ms: None,
        score: None,
        provisional: c.point.as_ref().and(c.lower_bound.clone()),
        pareto: None,
        explanation: c
            .unmet_reason
            .clone()
            .unwrap_or_else(|| "no level met the SLAs".into()),
    };
    let Some(p) = &c.point else {
        return Ok(r);
    };
    if p.output_token_throughput > 0.0 {
        r.cost_per_million_output_tokens =
            Some(endpoint_price / (3600.0 * p.output_token_throughput) * 1e6);
        r.cost_per_million_interval = certainty::cost_interval(p, endpoint_price);
    }
    r.output_tokens_per_s_per_instance =
        Some(p.output_token_throughput / f64::from(c.instance_count));
    let mut utilisation = 1.0;
    if let Some(pk) = peak {
        let capacity = InstanceCapacity {
            concurrency: p.concurrency,
            request_throughput: p.request_throughput,
            output_token_throughput: p.output_token_throughput,
        };
        if let Ok(mut plan) = fleet_size(pk.peak, &capacity, pk.headroom) {
            plan.instances_interval = certainty::instances_interval(p, pk);
            let instances = plan.instances.saturating_mul(c.instance_count);
            r.instances_for_peak = Some(instances);
            r.monthly_cost =
                Some(f64::from(instances) * c.price_per_instance_hour * HOURS_PER_MONTH);
            utilisation = plan.utilisation;
            r.fleet = Some(plan);
        }
    }
    let load = utilisation * f64::from(p.concurrency);
    r.latency_at_load_ms = latency_at(&c.curve, load).or(p.e2e_p99_ms);
    Ok(r)
}

/// One candidate's value on `objective` in its own units (cost: the monthly cost at the peak
/// or the cost per million output tokens; latency: p99 ms at the load; throughput: output
/// tokens/s per instance) and that value's relative standard error (from its 90 % interval;
/// 5 % when it has none), for the configuration search. `None`: no operating point, or the
/// Pareto objective (not one value).
pub fn objective_value(
    c: &Candidate,
    objective: Objective,
    peak: Option<PeakPlan>,
) -> Result<Option<(f64, f64)>, Error> {
    let r = evaluate(c, peak)?;
    let se = |v: f64, i: Option<[f64; 2]>| {
        i.filter(|[a, b]| a.is_finite() && b.is_finite() && v > 0.0)
            .map_or(0.05, |[a, b]| {
                ((b - a).abs() / (2.0 * 1.645 * v)).max(0.005)
            })
    };
    let throughput_interval = r
        .point
        .as_ref()
        .and_then(|p| p.output_token_throughput_interval);
    let tput = r.point.as_ref().map(|p| p.output_token_throughput);
    Ok(match objective {
        Objective::Cost => r
            .monthly_cost
            .or(r.cost_per_million_output_tokens)
            .map(|v| {
                (
                    v,
                    se(
                        r.cost_per_million_output_tokens.unwrap_or(v),
                        r.cost_per_million_interval,
                    ),
                )
            }),
        Objective::Latency => r.latency_at_load_ms.map(|v| (v, 0.05)),
        Objective::Throughput => r
            .output_tokens_per_s_per_instance
            .map(|v| (v, se(tput.unwrap_or(v), throughput_interval))),
        Objective::Pareto => None,
    }
    .filter(|(v, _)| v.is_finite() && *v > 0.0))
}

/// `(primary, secondary)` sort keys, smaller is better; `None` when the objective cannot be scored.
fn keys(r: &Recommendation, objective: Objective) -> Option<(f64, f64)> {
    let cost = r.monthly_cost.or(r.cost_per_million_output_tokens);
    let latency = r.latency_at_load_ms;
    let tput = r.output_tokens_per_s_per_instance;
    match objective {
        Objective::Cost => Some((cost?, latency.unwrap_or(f64::INFINITY))),
        Objective::Latency => Some((latency?, cost.unwrap_or(f64::INFINITY))),
        Objective::Throughput => Some((-tput?, cost.unwrap_or(f64::INFINITY))),
        Objective::Pareto => Some((
            -r.pareto.as_ref()?.fastest_per_user?,
            cost.unwrap_or(f64::INFINITY),
        )),
    }
}

fn cost_interval_text(r: &Recommendation) -> String {
    r.cost_per_million_interval.map_or(String::new(), |[a, b]| {
        format!(" (90 % interval {a:.3}–{b:.3})")
    })
}

fn describe(r: &Recommendation, objective: Objective, peak: bool) -> String {
    match objective {
        Objective::Cost if peak => format!(
            "{:.2}/month for {} instance(s) at the peak{}; {:.3} per million output tokens{}",
            r.monthly_cost.unwrap_or(f64::NAN),
            r.instances_for_peak.unwrap_or(0),
            match r.fleet.as_ref().and_then(|f| f.instances_interval) {
                Some([a, b]) if a != b => format!(" (90 % interval {a}–{b} endpoints)"),
                _ => String::new(),
            },
            r.cost_per_million_output_tokens.unwrap_or(f64::NAN),
            cost_interval_text(r)
        ),
        Objective::Cost => format!(
            "{:.3} per million output tokens{} at concurrency {}",
            r.cost_per_million_output_tokens.unwrap_or(f64::NAN),
            cost_interval_text(r),
            r.point.as_ref().map_or(0, |p| p.concurrency)
        ),
        Objective::Latency => format!(
            "p99 request latency {:.0} ms at {}",
            r.latency_at_load_ms.unwrap_or(f64::NAN),
            if peak {
                "the load each endpoint carries at the peak"
            } else {
                "the operating point"
            }
        ),
        Objective::Throughput => format!(
            "{:.0} output tokens/s per instance at concurrency {}",
            r.output_tokens_per_s_per_instance.unwrap_or(f64::NAN),
            r.point.as_ref().map_or(0, |p| p.concurrency)
        ),
        Objective::Pareto => r
            .pareto
            .as_ref()
            .map_or_else(String::new, front::ParetoStanding::sentence),
    }
}

/// Evaluates and ranks `candidates` by `objective`: cost, then latency (cost objective); latency,
/// then cost (latency objective); throughput per instance, then cost (throughput objective);
/// then the name. Candidates whose capacity is only a lower bound ([`Candidate::lower_bound`])
/// follow, unranked and marked provisional; candidates without an operating point come last,
/// unranked, with their reason.
pub fn recommend(
    candidates: &[Candidate],
    objective: Objective,
    peak: Option<PeakPlan>,
) -> Result<Vec<Recommendation>, Error> {
    let mut all = candidates
        .iter()
        .map(|c| evaluate(c, peak))
        .collect::<Result<Vec<_>, _>>()?;
    if objective == Objective::Pareto {
        front::stand(candidates, &mut all);
    }
    // Ranked candidates first, then provisional ones (in the objective's order), then those
    // without an operating point.
    let group = |r: &Recommendation| match (keys(r, objective), &r.provisional) {
        (Some(_), None) => 0,
        (Some(_), Some(_)) => 1,
        (None, _) => 2,
    };
    let cmp = |a: &Recommendation, b: &Recommendation| -> Ordering {
        group(a)
            .cmp(&group(b))
            .then_with(|| match (keys(a, objective), keys(b, objective)) {
                (Some(x), Some(y)) => {
                    x.0.total_cmp(&y.0)
                        .then(x.1.total_cmp(&y.1))
                        .then_with(|| a.name.cmp(&b.name))
                }
                _ => a.name.cmp(&b.name),
            })
    };
    all.sort_by(cmp);
    let with_peak = peak.is_some();
    let scored: Vec<Option<(f64, f64)>> = all
        .iter()
        .map(|r| keys(r, objective).filter(|_| r.provisional.is_none()))
        .collect();
    for r in all.iter_mut().filter(|r| r.provisional.is_some()) {
        let what = describe(r, objective, with_peak);
        r.explanation = format!(
            "not ranked: {}; measured so far: {what} (its capacity may be higher, so its cost and fleet may be lower)",
            r.provisional.as_deref().unwrap_or_default()
        );
    }
    let mut rank = 0;
    for i in 0..all.len() {
        let Some((score, _)) = scored[i] else {
            continue;
        };
        rank += 1;
        let r = &mut all[i];
        r.rank = Some(rank);
        r.score = Some(
            if matches!(objective, Objective::Throughput | Objective::Pareto) {
                -score
            } else {
                score
            },
        );
        let what = describe(r, objective, with_peak);
        let next = all[i + 1..]
            .iter()
            .zip(&scored[i + 1..])
            .find_map(|(n, s)| s.map(|_| n));
        // with a peak, cost ranks on whole instances (a step function of the throughput):
        // the continuous comparison would not be the ranking's own
        let comparable = !(with_peak && objective == Objective::Cost);
        let ahead = next
            .filter(|_| comparable)
            .and_then(|n| certainty::ahead(&all[i], n, objective));
        let r = &mut all[i];
        r.ahead_of_next = ahead;
        let sure = ahead.map_or(String::new(), |p| {
            format!(" (ahead with probability {:.0} %)", (p * 100.0).min(99.9))
        });
        let versus = match (i + 1 < scored.len()).then(|| scored[i + 1]).flatten() {
            Some((next, _)) if next != 0.0 && score != next => {
                let gain = ((next - score) / next.abs() * 100.0).abs();
                format!("; {gain:.0} % better than #{}{sure}", rank + 1)
            }
            Some(_) => format!(
                "; tied with #{} on the objective, ahead on the tie-break",
                rank + 1
            ),
            None if rank == 1 => String::new(),
            None => "; last of the ranked candidates".into(),
        };
        r.explanation = if objective == Objective::Pareto {
            what
        } else {
            format!("{what}{versus}")
        };
    }
    if objective == Objective::Pareto {
        for r in all
            .iter_mut()
            .filter(|r| r.rank.is_none() && r.provisional.is_none())
        {
            if let Some(why) = r.pareto.as_ref().and_then(|s| s.dominated_by.as_ref()) {
                r.explanation = format!("not on the Pareto front: {why}");
            }
        }
    }
    Ok(all)
}

/// The Pareto front over every candidate's measured levels that met the SLAs (see
/// [`Objective::Pareto`]); `None` when no candidate has levels with output tokens.
pub fn candidates_front(candidates: &[Candidate]) -> Option<ParetoFront> {
    front::candidates_front(candidates)
}

mod certainty;
mod front;
pub use front::{grouped, ParetoStanding};
#[cfg(test)]
mod tests;
