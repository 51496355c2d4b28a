//! Ranked recommendations: candidate deployments measured at their operating points, costed,
//! sized for a peak and ranked by one objective.
//!
//! The unit a candidate is measured as is one *endpoint* (which may hold several instances);
//! fleets are whole endpoints, so instances needed = endpoints × `instance_count`.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::{fleet_size, Error, FleetPlan, InstanceCapacity, PeakTraffic};

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
}

impl Objective {
    /// Parses `cost`, `latency` or `throughput`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cost" | "lowest-cost" | "lowest_cost" => Some(Self::Cost),
            "latency" | "lowest-latency" | "lowest_latency" => Some(Self::Latency),
            "throughput" | "highest-throughput" | "highest_throughput" => Some(Self::Throughput),
            _ => None,
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
        fleet: None,
        instances_for_peak: None,
        monthly_cost: None,
        latency_at_load_ms: None,
        score: None,
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
        if let Ok(plan) = fleet_size(pk.peak, &capacity, pk.headroom) {
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

/// `(primary, secondary)` sort keys, smaller is better; `None` when the objective cannot be scored.
fn keys(r: &Recommendation, objective: Objective) -> Option<(f64, f64)> {
    let cost = r.monthly_cost.or(r.cost_per_million_output_tokens);
    let latency = r.latency_at_load_ms;
    let tput = r.output_tokens_per_s_per_instance;
    match objective {
        Objective::Cost => Some((cost?, latency.unwrap_or(f64::INFINITY))),
        Objective::Latency => Some((latency?, cost.unwrap_or(f64::INFINITY))),
        Objective::Throughput => Some((-tput?, cost.unwrap_or(f64::INFINITY))),
    }
}

fn describe(r: &Recommendation, objective: Objective, peak: bool) -> String {
    match objective {
        Objective::Cost if peak => format!(
            "{:.2}/month for {} instance(s) at the peak; {:.3} per million output tokens",
            r.monthly_cost.unwrap_or(f64::NAN),
            r.instances_for_peak.unwrap_or(0),
            r.cost_per_million_output_tokens.unwrap_or(f64::NAN)
        ),
        Objective::Cost => format!(
            "{:.3} per million output tokens at concurrency {}",
            r.cost_per_million_output_tokens.unwrap_or(f64::NAN),
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
    }
}

/// Evaluates and ranks `candidates` by `objective`: cost, then latency (cost objective); latency,
/// then cost (latency objective); throughput per instance, then cost (throughput objective);
/// then the name. Candidates without an operating point come last, unranked, with their reason.
pub fn recommend(
    candidates: &[Candidate],
    objective: Objective,
    peak: Option<PeakPlan>,
) -> Result<Vec<Recommendation>, Error> {
    let mut all = candidates
        .iter()
        .map(|c| evaluate(c, peak))
        .collect::<Result<Vec<_>, _>>()?;
    let cmp = |a: &Recommendation, b: &Recommendation| -> Ordering {
        match (keys(a, objective), keys(b, objective)) {
            (Some(x), Some(y)) => {
                x.0.total_cmp(&y.0)
                    .then(x.1.total_cmp(&y.1))
                    .then_with(|| a.name.cmp(&b.name))
            }
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => a.name.cmp(&b.name),
        }
    };
    all.sort_by(cmp);
    let with_peak = peak.is_some();
    let scored: Vec<Option<(f64, f64)>> = all.iter().map(|r| keys(r, objective)).collect();
    let mut rank = 0;
    for i in 0..all.len() {
        let Some((score, _)) = scored[i] else {
            continue;
        };
        rank += 1;
        let r = &mut all[i];
        r.rank = Some(rank);
        r.score = Some(if objective == Objective::Throughput {
            -score
        } else {
            score
        });
        let what = describe(r, objective, with_peak);
        let versus = match (i + 1 < scored.len()).then(|| scored[i + 1]).flatten() {
            Some((next, _)) if next != 0.0 && score != next => {
                let gain = ((next - score) / next.abs() * 100.0).abs();
                format!("; {gain:.0} % better than #{}", rank + 1)
            }
            Some(_) => format!(
                "; tied with #{} on the objective, ahead on the tie-break",
                rank + 1
            ),
            None if rank == 1 => String::new(),
            None => "; last of the ranked candidates".into(),
        };
        r.explanation = format!("{what}{versus}");
    }
    Ok(all)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn cand(name: &str, price: f64, tput: f64, conc: u32, p99: f64) -> Candidate {
        Candidate {
            name: name.into(),
            instance_type: format!("type-{name}"),
            instance_count: 1,
            price_per_instance_hour: price,
            point: Some(OperatingPoint {
                concurrency: conc,
                output_token_throughput: tput,
                request_throughput: tput / 100.0,
                ttft_p50_ms: None,
                ttft_p99_ms: None,
                itl_p50_ms: None,
                itl_p99_ms: None,
                e2e_p50_ms: Some(p99 / 2.0),
                e2e_p90_ms: None,
                e2e_p99_ms: Some(p99),
                error_rate: 0.0,
            }),
            curve: vec![
                CurvePoint {
                    concurrency: 1,
                    e2e_p99_ms: p99 / 4.0,
                },
                CurvePoint {
                    concurrency: conc,
                    e2e_p99_ms: p99,
                },
            ],
            unmet_reason: None,
        }
    }

    fn order(recs: &[Recommendation]) -> Vec<&str> {
        recs.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn cost_per_million_tokens_follows_the_formula() {
        let recs = recommend(&[cand("a", 4.0, 2000.0, 64, 900.0)], Objective::Cost, None).unwrap();
        let expect = 4.0 / (3600.0 * 2000.0) * 1e6;
        assert!((recs[0].cost_per_million_output_tokens.unwrap() - expect).abs() < 1e-12);
        assert_eq!(recs[0].rank, Some(1));
    }

    #[test]
    fn each_objective_picks_its_own_winner() {
        let c = [
            cand("fast-expensive", 10.0, 4000.0, 64, 500.0),
            cand("slow-cheap", 1.0, 1000.0, 64, 2000.0),
            cand("balanced", 3.0, 2000.0, 64, 1000.0),
        ];
        let cost = recommend(&c, Objective::Cost, None).unwrap();
        assert_eq!(order(&cost), ["slow-cheap", "balanced", "fast-expensive"]);
        let lat = recommend(&c, Objective::Latency, None).unwrap();
        assert_eq!(order(&lat), ["fast-expensive", "balanced", "slow-cheap"]);
        let tp = recommend(&c, Objective::Throughput, None).unwrap();
        assert_eq!(order(&tp), ["fast-expensive", "balanced", "slow-cheap"]);
        assert_eq!(tp[0].score, Some(4000.0));
        assert!(
            cost[0].explanation.contains("better than #2"),
            "{}",
            cost[0].explanation
        );
    }

    #[test]
    fn fleet_cost_counts_instances_per_endpoint() {
        let mut c = cand("pair", 2.0, 1000.0, 100, 800.0);
        c.instance_count = 2;
        let peak = PeakPlan {
            peak: PeakTraffic::Concurrency(400.0),
            headroom: 0.2,
        };
        let r = &recommend(&[c], Objective::Cost, Some(peak)).unwrap()[0];
        // 400 / (100 × 0.8) = 5 endpoints of 2 instances.
        assert_eq!(r.fleet.as_ref().unwrap().instances, 5);
        assert_eq!(r.instances_for_peak, Some(10));
        assert!((r.monthly_cost.unwrap() - 10.0 * 2.0 * HOURS_PER_MONTH).abs() < 1e-9);
        assert_eq!(r.output_tokens_per_s_per_instance, Some(500.0));
        // Each endpoint carries 80 concurrent: latency read off the curve between 1 and 100.
        let expect = 200.0 + (80.0 - 1.0) / 99.0 * 600.0;
        assert!((r.latency_at_load_ms.unwrap() - expect).abs() < 1e-9);
    }

    #[test]
    fn unmet_candidates_are_listed_last_without_a_rank() {
        let mut bad = cand("never", 0.5, 100.0, 1, 10.0);
        bad.point = None;
        bad.unmet_reason = Some("fails the TTFT SLA at concurrency 1".into());
        let recs = recommend(
            &[bad, cand("ok", 5.0, 1000.0, 8, 100.0)],
            Objective::Cost,
            None,
        )
        .unwrap();
        assert_eq!(order(&recs), ["ok", "never"]);
        assert_eq!(recs[1].rank, None);
        assert!(recs[1].explanation.contains("TTFT"));
    }

    #[test]
    fn ties_break_on_the_second_key_then_the_name() {
        let c = [
            cand("b", 2.0, 1000.0, 8, 100.0),
            cand("a", 2.0, 1000.0, 8, 100.0),
            cand("c", 2.0, 1000.0, 8, 50.0),
        ];
        let recs = recommend(&c, Objective::Cost, None).unwrap();
        assert_eq!(order(&recs), ["c", "a", "b"]);
        assert!(recs[0].explanation.contains("tied"));
    }

    #[test]
    fn invalid_prices_are_errors() {
        let mut c = cand("x", -1.0, 1.0, 1, 1.0);
        assert!(recommend(&[c.clone()], Objective::Cost, None).is_err());
        c.price_per_instance_hour = 1.0;
        c.instance_count = 0;
        assert!(recommend(&[c], Objective::Cost, None).is_err());
    }

    #[test]
    fn latency_interpolation_clamps_at_the_ends() {
        let curve = [
            CurvePoint {
                concurrency: 4,
                e2e_p99_ms: 10.0,
            },
            CurvePoint {
                concurrency: 8,
                e2e_p99_ms: 30.0,
            },
        ];
        assert_eq!(latency_at(&curve, 1.0), Some(10.0));
        assert_eq!(latency_at(&curve, 6.0), Some(20.0));
        assert_eq!(latency_at(&curve, 100.0), Some(30.0));
        assert_eq!(latency_at(&[], 1.0), None);
    }
}
