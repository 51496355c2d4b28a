//! Where each SLA is predicted to break, from every probe so far.
//!
//! Each SLA's reading at a probe is turned into a *load*: value / threshold for an upper bound
//! (`<=`, `<`), threshold / value for a lower bound (`>=`, `>`), so that a load above 1 breaks
//! it and loads grow with concurrency. Latency in a closed loop is roughly a power of
//! concurrency: below saturation it grows gently (bigger batches, slower steps), and once
//! throughput stops growing it grows in proportion (Little's law: latency ≈ concurrency /
//! request throughput). So the models are straight lines in log-log coordinates:
//! - **between a pass and a fail**, the crossing of load 1 on the line through the two
//!   readings; when the pass read zero (an error rate before it starts to rise), on the
//!   straight line through the two lowest fails, or from zero at the pass when there is one;
//! - **above the highest pass**, the line through the highest pass and an earlier one at least
//!   ×1.5 lower: in log-log coordinates when the load grew at least in proportion (its
//!   exponent held under [`MAX_EXPONENT`]), in plain ones when it grew slower (an affine
//!   latency); from a single reading, proportional growth (a saturated server), at least ×2.

use crate::probe::ProbeRecord;
use crate::sla::{Op, Sla};

/// The largest growth exponent assumed when extrapolating.
const MAX_EXPONENT: f64 = 4.0;
/// How far below the highest pass the second reading of an extrapolation must lie (a shorter
/// base turns measurement noise into a wild exponent).
const BASE_RATIO: f64 = 1.5;

/// One SLA's load at one concurrency (the worst of its observations); `None` when a failing
/// probe measured nothing for it.
#[derive(Debug, Clone, Copy)]
struct Reading {
    concurrency: f64,
    load: Option<f64>,
}

/// The value at `c` on the log-log line through `a` and `b` (concurrency, positive value).
pub(crate) fn loglog_at(a: (f64, f64), b: (f64, f64), c: f64) -> f64 {
    let t = (c / a.0).ln() / (b.0 / a.0).ln();
    (a.1.ln() + (b.1.ln() - a.1.ln()) * t).exp()
}

/// Where a load `l` at `c`, growing as concurrency to the power `k`, reaches 1.
fn power_crossing(c: f64, l: f64, k: f64) -> f64 {
    c * l.powf(-1.0 / k)
}

/// An SLA's load for a reading: above 1 breaks it.
pub(crate) fn load(sla: &Sla, value: f64) -> Option<f64> {
    if !(sla.threshold > 0.0 && value.is_finite() && value >= 0.0) {
        return None;
    }
    match sla.op {
        Op::Le | Op::Lt => Some(value / sla.threshold),
        Op::Ge | Op::Gt => (value > 0.0).then(|| sla.threshold / value),
    }
}

fn readings(sla: &Sla, history: &[ProbeRecord]) -> Vec<Reading> {
    let mut out: Vec<Reading> = Vec::new();
    for r in history {
        let Some(check) = r.checks.iter().find(|k| k.sla == sla.name) else {
            continue;
        };
        let c = f64::from(r.probe.concurrency);
        let l = check.value.and_then(|v| load(sla, v));
        match out.iter_mut().find(|x| x.concurrency == c) {
            Some(x) => {
                x.load = match (x.load, l) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                }
            }
            None => out.push(Reading {
                concurrency: c,
                load: l,
            }),
        }
    }
    out.sort_by(|a, b| a.concurrency.total_cmp(&b.concurrency));
    out
}

/// The lowest concurrency at which some SLA is predicted to break, given the highest pass `lo`
/// and the lowest fail `hi` (none yet while bracketing). Between the two, only SLAs that broke
/// at `hi` count; above `lo` alone, every SLA extrapolates.
pub(crate) fn crossing(
    slas: &[Sla],
    history: &[ProbeRecord],
    lo: u32,
    hi: Option<u32>,
) -> Option<f64> {
    slas.iter()
        .filter_map(|s| {
            let r = readings(s, history);
            let at = |c: u32| {
                r.iter()
                    .find(|x| x.concurrency == f64::from(c))
                    .and_then(|x| x.load)
            };
            let l0 = at(lo)?;
            let Some(h) = hi else {
                return beyond(&r, f64::from(lo), l0);
            };
            let l1 = at(h)?;
            if l0 > 0.0 {
                return between((f64::from(lo), l0), (f64::from(h), l1));
            }
            // The pass read zero (an error rate before it rises): where the readings start to
            // rise is unknown, so the chord from zero falls short. Two fails locate the rise.
            let above = r
                .iter()
                .find(|x| x.concurrency > f64::from(h))
                .and_then(|x| Some((x.concurrency, x.load?)));
            above
                .and_then(|(c2, l2)| secant((f64::from(h), l1), (c2, l2), f64::from(lo)))
                .or_else(|| between((f64::from(lo), l0), (f64::from(h), l1)))
        })
        .filter(|c| c.is_finite())
        .reduce(f64::min)
}

