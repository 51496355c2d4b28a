//! Multi-run confidence: for a statistic measured once per run (p99 TTFT of run 1, of run 2,
//! ...), the mean across runs with its sample standard deviation, coefficient of variation,
//! standard error and a Student-t confidence interval; and the rule that stops repeating runs
//! once a chosen statistic has converged.
//!
//! The t quantile comes from `statrs`; everything else is arithmetic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::{LevelSummary, PERCENTILES};

/// A statistic's spread across runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStatistic {
    /// Mean across runs.
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 with one run.
    pub std: f64,
    /// Smallest run value.
    pub min: f64,
    /// Largest run value.
    pub max: f64,
    /// std / |mean| (infinite when the mean is 0 and the std is not; 0 when both are).
    pub cv: f64,
    /// Standard error of the mean: std / √n.
    pub se: f64,
    /// Lower end of the confidence interval of the mean (absent with fewer than 2 runs).
    pub ci_low: Option<f64>,
    /// Upper end of the confidence interval of the mean.
    pub ci_high: Option<f64>,
    /// The Student-t critical value used (n − 1 degrees of freedom).
    pub t_critical: Option<f64>,
    /// Runs that gave a value.
    pub n: usize,
    /// Display unit.
    pub unit: String,
}

impl RunStatistic {
    /// The spread of `values` (one per run) with a `confidence` interval (0 < confidence < 1).
    /// `None` for no values or a confidence level outside (0, 1).
    pub fn of(values: &[f64], confidence: f64, unit: &str) -> Option<Self> {
        if values.is_empty() || !(confidence > 0.0 && confidence < 1.0) {
            return None;
        }
        let n = values.len();
        let nf = n as f64;
        let mean = values.iter().sum::<f64>() / nf;
        let std = if n > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (nf - 1.0)).sqrt()
        } else {
            0.0
        };
        let se = std / nf.sqrt();
        let t = t_critical(n, confidence);
        let cv = if mean != 0.0 {
            std / mean.abs()
        } else if std == 0.0 {
            0.0
        } else {
            f64::INFINITY
        };
        Some(RunStatistic {
            mean,
            std,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            cv,
            se,
            ci_low: t.map(|t| mean - t * se),
            ci_high: t.map(|t| mean + t * se),
            t_critical: t,
            n,
            unit: unit.to_owned(),
        })
    }

    /// Width of the confidence interval relative to |mean| (`None` without an interval;
    /// infinite for a zero mean with a non-zero width).
    pub fn relative_ci_width(&self) -> Option<f64> {
        let w = self.ci_high? - self.ci_low?;
        Some(if self.mean != 0.0 {
            w / self.mean.abs()
        } else if w == 0.0 {
            0.0
        } else {
            f64::INFINITY
        })
    }
}

/// The two-sided Student-t critical value for `n` samples (n − 1 degrees of freedom).
pub fn t_critical(n: usize, confidence: f64) -> Option<f64> {
    if n < 2 || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?;
    Some(t.inverse_cdf(1.0 - (1.0 - confidence) / 2.0))
}

/// Every summary statistic of a level, keyed `<metric>_<stat>` (`time_to_first_token_p99`,
/// `request_throughput_avg`, ...), with its unit: the values aggregated across runs.
pub fn summary_values(s: &LevelSummary) -> BTreeMap<String, (f64, String)> {
    let mut out = BTreeMap::new();
    for (name, m) in &s.metrics {
        for stat in ["avg", "min", "max", "std"]
            .into_iter()
            .chain(PERCENTILES.iter().map(|(label, _)| *label))
        {
            if let Some(v) = m.stats.get(stat) {
                out.insert(format!("{name}_{stat}"), (v, m.unit.clone()));
            }
        }
    }
    let mut scalar = |k: &str, v: f64, unit: &str| {
        out.insert(format!("{k}_avg"), (v, unit.to_owned()));
    };
    scalar("request_throughput", s.request_throughput, "requests/sec");
    scalar(
        "output_token_throughput",
        s.output_token_throughput,
        "tokens/sec",
    );
    scalar("error_rate", s.error_rate, "ratio");
    scalar("benchmark_duration", s.benchmark_duration_s, "sec");
    if let Some(g) = s.goodput {
        scalar("goodput", g, "requests/sec");
    }
    if let Some(m) = s.slo_miss_rate {
        scalar("slo_miss_rate", m, "ratio");
    }
    out
}

