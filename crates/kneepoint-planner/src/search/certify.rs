//! The end of a search on noisy readings: once the bracket has converged, the remaining probes
//! go where they most raise the answer (a level that holds every SLA with certainty, as close
//! under the boundary as the noise allows) and most lower the interval's upper end (a level
//! that fails with certainty, as close above it).
//!
//! Each candidate probe (a repeat of a level in the bracket's uncertain zone, or a new level a
//! few per cent beyond it) is scored by the chance that its reading, pooled with its
//! neighbours' (`evidence/pool.rs`), makes its level certain, times how far that moves the
//! answer or the upper end (in `ln(concurrency)`). The chance comes from a local log-log line
//! per SLA fitted to the levels near the bracket and from the reported noise. The best
//! candidate is probed; the search stops when no candidate is worth a probe.

use std::collections::BTreeMap;

use super::evidence::{normal_cdf, Reading, CERTAIN, Z};
use super::{roundest_in, Probe, ProbePhase, SearchPlanner, POOL_SPAN};

/// At most this many observations of one level.
const MAX_REPEATS: u32 = 3;
/// New levels are tried this far (as a fraction of concurrency) beyond the bracket.
const STEPS: [f64; 9] = [0.02, 0.04, 0.06, 0.08, 0.1, 0.14, 0.2, 0.3, 0.45];
/// A probe is worth running when its expected gain (chance × `ln` of the move) is at least this.
const MIN_GAIN: f64 = 0.001;
/// The weight of the interval's upper end against the answer.
const UPPER_WEIGHT: f64 = 1.0;

type Levels = BTreeMap<u32, Vec<Option<Reading>>>;

/// A local line `mean ln(load) = a + k·ln(c)` for one SLA.
#[derive(Debug, Clone, Copy)]
struct Line {
    a: f64,
    k: f64,
}

impl Line {
    fn at(&self, c: f64) -> f64 {
        self.a + self.k * c.ln()
    }
}

/// The weighted least-squares line of SLA `i` over the levels within ×2 of `[lo, hi]`; a unit
/// exponent through the nearest level when the levels do not span enough to fit one.
fn fit(levels: &Levels, i: usize, lo: f64, hi: f64) -> Option<Line> {
    let pts: Vec<(f64, f64, f64)> = levels
        .iter()
        .filter(|(c, _)| f64::from(**c) >= lo / 2.0 && f64::from(**c) <= hi * 2.0)
        .filter_map(|(c, r)| {
            let r = r.get(i).copied().flatten()?;
            Some((
                f64::from(*c).ln(),
                r.mean,
                f64::from(r.n) / (r.sigma * r.sigma),
            ))
        })
        .collect();
    let w: f64 = pts.iter().map(|p| p.2).sum();
    if pts.is_empty() || w <= 0.0 {
        return None;
    }
    let (mx, my) = (
        pts.iter().map(|p| p.0 * p.2).sum::<f64>() / w,
        pts.iter().map(|p| p.1 * p.2).sum::<f64>() / w,
    );
    let sxx: f64 = pts.iter().map(|p| p.2 * (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| p.2 * (p.0 - mx) * (p.1 - my)).sum();
    let spread = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max)
        - pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let k = if spread >= 0.05 && sxx > 0.0 {
        (sxy / sxx).clamp(0.2, 8.0)
    } else {
        1.0
    };
    Some(Line { a: my - k * mx, k })
}

/// One SLA's readings pooled over a window: Σ n·mean and Σ n.
fn window(levels: &Levels, i: usize, from: u32, to: u32) -> (f64, f64, f64) {
    levels
        .range(from..=to)
        .filter_map(|(_, r)| r.get(i).copied().flatten())
        .fold((0.0, 0.0, 0.0), |(s, n, v), r| {
            let k = f64::from(r.n);
            (s + k * r.mean, n + k, v + k * r.sigma * r.sigma)
        })
}

impl SearchPlanner {
    /// The next probe of the end game, or `None` when none is worth running.
    pub(super) fn certify(&self, lo: Option<u32>, hi: Option<u32>) -> Option<Probe> {
        let evidence = self.evidence();
        let v = evidence.verdicts();
        let levels = evidence.readings();
        let (min, max) = (self.config.concurrency_min, self.config.concurrency_max);
        let answer = super::evidence::safe_answer(&v, hi);
        let upper = v.iter().find(|(_, x)| x.certain_fail).map(|(c, _)| *c);
        let (l, h) = (
            f64::from(lo.unwrap_or(min)),
            f64::from(hi.unwrap_or(lo.unwrap_or(min))),
        );
        let lines: Vec<Option<Line>> = (0..self.config.slas.len())
            .map(|i| fit(&levels, i, l, h))
            .collect();
        let sigma = |i: usize| {
            levels
                .values()
                .filter_map(|r| r.get(i).copied().flatten())
                .map(|r| r.sigma)
                .fold(0.0, f64::max)
        };
        let mut best: Option<(f64, u32, bool)> = None;
        let mut consider = |gain: f64, c: u32, pass: bool| {
            if gain >= MIN_GAIN && best.is_none_or(|b| gain > b.0) {
                best = Some((gain, c, pass));
            }
        };
        let observations = |c: u32| v.get(&c).map_or(0, |x| x.observations);
        // the answer: levels above it and under the lowest point fail
        if let Some(top) = lo.filter(|t| answer != Some(*t)) {
            let floor = answer.unwrap_or(min / 2).max(1);
            for c in self.candidates(top, floor, true) {
                if observations(c) >= MAX_REPEATS {
                    continue;
                }
                let chance = self.pass_chance(&levels, &lines, sigma, c);
                consider(chance * (f64::from(c) / f64::from(floor)).ln(), c, true);
            }
        }
        // the answer itself, while it rests on few readings: one more may overturn it, and the
        // answer would fall back to the next certain level below
        if let Some(a) = answer.filter(|a| observations(*a) < MAX_REPEATS) {
            let below = v
                .range(..a)
                .rev()
                .find(|(_, x)| x.certain_pass())
                .map_or(min / 2, |(c, _)| *c)
                .max(1);
            let overturn = 1.0 - self.pass_chance(&levels, &lines, sigma, a);
            consider(overturn * (f64::from(a) / f64::from(below)).ln(), a, true);
        }
        // the upper end: levels from the lowest point fail to under the lowest certain fail
        if let Some(bottom) = hi.filter(|b| upper != Some(*b)) {
            let ceiling = upper.unwrap_or(bottom.saturating_mul(2).min(max.saturating_mul(2)));
            for c in self.candidates(bottom, ceiling, false) {
                if observations(c) >= MAX_REPEATS || c > max {
                    continue;
                }
                let chance = self.fail_chance(&levels, &lines, sigma, c);
                let gain = (f64::from(ceiling) / f64::from(c)).ln();
                consider(UPPER_WEIGHT * chance * gain, c, false);
            }
        }
        let (_, c, pass) = best?;
        self.probe(c, ProbePhase::Confirm, Some(pass))
    }

