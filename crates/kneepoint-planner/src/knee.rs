//! The saturation knee: the level after which throughput stops rising meaningfully while p99
//! latency climbs.
//!
//! The rule, stated: sort the levels by concurrency. For each step from level *i* to *i+1*
//! compute the throughput elasticity `e = ln(T[i+1]/T[i]) / ln(C[i+1]/C[i])` (1 = throughput
//! grows as fast as concurrency, 0 = flat) and the p99 latency growth `g = L[i+1]/L[i]`. The knee
//! is level *i* for the first step with `e < min_elasticity` and `g ≥ min_latency_growth`: going
//! past it buys little throughput and costs latency. When no step qualifies the knee is not
//! reached within the tested levels.

use serde::{Deserialize, Serialize};

use crate::Error;

/// What one level measured (the numbers the knee rule needs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LevelPoint {
    /// Requests in flight.
    pub concurrency: u32,
    /// Output tokens per second.
    pub throughput: f64,
    /// p99 end-to-end latency, ms.
    pub p99_latency_ms: f64,
}

impl LevelPoint {
    /// A point.
    pub fn new(concurrency: u32, throughput: f64, p99_latency_ms: f64) -> Self {
        LevelPoint {
            concurrency,
            throughput,
            p99_latency_ms,
        }
    }
}

/// Thresholds of the knee rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KneeRule {
    /// Below this elasticity throughput "stops rising meaningfully" (default 0.15: doubling
    /// concurrency gains under ~11 % throughput).
    pub min_elasticity: f64,
    /// At or above this ratio p99 latency "climbs" (default 1.25).
    pub min_latency_growth: f64,
    /// A level whose error rate is above this is broken (default 0.05): it is left out of the
    /// knee's curve and is never the operating level, whatever its latency (the requests that
    /// failed fast make it look good).
    pub max_error_rate: f64,
}

impl Default for KneeRule {
    fn default() -> Self {
        KneeRule {
            min_elasticity: 0.15,
            min_latency_growth: 1.25,
            max_error_rate: 0.05,
        }
    }
}

/// One step between consecutive levels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Lower concurrency.
    pub from: u32,
    /// Higher concurrency.
    pub to: u32,
    /// Throughput elasticity of the step.
    pub elasticity: f64,
    /// p99 latency ratio of the step.
    pub latency_growth: f64,
}

/// The knee and the evidence for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KneeEstimate {
    /// The knee's concurrency, or `None` when not reached.
    pub knee: Option<u32>,
    /// Why, in one sentence.
    pub reason: String,
    /// Every step's numbers, in concurrency order.
    pub steps: Vec<Step>,
}

/// Finds the knee of `points` under `rule`.
pub fn find_knee(points: &[LevelPoint], rule: &KneeRule) -> Result<KneeEstimate, Error> {
    for p in points {
        if !p.throughput.is_finite() || p.throughput < 0.0 {
            return Err(Error::InvalidPoint {
                concurrency: p.concurrency,
                field: "throughput",
            });
        }
        if !p.p99_latency_ms.is_finite() || p.p99_latency_ms < 0.0 {
            return Err(Error::InvalidPoint {
                concurrency: p.concurrency,
                field: "p99_latency_ms",
            });
        }
    }
    let mut pts = points.to_vec();
    pts.sort_by_key(|p| p.concurrency);
    for w in pts.windows(2) {
        if w[0].concurrency == w[1].concurrency {
            return Err(Error::DuplicateLevel {
                concurrency: w[0].concurrency,
            });
        }
    }
    let steps: Vec<Step> = pts
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0], w[1]);
            let c = (f64::from(b.concurrency) / f64::from(a.concurrency)).ln();
            let elasticity = if a.throughput <= 0.0 {
                0.0
            } else if b.throughput <= 0.0 {
                f64::NEG_INFINITY
            } else {
                (b.throughput / a.throughput).ln() / c
            };
            let latency_growth = if a.p99_latency_ms > 0.0 {
                b.p99_latency_ms / a.p99_latency_ms
            } else {
                f64::INFINITY
            };
            Step {
                from: a.concurrency,
                to: b.concurrency,
                elasticity,
                latency_growth,
            }
        })
        .collect();
    let hit = steps.iter().find(|s| {
        s.elasticity < rule.min_elasticity && s.latency_growth >= rule.min_latency_growth
    });
    let (knee, reason) = match (hit, pts.last()) {
        (Some(s), _) => (
            Some(s.from),
            format!(
                "from {} to {} concurrent, throughput changed {:+.1} % while p99 latency grew {:.2}x",
                s.from,
                s.to,
                ((f64::from(s.to) / f64::from(s.from)).powf(s.elasticity) - 1.0) * 100.0,
                s.latency_growth
            ),
        ),
        (None, Some(last)) if pts.len() >= 2 => (
            None,
            format!(
                "throughput was still rising (or latency flat) up to concurrency {}; test higher levels to find the knee",
                last.concurrency
            ),
        ),
        _ => (None, "at least two levels are needed to find a knee".to_owned()),
    };
    Ok(KneeEstimate {
        knee,
        reason,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(u32, f64, f64)]) -> Vec<LevelPoint> {
        v.iter()
            .map(|&(c, t, l)| LevelPoint::new(c, t, l))
            .collect()
    }

    #[test]
    fn source_example_sweep() {
        // SPEC.md example 1 throughputs with p99 latencies shaped like the source.
        let p = pts(&[
            (16, 492.5, 8100.0),
            (32, 904.2, 9400.0),
            (64, 1433.4, 12000.0),
            (128, 2066.8, 17400.0),
            (256, 2823.4, 28600.0),
            (512, 2782.3, 51800.0),
        ]);
        let k = find_knee(&p, &KneeRule::default()).unwrap();
        assert_eq!(k.knee, Some(256));
        assert_eq!(k.steps.len(), 5);
        assert!(k.steps[4].elasticity < 0.0);
        assert!(k.reason.contains("256"));
    }

    #[test]
    fn unordered_input_and_still_rising() {
        let p = pts(&[(64, 1400.0, 12.0), (16, 500.0, 8.0), (256, 2800.0, 28.0)]);
        let k = find_knee(&p, &KneeRule::default()).unwrap();
        assert_eq!(k.knee, None);
        assert_eq!(k.steps[0].from, 16);
        assert!(k.reason.contains("still rising"));
    }

    #[test]
    fn flat_throughput_without_latency_growth_is_not_a_knee() {
        let p = pts(&[(1, 100.0, 10.0), (2, 101.0, 10.5), (4, 102.0, 11.0)]);
        assert_eq!(find_knee(&p, &KneeRule::default()).unwrap().knee, None);
    }

    #[test]
    fn collapse_and_errors() {
        let p = pts(&[(8, 100.0, 10.0), (16, 0.0, 50.0)]);
        assert_eq!(find_knee(&p, &KneeRule::default()).unwrap().knee, Some(8));
        assert!(find_knee(&pts(&[(8, f64::NAN, 1.0)]), &KneeRule::default()).is_err());
        assert!(find_knee(&pts(&[(8, 1.0, 1.0), (8, 2.0, 1.0)]), &KneeRule::default()).is_err());
        let one = find_knee(&pts(&[(8, 1.0, 1.0)]), &KneeRule::default()).unwrap();
        assert_eq!(one.knee, None);
        assert!(one.reason.contains("two levels"));
    }
}
