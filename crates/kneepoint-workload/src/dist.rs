//! Token-length distributions.

use rand::Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use crate::Error;

/// How a length (in tokens) is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LengthDist {
    /// Always this many.
    Fixed(u32),
    /// A normal distribution rounded to whole tokens and truncated to `[min, max]` (min ≥ 1).
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        stddev: f64,
        /// Smallest value (at least 1).
        min: u32,
        /// Largest value.
        max: u32,
    },
}

impl LengthDist {
    /// Fixed when `stddev` is 0, else normal truncated to `[1, mean + 10 stddev]`.
    pub fn mean_stddev(mean: f64, stddev: f64) -> Self {
        if stddev == 0.0 {
            LengthDist::Fixed(mean.round().max(0.0) as u32)
        } else {
            LengthDist::Normal {
                mean,
                stddev,
                min: 1,
                max: (mean + 10.0 * stddev)
                    .ceil()
                    .clamp(1.0, f64::from(u32::MAX)) as u32,
            }
        }
    }

    /// Checks the parameters.
    pub fn validate(&self, what: &'static str) -> Result<(), Error> {
        let bad = |reason: &str| {
            Err(Error::InvalidDistribution {
                what,
                reason: reason.into(),
            })
        };
        match *self {
            LengthDist::Fixed(0) => bad("the length must be at least 1"),
            LengthDist::Fixed(_) => Ok(()),
            LengthDist::Normal {
                mean,
                stddev,
                min,
                max,
            } => {
                if !mean.is_finite() || mean < 1.0 {
                    bad("the mean must be at least 1")
                } else if !stddev.is_finite() || stddev < 0.0 {
                    bad("the standard deviation must be ≥ 0")
                } else if min == 0 || min > max {
                    bad("min must be ≥ 1 and ≤ max")
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The mean of the configuration (before truncation).
    pub fn mean(&self) -> f64 {
        match *self {
            LengthDist::Fixed(n) => f64::from(n),
            LengthDist::Normal { mean, .. } => mean,
        }
    }

    /// Draws one length.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        match *self {
            LengthDist::Fixed(n) => n,
            LengthDist::Normal {
                mean,
                stddev,
                min,
                max,
            } => {
                let Ok(normal) = Normal::new(mean, stddev) else {
                    return mean.round().clamp(f64::from(min), f64::from(max)) as u32;
                };
                // Rejection keeps the truncated shape; clamping is the fallback.
                for _ in 0..64 {
                    let v = normal.sample(rng).round();
                    if v >= f64::from(min) && v <= f64::from(max) {
                        return v as u32;
                    }
                }
                mean.round().clamp(f64::from(min), f64::from(max)) as u32
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn normal_moments_and_bounds() {
        let d = LengthDist::mean_stddev(1024.0, 100.0);
        d.validate("input length").unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let v: Vec<f64> = (0..20_000).map(|_| f64::from(d.sample(&mut rng))).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt();
        assert!((mean - 1024.0).abs() / 1024.0 < 0.01, "{mean}");
        assert!((sd - 100.0).abs() / 100.0 < 0.03, "{sd}");
        let d = LengthDist::mean_stddev(2.0, 50.0);
        assert!((0..1000).all(|_| d.sample(&mut rng) >= 1));
    }

    #[test]
    fn validation() {
        assert!(LengthDist::Fixed(0).validate("x").is_err());
        assert!(LengthDist::mean_stddev(10.0, -1.0).validate("x").is_err());
        assert_eq!(LengthDist::mean_stddev(10.0, 0.0), LengthDist::Fixed(10));
    }
}
