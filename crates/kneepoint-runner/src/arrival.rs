//! Open-loop arrival schedules: when each request is meant to start, computed ahead of the run
//! so that a late send is measured as lateness instead of silently thinning the load.

use std::time::Duration;

use rand::SeedableRng;
use rand_distr::{Distribution, Exp, Gamma};

use crate::Error;

/// How inter-arrival times are drawn at a target request rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Exponential gaps (a Poisson process): independent users.
    Poisson,
    /// Equal gaps of 1 / rate.
    Constant,
    /// Gamma gaps with shape `burstiness` and mean 1 / rate: burstiness 1 is Poisson, below 1
    /// is burstier, above 1 is smoother. The gaps' coefficient of variation is
    /// 1 / √burstiness.
    Gamma {
        /// The gamma shape parameter (> 0).
        burstiness: f64,
    },
}

impl Arrival {
    /// Parses `poisson`, `constant` or `gamma` (with `burstiness`).
    pub fn parse(name: &str, burstiness: Option<f64>) -> Result<Self, Error> {
        match (name, burstiness) {
            ("poisson", None) => Ok(Arrival::Poisson),
            ("constant", None) => Ok(Arrival::Constant),
            ("gamma", b) => Ok(Arrival::Gamma {
                burstiness: b.unwrap_or(1.0),
            }),
            ("poisson" | "constant", Some(_)) => Err(Error::InvalidArrival {
                reason: "a burstiness factor applies to gamma arrivals only".into(),
            }),
            (other, _) => Err(Error::InvalidArrival {
                reason: format!("unknown arrival process {other:?} (poisson, constant or gamma)"),
            }),
        }
    }
}

/// Intended start offsets of `n` requests at `rate` requests/s: the first at 0, each next one a
/// drawn gap later. Seeded, so a schedule can be reproduced.
pub fn schedule(arrival: Arrival, rate: f64, n: usize, seed: u64) -> Result<Vec<Duration>, Error> {
    if !(rate.is_finite() && rate > 0.0) {
        return Err(Error::InvalidArrival {
            reason: format!("the request rate must be a positive number, not {rate}"),
        });
    }
    let mean = 1.0 / rate;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut gaps: Box<dyn FnMut() -> f64> = match arrival {
        Arrival::Poisson => {
            let d = Exp::new(rate).map_err(|e| Error::InvalidArrival {
                reason: e.to_string(),
            })?;
            Box::new(move || d.sample(&mut rng))
        }
        Arrival::Constant => Box::new(move || mean),
        Arrival::Gamma { burstiness } => {
            if !(burstiness.is_finite() && burstiness > 0.0) {
                return Err(Error::InvalidArrival {
                    reason: format!("burstiness must be a positive number, not {burstiness}"),
                });
            }
            let d =
                Gamma::new(burstiness, mean / burstiness).map_err(|e| Error::InvalidArrival {
                    reason: e.to_string(),
                })?;
            Box::new(move || d.sample(&mut rng))
        }
    };
    let mut t = 0.0f64;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if i > 0 {
            t += gaps();
        }
        out.push(Duration::from_secs_f64(t));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::{ContinuousCDF, Exp as ExpDist};

    fn gaps(s: &[Duration]) -> Vec<f64> {
        s.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect()
    }

    fn cv(x: &[f64]) -> f64 {
        let n = x.len() as f64;
        let m = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0);
        var.sqrt() / m
    }

    /// Kolmogorov–Smirnov statistic of `x` against `cdf`.
    fn ks(mut x: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
        x.sort_by(f64::total_cmp);
        let n = x.len() as f64;
        x.iter()
            .enumerate()
            .map(|(i, &v)| {
                let f = cdf(v);
                (f - i as f64 / n).max((i + 1) as f64 / n - f)
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn poisson_gaps_pass_a_kolmogorov_smirnov_test_against_the_exponential() {
        let rate = 40.0;
        let n = 5000;
        let g = gaps(&schedule(Arrival::Poisson, rate, n + 1, 11).unwrap());
        let exp = ExpDist::new(rate).unwrap();
        let d = ks(g.clone(), |v| exp.cdf(v));
        // Critical value at α = 0.05: 1.358 / √n.
        let critical = 1.358 / (n as f64).sqrt();
        assert!(d < critical, "KS D = {d} >= {critical}");
        // And the test has power: constant gaps fail it.
        let c = gaps(&schedule(Arrival::Constant, rate, n + 1, 11).unwrap());
        assert!(ks(c, |v| exp.cdf(v)) > critical);
        let mean = g.iter().sum::<f64>() / n as f64;
        assert!((mean - 1.0 / rate).abs() < 0.05 / rate, "{mean}");
    }

    #[test]
    fn constant_gaps_are_constant_and_gamma_cv_follows_burstiness() {
        let c = gaps(&schedule(Arrival::Constant, 8.0, 100, 1).unwrap());
        assert!(c.iter().all(|g| (g - 0.125).abs() < 1e-9), "{c:?}");
        for b in [0.25, 1.0, 4.0] {
            let g = gaps(&schedule(Arrival::Gamma { burstiness: b }, 10.0, 20_001, 5).unwrap());
            let want = 1.0 / b.sqrt();
            assert!((cv(&g) - want).abs() < 0.05 * want, "b {b}: cv {}", cv(&g));
            let mean = g.iter().sum::<f64>() / g.len() as f64;
            assert!((mean - 0.1).abs() < 0.005, "b {b}: mean {mean}");
        }
    }

    #[test]
    fn bad_rates_and_names_are_errors() {
        assert!(schedule(Arrival::Poisson, 0.0, 3, 0).is_err());
        assert!(schedule(Arrival::Constant, f64::NAN, 3, 0).is_err());
        assert!(schedule(Arrival::Gamma { burstiness: 0.0 }, 1.0, 3, 0).is_err());
        assert!(Arrival::parse("weibull", None).is_err());
        assert!(Arrival::parse("poisson", Some(2.0)).is_err());
        assert_eq!(
            Arrival::parse("gamma", Some(2.0)).unwrap(),
            Arrival::Gamma { burstiness: 2.0 }
        );
        assert_eq!(schedule(Arrival::Poisson, 5.0, 0, 0).unwrap(), vec![]);
    }
}