/// After a missed prediction between `lo` and `hi`: load 1 on the log-log line through the two
/// lowest fails (`fails`) or the two highest passes, when it falls inside the bracket; the
/// lowest over the SLAs that broke at `hi`.
pub(crate) fn side_crossing(
    slas: &[Sla],
    history: &[ProbeRecord],
    lo: u32,
    hi: u32,
    fails: bool,
) -> Option<f64> {
    let (lo, hi) = (f64::from(lo), f64::from(hi));
    slas.iter()
        .filter_map(|s| {
            let r: Vec<(f64, f64)> = readings(s, history)
                .into_iter()
                .filter_map(|x| Some((x.concurrency, x.load.filter(|l| *l > 0.0)?)))
                .collect();
            let i = r.iter().position(|x| x.0 == hi)?;
            if r[i].1 <= 1.0 {
                return None;
            }
            let (a, b) = if fails {
                (r[i], *r.get(i + 1)?)
            } else {
                let j = r.iter().position(|x| x.0 == lo)?;
                (*r.get(j.checked_sub(1)?)?, r[j])
            };
            let k = (b.1 / a.1).ln() / (b.0 / a.0).ln();
            if !(k > 0.0 && k.is_finite()) {
                return None;
            }
            let x = power_crossing(b.0, b.1, k);
            (x > lo && x < hi).then_some(x)
        })
        .reduce(f64::min)
}

