//! Descriptive statistics: count, mean, sample std, min, max and percentiles by linear
//! interpolation between closest ranks (numpy's default `linear` method).
//!
//! Hand-written because the definition must match numpy/AIPerf exactly: `statrs`' order
//! statistics use a different interpolation, and `hdrhistogram` quantises values.

use serde::{Deserialize, Serialize};

/// The percentiles reported for every distribution, as fractions (from
/// [`kneepoint_core::Percentile::ALL`]).
pub const PERCENTILES: [(&str, f64); 9] = percentiles();

const fn percentiles() -> [(&'static str, f64); 9] {
    let mut out = [("", 0.0); 9];
    let mut i = 0;
    while i < out.len() {
        let p = kneepoint_core::Percentile::ALL[i];
        out[i] = (p.label(), p.fraction());
        i += 1;
    }
    out
}

/// Summary statistics of one metric over a level's successful requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of observations.
    pub count: usize,
    /// Arithmetic mean.
    pub avg: f64,
    /// Sample standard deviation (n − 1); 0 for a single observation.
    pub std: f64,
    /// Smallest observation.
    pub min: f64,
    /// Largest observation.
    pub max: f64,
    /// 1st percentile.
    pub p1: f64,
    /// 5th percentile.
    pub p5: f64,
    /// 10th percentile.
    pub p10: f64,
    /// 25th percentile.
    pub p25: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Stats {
    /// Statistics of `values` (NaNs are ignored); `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Stats> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        // Unstable, because values equal under `total_cmp` have the same bits: the order is
        // the stable sort's, without its merge buffer (a level's inter-token gaps are 255
        // values per request).
        v.sort_unstable_by(f64::total_cmp);
        let n = v.len();
        let avg = v.iter().sum::<f64>() / n as f64;
        let std = if n > 1 {
            (v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let p = |q: f64| quantile_sorted(&v, q).unwrap_or(f64::NAN);
        Some(Stats::from_parts((n, avg, std, v[0], v[n - 1]), p))
    }

    /// Statistics from count, mean, std, min and max, and each reported percentile from `p`
    /// (given the fraction: 0.01 ... 0.99).
    pub(crate) fn from_parts(
        (count, avg, std, min, max): (usize, f64, f64, f64, f64),
        p: impl Fn(f64) -> f64,
    ) -> Stats {
        Stats {
            count,
            avg,
            std,
            min,
            max,
            p1: p(0.01),
            p5: p(0.05),
            p10: p(0.10),
            p25: p(0.25),
            p50: p(0.50),
            p75: p(0.75),
            p90: p(0.90),
            p95: p(0.95),
            p99: p(0.99),
        }
    }

    /// A percentile by name (`p50`, `p99`, ...) or `avg`, `min`, `max`, `std`.
    pub fn get(&self, stat: &str) -> Option<f64> {
        Some(match stat {
            "avg" | "mean" => self.avg,
            "std" => self.std,
            "min" => self.min,
            "max" => self.max,
            "p1" => self.p1,
            "p5" => self.p5,
            "p10" => self.p10,
            "p25" => self.p25,
            "p50" => self.p50,
            "p75" => self.p75,
            "p90" => self.p90,
            "p95" => self.p95,
            "p99" => self.p99,
            _ => return None,
        })
    }
}

/// The `q`-quantile (0..=1) of ascending `sorted` values by linear interpolation;
/// `None` when empty or `q` is out of range.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_do_not_depend_on_the_order_values_come_in() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let shuffled: Vec<f64> = (0..5000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match i % 7 {
                    0 => 0.0,
                    1 => -0.0,
                    2 => 1e300,
                    3 => -1e-300,
                    4 => f64::MIN_POSITIVE / 4.0,
                    _ => f64::from_bits(x) % 1e6,
                }
            })
            .filter(|v| !v.is_nan())
            .collect();
        let mut sorted = shuffled.clone();
        sorted.sort_by(f64::total_cmp);
        let (a, b) = (Stats::of(&shuffled).unwrap(), Stats::of(&sorted).unwrap());
        // bit for bit: the mean and deviation are summed in sorted order either way
        let bits =
            |s: &Stats| [s.avg, s.std, s.min, s.max, s.p1, s.p50, s.p90, s.p99].map(f64::to_bits);
        assert_eq!(bits(&a), bits(&b));
        assert_eq!(a.count, b.count);
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn hand_computed_values() {
        // numpy: np.percentile([1,2,3,4,10], [1,25,50,90,99]) = [1.04, 2, 3, 7.6, 9.76]
        let s = Stats::of(&[4.0, 1.0, 10.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.count, 5);
        close(s.avg, 4.0);
        // sample std: sqrt(((9+4+1+0+36))/4) = sqrt(12.5)
        close(s.std, 12.5f64.sqrt());
        close(s.min, 1.0);
        close(s.max, 10.0);
        close(s.p1, 1.04);
        close(s.p25, 2.0);
        close(s.p50, 3.0);
        close(s.p90, 7.6);
        close(s.p99, 9.76);
        close(s.p95, 8.8);
    }

    #[test]
    fn edge_cases() {
        assert!(Stats::of(&[]).is_none());
        assert!(Stats::of(&[f64::NAN]).is_none());
        let s = Stats::of(&[7.0]).unwrap();
        close(s.std, 0.0);
        close(s.p99, 7.0);
        assert_eq!(quantile_sorted(&[1.0, 2.0], 1.5), None);
        close(quantile_sorted(&[1.0, 2.0], 0.5).unwrap(), 1.5);
        assert_eq!(s.get("p99"), Some(7.0));
        assert_eq!(s.get("p42"), None);
    }
}
