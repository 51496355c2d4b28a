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

    /// The largest value this distribution can draw.
    pub fn max_value(&self) -> u32 {
        match *self {
            LengthDist::Fixed(n) => n,
            LengthDist::Normal { max, .. } => max,
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

/// One entry of a weighted mixture of (input, output) lengths.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MixEntry {
    /// Input tokens.
    pub isl: u32,
    /// Output tokens.
    pub osl: u32,
    /// Relative weight (> 0).
    pub weight: f64,
}

/// How (input, output) lengths are drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lengths {
    /// Input and output drawn independently.
    Independent {
        /// Input lengths.
        isl: LengthDist,
        /// Output lengths.
        osl: LengthDist,
    },
    /// A weighted choice among (input, output) pairs (e.g. 70 % RAG, 30 % code generation).
    Mixture(Vec<MixEntry>),
}

impl Lengths {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), Error> {
        match self {
            Lengths::Independent { isl, osl } => {
                isl.validate("input length")?;
                osl.validate("output length")
            }
            Lengths::Mixture(entries) => {
                let bad = |reason: &str| {
                    Err(Error::InvalidDistribution {
                        what: "mixture",
                        reason: reason.into(),
                    })
                };
                if entries.is_empty() {
                    return bad("needs at least one (isl, osl, weight) entry");
                }
                if entries.iter().any(|e| e.isl == 0 || e.osl == 0) {
                    return bad("lengths must be at least 1");
                }
                if entries
                    .iter()
                    .any(|e| !(e.weight.is_finite() && e.weight > 0.0))
                {
                    return bad("weights must be finite and > 0");
                }
                Ok(())
            }
        }
    }

    /// Draws one (input, output) pair.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> (u32, u32) {
        match self {
            Lengths::Independent { isl, osl } => (isl.sample(rng), osl.sample(rng)),
            Lengths::Mixture(entries) => {
                let total: f64 = entries.iter().map(|e| e.weight).sum();
                let mut x = rng.random::<f64>() * total;
                for e in entries {
                    if x < e.weight {
                        return (e.isl, e.osl);
                    }
                    x -= e.weight;
                }
                entries.last().map_or((1, 1), |e| (e.isl, e.osl))
            }
        }
    }

    /// Parses `ISL:OSL:WEIGHT,ISL:OSL:WEIGHT,...`.
    pub fn parse_mixture(spec: &str) -> Result<Lengths, Error> {
        let bad = |reason: String| Error::InvalidDistribution {
            what: "mixture",
            reason,
        };
        let entries = spec
            .split(',')
            .map(|part| {
                let f: Vec<&str> = part.trim().split(':').collect();
                let [isl, osl, weight] = f.as_slice() else {
                    return Err(bad(format!("{part:?} is not ISL:OSL:WEIGHT")));
                };
                Ok(MixEntry {
                    isl: isl
                        .parse()
                        .map_err(|_| bad(format!("bad ISL in {part:?}")))?,
                    osl: osl
                        .parse()
                        .map_err(|_| bad(format!("bad OSL in {part:?}")))?,
                    weight: weight
                        .parse()
                        .map_err(|_| bad(format!("bad weight in {part:?}")))?,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let l = Lengths::Mixture(entries);
        l.validate()?;
        Ok(l)
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
    fn mixture_weights_over_10k_samples() {
        let m = Lengths::parse_mixture("1024:256:0.7, 128:512:0.3").unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        let n = 10_000;
        let rag = (0..n).filter(|_| m.sample(&mut rng) == (1024, 256)).count();
        assert!((rag as f64 / n as f64 - 0.7).abs() < 0.02, "{rag}");
        assert!(Lengths::parse_mixture("1:2").is_err());
        assert!(Lengths::parse_mixture("1:2:0").is_err());
        assert!(Lengths::parse_mixture("0:2:1").is_err());
    }

    #[test]
    fn ten_thousand_samples_match_mean_and_stddev_within_2_percent() {
        let mut rng = StdRng::seed_from_u64(11);
        for (mean, sd) in [(1024.0, 128.0), (256.0, 64.0), (128.0, 20.0)] {
            let d = LengthDist::mean_stddev(mean, sd);
            let v: Vec<f64> = (0..10_000).map(|_| f64::from(d.sample(&mut rng))).collect();
            let m = v.iter().sum::<f64>() / v.len() as f64;
            let s = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt();
            assert!((m - mean).abs() / mean < 0.02, "mean {m} vs {mean}");
            assert!((s - sd).abs() / sd < 0.02, "stddev {s} vs {sd}");
        }
    }

    #[test]
    fn validation() {
        assert!(LengthDist::Fixed(0).validate("x").is_err());
        assert!(LengthDist::mean_stddev(10.0, -1.0).validate("x").is_err());
        assert_eq!(LengthDist::mean_stddev(10.0, 0.0), LengthDist::Fixed(10));
    }
}