/// How far a probe's readings were from what the earlier probes predicted for it: the largest
/// `|ln(observed / predicted)|` over the SLAs that both predict and read a positive load.
/// Measurement noise shows here (the search's estimate of it); so does a model that does not
/// fit the curve, which only makes the search more careful.
pub(crate) fn prediction_error(
    slas: &[Sla],
    before: &[ProbeRecord],
    probe: &ProbeRecord,
) -> Option<f64> {
    let c = f64::from(probe.probe.concurrency);
    slas.iter()
        .filter_map(|s| {
            let observed = probe
                .checks
                .iter()
                .find(|k| k.sla == s.name)?
                .value
                .and_then(|v| load(s, v))
                .filter(|l| *l > 0.0)?;
            let r: Vec<Reading> = readings(s, before)
                .into_iter()
                .filter(|x| x.concurrency != c && x.load.is_some_and(|l| l > 0.0))
                .collect();
            let below = r.iter().rev().find(|x| x.concurrency < c);
            let above = r.iter().find(|x| x.concurrency > c);
            let predicted = match (below, above) {
                (Some(b), Some(a)) => {
                    loglog_at((b.concurrency, b.load?), (a.concurrency, a.load?), c)
                }
                (Some(b), None) => {
                    let lb = b.load?;
                    match beyond(&r, b.concurrency, lb) {
                        // the extrapolation's load at c: the line through the crossing
                        Some(x) if x > b.concurrency => {
                            let k = (1.0 / lb).ln() / (x / b.concurrency).ln();
                            lb * (c / b.concurrency).powf(k)
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            };
            let e = (observed / predicted).ln().abs();
            // a prediction that cannot be compared counts as missed by far
            Some(if e.is_finite() { e } else { f64::INFINITY })
        })
        .reduce(f64::max)
}

/// Load 1 between a pass `(c0, l0)` and a fail `(c1, l1)`.
fn between((c0, l0): (f64, f64), (c1, l1): (f64, f64)) -> Option<f64> {
    if !(l0 <= 1.0 && l1 > 1.0 && c1 > c0) {
        return None;
    }
    if l0 > 0.0 {
        let t = -l0.ln() / (l1.ln() - l0.ln());
        Some((c0.ln() + (c1.ln() - c0.ln()) * t).exp())
    } else {
        Some(c0 + (c1 - c0) * (1.0 - l0) / (l1 - l0))
    }
}

/// Load 1 on the straight line through two fails `(c1, l1)`, `(c2, l2)` (c1 < c2), when it
/// lies between `lo` and `c1`.
fn secant((c1, l1): (f64, f64), (c2, l2): (f64, f64), lo: f64) -> Option<f64> {
    if !(l1 > 1.0 && l2 > l1 && c2 > c1) {
        return None;
    }
    let x = c1 - (l1 - 1.0) * (c2 - c1) / (l2 - l1);
    (x > lo && x < c1).then_some(x)
}

/// Load 1 above the highest pass `(c, l)`, extrapolated through it and an earlier reading: on
/// the log-log line when the load grew at least in proportion to concurrency, on the straight
/// line otherwise (an affine latency, `a + b·c`, grows slower than in proportion; its log-log
/// exponent falls as the intercept dominates, so a power law would predict too early a
/// crossing). From a single reading, proportional growth, but at least doubling.
fn beyond(r: &[Reading], c: f64, l: f64) -> Option<f64> {
    if l <= 0.0 {
        return None;
    }
    let base = r
        .iter()
        .rev()
        .filter(|x| x.concurrency * BASE_RATIO <= c)
        .find_map(|x| x.load.filter(|l| *l > 0.0).map(|l| (x.concurrency, l)));
    let Some((c1, l1)) = base else {
        return Some((c / l).max(2.0 * c));
    };
    let k = (l / l1).ln() / (c / c1).ln();
    if k >= 1.0 {
        return Some(power_crossing(c, l, k.min(MAX_EXPONENT)));
    }
    let slope = (l - l1) / (c - c1);
    if slope <= 0.0 {
        return None;
    }
    Some(c + (1.0 - l) / slope)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossing_between_a_pass_and_a_fail_is_exact_on_a_power_law() {
        // load = (c / 300)^1.7
        let f = |c: f64| (c / 300.0).powf(1.7);
        let x = between((100.0, f(100.0)), (600.0, f(600.0))).unwrap();
        assert!((x - 300.0).abs() < 1e-6, "{x}");
        // an error rate that read zero at the pass: linear
        let x = between((100.0, 0.0), (200.0, 3.0)).unwrap();
        assert!((x - 100.0 - 100.0 / 3.0).abs() < 1e-9);
        assert!(between((100.0, 1.2), (200.0, 3.0)).is_none());
        // an error rate rising linearly from 640: two fails find where it crosses
        let e = |c: f64| (c - 640.0) / 640.0 * 30.0;
        let x = secant((1024.0, e(1024.0)), (1984.0, e(1984.0)), 288.0).unwrap();
        assert!((x - 640.0 * (1.0 + 1.0 / 30.0)).abs() < 1e-6, "{x}");
        assert!(secant((1024.0, e(1024.0)), (1984.0, e(1984.0)), 700.0).is_none());
    }

    #[test]
    fn extrapolation_uses_a_base_far_enough_below() {
        let f = |c: f64| (c / 800.0).powf(1.3);
        let r: Vec<Reading> = [16.0, 64.0, 80.0]
            .into_iter()
            .map(|c| Reading {
                concurrency: c,
                load: Some(f(c)),
            })
            .collect();
        let x = beyond(&r, 80.0, f(80.0)).unwrap();
        assert!((x - 800.0).abs() < 1e-6, "{x}");
        // a single reading: proportional, at least doubling
        assert!((beyond(&r[..1], 16.0, 0.1).unwrap() - 160.0).abs() < 1e-9);
        assert!((beyond(&r[..1], 16.0, 0.9).unwrap() - 32.0).abs() < 1e-9);
        // slower than proportional: the straight line (exact for an affine latency)
        let affine = |c: f64| 0.8 + 0.001 * c;
        let pts = [16.0, 32.0].map(|c| Reading {
            concurrency: c,
            load: Some(affine(c)),
        });
        let x = beyond(&pts, 32.0, affine(32.0)).unwrap();
        assert!((x - 200.0).abs() < 1e-6, "{x}");
        // flat or falling: no prediction
        let flat = [16.0, 32.0].map(|c| Reading {
            concurrency: c,
            load: Some(0.5),
        });
        assert!(beyond(&flat, 32.0, 0.5).is_none());
    }
}
