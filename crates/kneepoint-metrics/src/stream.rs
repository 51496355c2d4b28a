//! One metric's statistics in bounded memory, for levels too long to keep every value: exact
//! counts while the metric takes few distinct values (token counts usually do), then an
//! `hdrhistogram` of 3 significant digits (a bucket is at most 1/1024 of its value wide).
//! Count, mean, standard deviation, minimum and maximum stay exact throughout; percentiles
//! from the histogram are within half a bucket, and [`Bracket`]s let a second pass over the
//! values make them exact (numpy's `linear` method, as [`Stats::of`]).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::stats::{Stats, PERCENTILES};

/// Distinct values counted exactly before a column turns into a histogram.
const EXACT_DISTINCT: usize = 4096;

/// Values are recorded in millionths of their unit (ns for ms): no metric needs finer.
const SCALE: f64 = 1e6;

/// Significant digits of the histogram.
const SIGFIG: u8 = 3;

/// The histogram's bucket of `v`, in scaled units (`None` for values it cannot hold).
fn scaled(v: f64) -> Option<u64> {
    let s = (v.max(0.0) * SCALE).round();
    (s.is_finite() && s < 9.0e18).then_some(s as u64)
}

/// A value's order-preserving key (values are finite here).
fn key(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

fn unkey(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

#[derive(Debug, Clone)]
enum Counts {
    /// Every distinct value (by [`key`]) and how often it came.
    Exact(BTreeMap<u64, u64>),
    /// Too many distinct values: their histogram.
    Hist(Box<Histogram<u64>>),
}

/// A metric's values summarised as they come (see the module docs).
#[derive(Debug, Clone)]
pub struct StreamColumn {
    counts: Counts,
    n: u64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl Default for StreamColumn {
    fn default() -> Self {
        StreamColumn {
            counts: Counts::Exact(BTreeMap::new()),
            n: 0,
            mean: 0.0,
            m2: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

/// The histogram a column turns into (auto-resizing, so any value fits).
fn histogram() -> Option<Histogram<u64>> {
    Histogram::new(SIGFIG).ok()
}

impl StreamColumn {
    /// Adds one value (NaN and infinities are ignored, as [`Stats::of`] ignores NaN).
    pub fn push(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        self.n += 1;
        let d = v - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (v - self.mean);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        match &mut self.counts {
            Counts::Exact(map) => {
                *map.entry(key(v)).or_default() += 1;
                if map.len() > EXACT_DISTINCT {
                    if let Some(mut h) = histogram() {
                        for (k, c) in map.iter() {
                            if let Some(s) = scaled(unkey(*k)) {
                                let _ = h.record_n(s, *c);
                            }
                        }
                        self.counts = Counts::Hist(Box::new(h));
                    }
                }
            }
            Counts::Hist(h) => {
                if let Some(s) = scaled(v) {
                    let _ = h.record(s);
                }
            }
        }
    }

    /// True once percentiles come from the histogram (not exact).
    pub fn is_approximate(&self) -> bool {
        matches!(self.counts, Counts::Hist(_))
    }

    /// Values seen.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Ascending (value, count) runs: exact values, or each histogram bucket at its median
    /// value kept inside the exact minimum and maximum.
    fn runs(&self) -> Vec<(f64, u64)> {
        match &self.counts {
            Counts::Exact(map) => map.iter().map(|(k, c)| (unkey(*k), *c)).collect(),
            Counts::Hist(h) => h
                .iter_recorded()
                .map(|b| {
                    let v = h.median_equivalent(b.value_iterated_to()) as f64 / SCALE;
                    (v.clamp(self.min, self.max), b.count_at_value())
                })
                .collect(),
        }
    }

    /// The statistics so far; `None` before the first value.
    pub fn stats(&self) -> Option<Stats> {
        if self.n == 0 {
            return None;
        }
        let runs = self.runs();
        let p = |q: f64| quantile_of_runs(&runs, self.n, q);
        let std = if self.n > 1 {
            (self.m2 / (self.n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Stats::from_parts(
            (self.n as usize, self.mean, std, self.min, self.max),
            p,
        ))
    }

    /// The histogram buckets holding the ranks every reported percentile needs, for a second
    /// pass to make them exact; empty when the column is exact already.
    pub fn brackets(&self) -> Vec<Bracket> {
        let Counts::Hist(h) = &self.counts else {
            return Vec::new();
        };
        let mut ranks: Vec<u64> = PERCENTILES
            .iter()
            .flat_map(|(_, q)| {
                let pos = q * (self.n - 1) as f64;
                [pos.floor() as u64, pos.ceil() as u64]
            })
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        let mut out: Vec<Bracket> = Vec::new();
        let mut below = 0u64;
        let mut next = ranks.iter().peekable();
        for b in h.iter_recorded() {
            let c = b.count_at_value();
            let mut wanted = false;
            while next.peek().is_some_and(|r| **r < below + c) {
                next.next();
                wanted = true;
            }
            if wanted {
                let v = b.value_iterated_to();
                out.push(Bracket {
                    low: h.lowest_equivalent(v),
                    high: h.highest_equivalent(v),
                    below,
                    count: c,
                    values: Vec::new(),
                });
            }
            below += c;
        }
        out
    }

    /// The statistics with every percentile taken exactly from `brackets` filled by a second
    /// pass ([`Bracket::offer`] with every value again); a percentile whose bracket was not
    /// filled completely keeps the histogram's value.
    pub fn stats_with(&self, brackets: &mut [Bracket]) -> Option<Stats> {
        let mut s = self.stats()?;
        for b in brackets.iter_mut() {
            b.values.sort_by(f64::total_cmp);
        }
        let at = |rank: u64| -> Option<f64> {
            let b = brackets
                .iter()
                .find(|b| rank >= b.below && rank < b.below + b.count)?;
            b.is_full().then(|| b.values[(rank - b.below) as usize])
        };
        let exact = |q: f64| -> Option<f64> {
            let pos = q * (self.n - 1) as f64;
            let (lo, hi) = (pos.floor(), pos.ceil());
            let (a, b) = (at(lo as u64)?, at(hi as u64)?);
            Some(a + (b - a) * (pos - lo))
        };
        for (name, q) in PERCENTILES {
            if let Some(v) = exact(q) {
                set_percentile(&mut s, name, v);
            }
        }
        Some(s)
    }
}

fn set_percentile(s: &mut Stats, name: &str, v: f64) {
    let slot = match name {
        "p1" => &mut s.p1,
        "p5" => &mut s.p5,
        "p10" => &mut s.p10,
        "p25" => &mut s.p25,
        "p50" => &mut s.p50,
        "p75" => &mut s.p75,
        "p90" => &mut s.p90,
        "p95" => &mut s.p95,
        "p99" => &mut s.p99,
        _ => return,
    };
    *slot = v;
}

/// The value at 0-based `rank` of ascending runs.
fn rank_of_runs(runs: &[(f64, u64)], rank: u64) -> f64 {
    let mut seen = 0u64;
    for (v, c) in runs {
        seen += c;
        if rank < seen {
            return *v;
        }
    }
    runs.last().map_or(f64::NAN, |r| r.0)
}

/// The `q`-quantile of `n` values given as ascending runs, by linear interpolation between
/// closest ranks (as [`crate::quantile_sorted`]).
fn quantile_of_runs(runs: &[(f64, u64)], n: u64, q: f64) -> f64 {
    let pos = q * (n - 1) as f64;
    let lo = pos.floor();
    let (a, b) = (
        rank_of_runs(runs, lo as u64),
        rank_of_runs(runs, pos.ceil() as u64),
    );
    a + (b - a) * (pos - lo)
}

/// One histogram bucket a percentile falls in, and (after a second pass) every value in it.
#[derive(Debug, Clone)]
pub struct Bracket {
    low: u64,
    high: u64,
    below: u64,
    count: u64,
    values: Vec<f64>,
}

impl Bracket {
    /// Keeps `v` when it falls in this bucket (call with every value of the metric, in any
    /// order, once each).
    pub fn offer(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        if let Some(s) = scaled(v) {
            if s >= self.low && s <= self.high && (self.values.len() as u64) < self.count {
                self.values.push(v);
            }
        }
    }

    /// Values the bucket holds.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// True once every value of the bucket was offered.
    pub fn is_full(&self) -> bool {
        self.values.len() as u64 == self.count
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn column(values: &[f64]) -> StreamColumn {
        let mut c = StreamColumn::default();
        values.iter().for_each(|v| c.push(*v));
        c
    }

    #[test]
    fn few_distinct_values_are_exact() {
        let values: Vec<f64> = (0..10_000).map(|i| f64::from(i % 7) * 32.0).collect();
        let c = column(&values);
        assert!(!c.is_approximate());
        let (a, b) = (c.stats().unwrap(), Stats::of(&values).unwrap());
        assert_eq!((a.count, a.min, a.max), (b.count, b.min, b.max));
        for (name, _) in PERCENTILES {
            assert_eq!(a.get(name), b.get(name), "{name}");
        }
        // The running mean and the sorted sum round differently in the last bits.
        assert!((a.avg - b.avg).abs() < 1e-9 && (a.std - b.std).abs() < 1e-9);
    }

    #[test]
    fn a_histogram_is_within_a_bucket_and_a_second_pass_is_exact() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let values: Vec<f64> = (0..200_000)
            .map(|_| 5.0 + rng.random::<f64>().powi(3) * 2000.0)
            .collect();
        let c = column(&values);
        assert!(c.is_approximate());
        let (got, want) = (c.stats().unwrap(), Stats::of(&values).unwrap());
        assert_eq!(got.count, want.count);
        assert_eq!((got.min, got.max), (want.min, want.max));
        assert!((got.avg - want.avg).abs() < 1e-9 * want.avg);
        assert!((got.std - want.std).abs() < 1e-9 * want.std);
        for (name, _) in PERCENTILES {
            let (g, w) = (got.get(name).unwrap(), want.get(name).unwrap());
            assert!((g - w).abs() <= w / 1024.0, "{name}: {g} vs {w}");
        }
        let mut brackets = c.brackets();
        assert!(!brackets.is_empty());
        for v in &values {
            brackets.iter_mut().for_each(|b| b.offer(*v));
        }
        let exact = c.stats_with(&mut brackets).unwrap();
        for (name, _) in PERCENTILES {
            assert_eq!(exact.get(name), want.get(name), "{name}");
        }
        // A bracket filled short (a file cut) keeps the histogram's figure.
        let mut short = c.brackets();
        for v in &values[..1000] {
            short.iter_mut().for_each(|b| b.offer(*v));
        }
        assert_eq!(c.stats_with(&mut short).unwrap().p50, got.p50);
    }

    #[test]
    fn odd_values_do_not_break_it() {
        let c = column(&[f64::NAN, f64::INFINITY, -1.0, 0.0, 1e300]);
        let s = c.stats().unwrap();
        assert_eq!(s.count, 3);
        assert_eq!(s.min, -1.0);
        assert!(StreamColumn::default().stats().is_none());
        assert!(StreamColumn::default().brackets().is_empty());
        // Order of keys is the order of values, negatives included.
        let mut keys: Vec<f64> = [3.0, -2.0, 0.5, -0.0, 7.0].to_vec();
        keys.sort_by_key(|v| key(*v));
        assert_eq!(keys, vec![-2.0, -0.0, 0.5, 3.0, 7.0]);
        assert_eq!(unkey(key(-2.5)), -2.5);
    }
}