/// The statistics of several runs of one level, aggregated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunAggregate {
    /// The confidence level of the intervals.
    pub confidence_level: f64,
    /// The runs' labels (`run_0001`, ...), in order.
    pub run_labels: Vec<String>,
    /// Per statistic (`<metric>_<stat>`).
    pub metrics: BTreeMap<String, RunStatistic>,
}

impl RunAggregate {
    /// Aggregates the runs' summaries. A statistic missing from some runs is aggregated over
    /// the runs that have it.
    pub fn of(runs: &[(String, &LevelSummary)], confidence: f64) -> Self {
        let mut cols: BTreeMap<String, (Vec<f64>, String)> = BTreeMap::new();
        for (_, s) in runs {
            for (k, (v, unit)) in summary_values(s) {
                let e = cols.entry(k).or_insert_with(|| (Vec::new(), unit));
                e.0.push(v);
            }
        }
        RunAggregate {
            confidence_level: confidence,
            run_labels: runs.iter().map(|(l, _)| l.clone()).collect(),
            metrics: cols
                .into_iter()
                .filter_map(|(k, (v, unit))| {
                    RunStatistic::of(&v, confidence, &unit).map(|s| (k, s))
                })
                .collect(),
        }
    }
}

/// How convergence is judged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Criterion {
    /// The confidence interval's width relative to the mean is at most `max`.
    CiWidth {
        /// E.g. 0.05 for an interval no wider than 5 % of the mean.
        max: f64,
    },
    /// The coefficient of variation across runs is at most `max`.
    Cv {
        /// E.g. 0.05.
        max: f64,
    },
}

/// When to stop repeating runs of a level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvergenceRule {
    /// The statistic watched, `<metric>_<stat>` (e.g. `time_to_first_token_p99`).
    pub statistic: String,
    /// The test.
    pub criterion: Criterion,
    /// Runs before the test may stop (at least 2).
    pub min_runs: usize,
    /// Confidence level of the interval.
    pub confidence: f64,
}

/// Whether to run again, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum Convergence {
    /// Not converged yet (or too few runs): run again.
    Continue {
        /// Why.
        reason: String,
    },
    /// Converged: stop.
    Converged {
        /// Why.
        reason: String,
    },
}