    /// Levels to try from `from` toward `to` (exclusive): `from` itself, the probed levels
    /// between, and new levels [`STEPS`] beyond `from`, rounded.
    fn candidates(&self, from: u32, to: u32, down: bool) -> Vec<u32> {
        let (min, max) = (self.config.concurrency_min, self.config.concurrency_max);
        let inside = |c: u32| {
            if down {
                c > to && c <= from
            } else {
                c >= from && c < to
            }
        };
        let mut out: Vec<u32> = self
            .history
            .iter()
            .map(|r| r.probe.concurrency)
            .filter(|c| inside(*c))
            .collect();
        for s in STEPS {
            let t = if down {
                f64::from(from) * (1.0 - s)
            } else {
                f64::from(from) * (1.0 + s)
            };
            let (a, b) = ((t * 0.99).ceil() as u32, t.floor() as u32);
            if let Some(c) = roundest_in(a.max(min), b.min(max)).filter(|c| inside(*c)) {
                out.push(c);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The chance that one more reading at `c` makes it a certain pass (every SLA jointly),
    /// pooled with the readings up to [`POOL_SPAN`] above it.
    fn pass_chance(
        &self,
        levels: &Levels,
        lines: &[Option<Line>],
        sigma: impl Fn(usize) -> f64,
        c: u32,
    ) -> f64 {
        let to = (f64::from(c) * POOL_SPAN).floor() as u32;
        let uncertain = lines.iter().filter(|l| l.is_some()).count().max(1);
        let q = quantile(CERTAIN.powf(1.0 / uncertain as f64));
        // the pooled mean (sum + y) / (n + 1) at most −q standard errors
        per_sla(
            levels,
            lines,
            sigma,
            c,
            [(c, c), (c, to)],
            |sum, se, mu, s| normal_cdf((-q * se - sum - mu) / s),
        )
        .product()
    }

    /// The chance that one more reading at `c` makes it a certain fail (some SLA), pooled with
    /// the readings down to [`POOL_SPAN`] below it.
    fn fail_chance(
        &self,
        levels: &Levels,
        lines: &[Option<Line>],
        sigma: impl Fn(usize) -> f64,
        c: u32,
    ) -> f64 {
        let from = (f64::from(c) / POOL_SPAN).ceil() as u32;
        // the pooled mean at least Z standard errors over the threshold
        per_sla(
            levels,
            lines,
            sigma,
            c,
            [(c, c), (from, c)],
            |sum, se, mu, s| 1.0 - normal_cdf((Z * se - sum - mu) / s),
        )
        .fold(0.0, f64::max)
    }
}

/// Per SLA with a line: the better of `chance(Σ n·mean, standard error with one more reading,
/// the line's mean at c, the noise)` over the two windows of levels (the level alone, and it
/// with its neighbours).
fn per_sla<'a>(
    levels: &'a Levels,
    lines: &'a [Option<Line>],
    sigma: impl Fn(usize) -> f64 + 'a,
    c: u32,
    windows: [(u32, u32); 2],
    chance: impl Fn(f64, f64, f64, f64) -> f64 + 'a,
) -> impl Iterator<Item = f64> + 'a {
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| Some((i, (*line)?)))
        .map(move |(i, line)| {
            let (s, mu) = (sigma(i), line.at(f64::from(c)));
            windows
                .iter()
                .map(|&(a, b)| {
                    let (sum, _, var) = window(levels, i, a, b);
                    chance(sum, (var + s * s).sqrt(), mu, s)
                })
                .fold(0.0, f64::max)
        })
}

/// The standard normal quantile (by bisection on [`normal_cdf`]; called a few times a probe).
fn quantile(p: f64) -> f64 {
    let (mut a, mut b) = (-10.0, 10.0);
    for _ in 0..60 {
        let m = (a + b) / 2.0;
        if normal_cdf(m) < p {
            a = m;
        } else {
            b = m;
        }
    }
    (a + b) / 2.0
}