impl ConvergenceRule {
    /// Judges the watched statistic's values so far (one per run).
    pub fn judge(&self, values: &[f64]) -> Convergence {
        let n = values.len();
        let min = self.min_runs.max(2);
        let Some(s) = RunStatistic::of(values, self.confidence, "") else {
            return Convergence::Continue {
                reason: format!("no value of {} yet", self.statistic),
            };
        };
        if n < min {
            return Convergence::Continue {
                reason: format!("{n} of at least {min} runs"),
            };
        }
        let (what, value, max) = match self.criterion {
            Criterion::CiWidth { max } => (
                format!(
                    "{:.0} % interval width / mean of {}",
                    self.confidence * 100.0,
                    self.statistic
                ),
                s.relative_ci_width().unwrap_or(f64::INFINITY),
                max,
            ),
            Criterion::Cv { max } => (format!("CV of {}", self.statistic), s.cv, max),
        };
        if value <= max {
            Convergence::Converged {
                reason: format!("{what} = {value:.4} <= {max} after {n} runs"),
            }
        } else {
            Convergence::Continue {
                reason: format!("{what} = {value:.4} > {max} after {n} runs"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn repeated_runs_carry_goodput_and_the_miss_rate() {
        let mut s = crate::summary::tests::sample_summary();
        assert!(!summary_values(&s).contains_key("slo_miss_rate_avg"));
        s.goodput = Some(2.0);
        s.slo_miss_rate = Some(0.25);
        let values = summary_values(&s);
        assert_eq!(values["slo_miss_rate_avg"], (0.25, "ratio".to_owned()));
        assert_eq!(values["goodput_avg"].0, 2.0);
    }

    #[test]
    fn matches_published_t_values_and_the_aiperf_example() {
        // t(0.975, 4) = 2.776, t(0.975, 9) = 2.262, t(0.995, 4) = 4.604.
        assert!((t_critical(5, 0.95).unwrap() - 2.7764).abs() < 1e-3);
        assert!((t_critical(10, 0.95).unwrap() - 2.2622).abs() < 1e-3);
        assert!((t_critical(5, 0.99).unwrap() - 4.6041).abs() < 1e-3);
        assert_eq!(t_critical(1, 0.95), None);
        let s = RunStatistic::of(&[150.0, 152.0, 148.0, 155.0, 151.0], 0.95, "ms").unwrap();
        assert!((s.mean - 151.2).abs() < 1e-9);
        assert!((s.std - 2.588).abs() < 1e-3);
        assert!((s.se - 1.1576).abs() < 1e-3);
        assert!((s.ci_low.unwrap() - 147.99).abs() < 0.01);
        assert!((s.ci_high.unwrap() - 154.41).abs() < 0.01);
        assert!((s.cv - 0.01712).abs() < 1e-4);
        let one = RunStatistic::of(&[3.0], 0.95, "ms").unwrap();
        assert_eq!((one.std, one.ci_low), (0.0, None));
        assert!(RunStatistic::of(&[], 0.95, "ms").is_none());
        assert!(RunStatistic::of(&[1.0], 1.5, "ms").is_none());
    }

    /// Over many simulated repetitions of a metric with a known mean, the 95 % interval from
    /// 5 runs covers it in 93–97 % of cases.
    #[test]
    fn the_95_percent_interval_covers_the_true_mean_95_percent_of_the_time() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let normal = rand_distr::Normal::new(120.0, 15.0).unwrap();
        let trials = 4000;
        let mut covered = 0;
        for _ in 0..trials {
            let runs: Vec<f64> = (0..5).map(|_| rng.sample(normal)).collect();
            let s = RunStatistic::of(&runs, 0.95, "ms").unwrap();
            if s.ci_low.unwrap() <= 120.0 && 120.0 <= s.ci_high.unwrap() {
                covered += 1;
            }
        }
        let rate = covered as f64 / trials as f64;
        assert!((0.93..=0.97).contains(&rate), "coverage {rate}");
    }

    #[test]
    fn convergence_waits_for_min_runs_and_says_why() {
        let rule = ConvergenceRule {
            statistic: "time_to_first_token_p99".into(),
            criterion: Criterion::Cv { max: 0.05 },
            min_runs: 3,
            confidence: 0.95,
        };
        assert!(matches!(
            rule.judge(&[100.0, 100.5]),
            Convergence::Continue { .. }
        ));
        let Convergence::Converged { reason } = rule.judge(&[100.0, 100.5, 99.8]) else {
            panic!("should converge")
        };
        assert!(reason.contains("CV of time_to_first_token_p99"), "{reason}");
        assert!(matches!(
            rule.judge(&[100.0, 150.0, 70.0]),
            Convergence::Continue { .. }
        ));
        let ci = ConvergenceRule {
            criterion: Criterion::CiWidth { max: 0.02 },
            ..rule
        };
        assert!(matches!(
            ci.judge(&[100.0, 101.0, 99.0]),
            Convergence::Continue { .. }
        ));
        assert!(matches!(
            ci.judge(&[100.0, 100.1, 99.9, 100.0]),
            Convergence::Converged { .. }
        ));
    }
}
