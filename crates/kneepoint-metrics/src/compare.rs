//! Comparing two runs of the same level: per metric and statistic, the change from run A to
//! run B with a bootstrap confidence interval, and a verdict.
//!
//! Each run's per-request values are resampled (independently, `resamples` times) by a moving
//! block bootstrap: values in the order the requests started, drawn in runs of `block`
//! consecutive requests. Requests that were in flight together shared the server's batches, so
//! their latencies move together; resampling whole blocks (a block as long as the level's
//! concurrency, one "wave" of requests) keeps that dependence and widens the interval honestly,
//! where resampling single requests would pretend every request were independent. The statistic
//! is computed on each resample and the interval is the percentile interval of the change. The verdict is *regressed* when the interval lies wholly on the worse
//! side of zero **and** the estimated change is beyond the tolerance, *improved* for the mirror
//! case, and *no significant change* otherwise (not significant, or significant but too small to
//! matter). Requests of one closed-loop level share the server's batches, so they are not
//! independent and the interval is somewhat too narrow; the tolerance guards against calling
//! that noise a regression. A bootstrap is written here (a few lines over `rand`) because no
//! maintained crate offers a percentile bootstrap of arbitrary quantiles.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::quantile_sorted;

/// A statistic of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Statistic {
    /// The arithmetic mean.
    Mean,
    /// A quantile in 0..=1 (numpy-linear).
    Quantile(f64),
}

impl Statistic {
    /// `avg`, `p50`, `p99`, ...
    pub fn label(&self) -> String {
        match self {
            Statistic::Mean => "avg".into(),
            Statistic::Quantile(q) => format!("p{}", (q * 100.0).round()),
        }
    }

    fn of_sorted(&self, sorted: &[f64]) -> Option<f64> {
        match self {
            Statistic::Mean => {
                (!sorted.is_empty()).then(|| sorted.iter().sum::<f64>() / sorted.len() as f64)
            }
            Statistic::Quantile(q) => quantile_sorted(sorted, *q),
        }
    }
}

/// How a change is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// `(b − a) / a` (latencies, throughputs).
    Relative,
    /// `b − a` (rates near zero, such as the error rate).
    Absolute,
}

/// The verdict on one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse beyond the tolerance, with the whole interval beyond it.
    Regressed,
    /// Better beyond the tolerance, with the whole interval beyond it.
    Improved,
    /// Neither.
    NoSignificantChange,
    /// A percentile whose tail holds fewer than [`MIN_TAIL_SAMPLES`] samples in a run: shown,
    /// never judged (p99 of 128 requests is the second-largest value, at the mercy of one
    /// hiccup).
    TooFewSamples,
}

/// Samples beyond a percentile that each run needs before the percentile is judged:
/// `n × (1 − q) ≥ 10` (p99 needs 1,000 samples, p90 100, p50 20).
pub const MIN_TAIL_SAMPLES: f64 = 10.0;

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::NoSignificantChange => "no significant change",
            Verdict::TooFewSamples => "too few samples to judge",
        })
    }
}

/// Settings of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompareConfig {
    /// Confidence level of the interval (0.95).
    pub confidence: f64,
    /// Bootstrap resamples (1,000).
    pub resamples: usize,
    /// Relative changes within ± this are not called regressions (0.05 = 5 %).
    pub tolerance: f64,
    /// Absolute changes within ± this are not called regressions (0.01 = 1 percentage point).
    pub absolute_tolerance: f64,
    /// For per-request samples on the relative scale: a change must also move the statistic by
    /// at least this much in the metric's own unit (1.0 = 1 ms for latencies), so that a
    /// 0.4 → 0.5 ms TTFT on a loopback simulator is not a "25 % regression".
    pub min_effect: f64,
    /// Seed of the resampling, so a comparison is repeatable.
    pub seed: u64,
}

impl Default for CompareConfig {
    fn default() -> Self {
        CompareConfig {
            confidence: 0.95,
            resamples: 1000,
            tolerance: 0.05,
            absolute_tolerance: 0.01,
            min_effect: 1.0,
            seed: 0,
        }
    }
}

/// The change of one statistic from run A to run B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// The statistic.
    pub stat: String,
    /// Its value in run A.
    pub a: f64,
    /// Its value in run B.
    pub b: f64,
    /// How the change is measured.
    pub scale: Scale,
    /// The estimated change (relative or absolute).
    pub change: f64,
    /// Lower end of the interval of the change; `None` without per-request samples.
    pub ci_low: Option<f64>,
    /// Upper end of the interval.
    pub ci_high: Option<f64>,
    /// True when larger values are better (throughput).
    pub higher_is_better: bool,
    /// The verdict.
    pub verdict: Verdict,
}

fn change(a: f64, b: f64, scale: Scale) -> Option<f64> {
    match scale {
        Scale::Absolute => Some(b - a),
        Scale::Relative if a.abs() > 0.0 => Some((b - a) / a.abs()),
        Scale::Relative => None,
    }
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_unstable_by(f64::total_cmp);
    s
}

fn verdict(change: f64, ci: Option<(f64, f64)>, higher_is_better: bool, tolerance: f64) -> Verdict {
    // Orient so that positive means worse.
    let sign = if higher_is_better { -1.0 } else { 1.0 };
    let worse = sign * change;
    let (lo, hi) = match ci {
        Some((l, h)) => {
            let (l, h) = (sign * l, sign * h);
            (l.min(h), l.max(h))
        }
        None => (worse, worse),
    };
    // The whole interval must lie beyond the tolerance: a change is called only when it is
    // confidently larger than what is tolerated (single runs do not see run-to-run variance,
    // so "excludes zero" alone flags reruns of the same server).
    if worse > tolerance && lo > tolerance {
        Verdict::Regressed
    } else if worse < -tolerance && hi < -tolerance {
        Verdict::Improved
    } else {
        Verdict::NoSignificantChange
    }
}

/// Fills `out` with a moving-block resample of `v` (blocks of `block` consecutive values).
fn resample_blocks(v: &[f64], block: usize, rng: &mut StdRng, out: &mut [f64]) {
    let block = block.clamp(1, v.len());
    let starts = v.len() - block + 1;
    let mut i = 0;
    while i < out.len() {
        let s = rng.random_range(0..starts);
        for &x in &v[s..s + block] {
            if i == out.len() {
                break;
            }
            out[i] = x;
            i += 1;
        }
    }
}

/// Compares `stats` of two samples of per-request values, each in the order the requests
/// started, resampled in blocks of `block` consecutive requests (1 for independent values; the
/// level's concurrency for a closed-loop level). `None` for a statistic that is undefined (an
/// empty sample, or a relative change from zero).
pub fn compare_samples(
    a: &[f64],
    b: &[f64],
    block: usize,
    stats: &[Statistic],
    scale: Scale,
    higher_is_better: bool,
    config: &CompareConfig,
) -> Vec<Option<Difference>> {
    let finite = |v: &[f64]| -> Vec<f64> { v.iter().copied().filter(|x| x.is_finite()).collect() };
    let (oa, ob) = (finite(a), finite(b));
    let (sa, sb) = (sorted(a), sorted(b));
    let mut rng = StdRng::seed_from_u64(config.seed);
    let n = config.resamples.max(1);
    let mut draws: Vec<Vec<f64>> = vec![Vec::with_capacity(n); stats.len()];
    if !sa.is_empty() && !sb.is_empty() {
        let (mut ra, mut rb) = (vec![0.0; sa.len()], vec![0.0; sb.len()]);
        for _ in 0..n {
            resample_blocks(&oa, block, &mut rng, &mut ra);
            resample_blocks(&ob, block, &mut rng, &mut rb);
            ra.sort_unstable_by(f64::total_cmp);
            rb.sort_unstable_by(f64::total_cmp);
            for (i, st) in stats.iter().enumerate() {
                if let Some(c) = st
                    .of_sorted(&ra)
                    .zip(st.of_sorted(&rb))
                    .and_then(|(x, y)| change(x, y, scale))
                {
                    draws[i].push(c);
                }
            }
        }
    }
    let tolerance = match scale {
        Scale::Relative => config.tolerance,
        Scale::Absolute => config.absolute_tolerance,
    };
    let alpha = (1.0 - config.confidence).clamp(0.0, 1.0);
    stats
        .iter()
        .zip(draws.iter_mut())
        .map(|(st, d)| {
            let (va, vb) = (st.of_sorted(&sa)?, st.of_sorted(&sb)?);
            let c = change(va, vb, scale)?;
            d.sort_unstable_by(f64::total_cmp);
            let ci = quantile_sorted(d, alpha / 2.0).zip(quantile_sorted(d, 1.0 - alpha / 2.0));
            let negligible = scale == Scale::Relative && (vb - va).abs() < config.min_effect;
            let thin_tail = match st {
                Statistic::Quantile(q) => {
                    (oa.len().min(ob.len()) as f64) * (1.0 - q.max(1.0 - q)) < MIN_TAIL_SAMPLES
                }
                Statistic::Mean => false,
            };
            Some(Difference {
                stat: st.label(),
                a: va,
                b: vb,
                scale,
                change: c,
                ci_low: ci.map(|x| x.0),
                ci_high: ci.map(|x| x.1),
                higher_is_better,
                verdict: if thin_tail {
                    Verdict::TooFewSamples
                } else if negligible {
                    Verdict::NoSignificantChange
                } else {
                    verdict(c, ci, higher_is_better, tolerance)
                },
            })
        })
        .collect()
}

/// Compares two single values (a level's throughput, one per run): no interval, so the verdict
/// rests on the tolerance alone.
pub fn compare_values(
    stat: &str,
    a: f64,
    b: f64,
    scale: Scale,
    higher_is_better: bool,
    config: &CompareConfig,
) -> Option<Difference> {
    let c = change(a, b, scale)?;
    let tolerance = match scale {
        Scale::Relative => config.tolerance,
        Scale::Absolute => config.absolute_tolerance,
    };
    Some(Difference {
        stat: stat.into(),
        a,
        b,
        scale,
        change: c,
        ci_low: None,
        ci_high: None,
        higher_is_better,
        verdict: verdict(c, None, higher_is_better, tolerance),
    })
}

/// Compares a statistic measured once per run in each of two sets of runs (`a`, `b`: one value
/// per run): the interval is Welch's t on the difference of the run means, so it holds the
/// variance between runs (a busy host, a container restart), which no within-run bootstrap
/// sees. `None` with fewer than two runs on a side or a zero baseline on the relative scale.
pub fn compare_run_values(
    stat: &str,
    a: &[f64],
    b: &[f64],
    scale: Scale,
    higher_is_better: bool,
    config: &CompareConfig,
) -> Option<Difference> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let finite = |v: &[f64]| -> Vec<f64> { v.iter().copied().filter(|x| x.is_finite()).collect() };
    let (a, b) = (finite(a), finite(b));
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let var =
        |v: &[f64], m: f64| v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    let (ma, mb) = (mean(&a), mean(&b));
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (qa, qb) = (var(&a, ma) / na, var(&b, mb) / nb);
    let se = (qa + qb).sqrt();
    let df = if se > 0.0 {
        (qa + qb).powi(2) / (qa.powi(2) / (na - 1.0) + qb.powi(2) / (nb - 1.0))
    } else {
        na + nb - 2.0
    };
    let alpha = (1.0 - config.confidence).clamp(1e-9, 1.0);
    let t = StudentsT::new(0.0, 1.0, df.max(1.0))
        .ok()?
        .inverse_cdf(1.0 - alpha / 2.0);
    let c = change(ma, mb, scale)?;
    let half = t * se;
    let ci = match scale {
        Scale::Absolute => (mb - ma - half, mb - ma + half),
        Scale::Relative => ((mb - ma - half) / ma.abs(), (mb - ma + half) / ma.abs()),
    };
    let tolerance = match scale {
        Scale::Relative => config.tolerance,
        Scale::Absolute => config.absolute_tolerance,
    };
    let negligible = scale == Scale::Relative && (mb - ma).abs() < config.min_effect;
    Some(Difference {
        stat: stat.into(),
        a: ma,
        b: mb,
        scale,
        change: c,
        ci_low: Some(ci.0),
        ci_high: Some(ci.1),
        higher_is_better,
        verdict: if negligible {
            Verdict::NoSignificantChange
        } else {
            verdict(c, Some(ci), higher_is_better, tolerance)
        },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use rand_distr::{Distribution, LogNormal};

    fn sample(seed: u64, scale: f64, n: usize) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let d = LogNormal::new(3.0, 0.3).unwrap();
        (0..n).map(|_| d.sample(&mut rng) * scale).collect()
    }

    const STATS: [Statistic; 3] = [
        Statistic::Quantile(0.5),
        Statistic::Quantile(0.99),
        Statistic::Mean,
    ];

    /// Issue 20, item 11: three runs a side that scatter by ±10 % around the same value are no
    /// change, though each run's own interval would be narrow; a 50 % slowdown across all
    /// runs is a regression whatever the scatter.
    #[test]
    fn between_run_spread_decides_with_repeated_runs() {
        let cfg = CompareConfig {
            tolerance: 0.1,
            min_effect: 0.0,
            ..CompareConfig::default()
        };
        let a = [100.0, 110.0, 92.0];
        let rerun = [108.0, 95.0, 118.0];
        let d = compare_run_values("p50", &a, &rerun, Scale::Relative, false, &cfg).unwrap();
        assert_eq!(d.verdict, Verdict::NoSignificantChange, "{d:?}");
        assert!(d.ci_low.unwrap() < 0.0 && d.ci_high.unwrap() > 0.1, "{d:?}");
        let slow = [150.0, 160.0, 141.0];
        let d = compare_run_values("p50", &a, &slow, Scale::Relative, false, &cfg).unwrap();
        assert_eq!(d.verdict, Verdict::Regressed, "{d:?}");
        assert!(compare_run_values("p50", &[1.0], &slow, Scale::Relative, false, &cfg).is_none());
    }

    #[test]
    fn same_distribution_is_no_significant_change() {
        let r = compare_samples(
            &sample(1, 1.0, 1000),
            &sample(2, 1.0, 1000),
            1,
            &STATS,
            Scale::Relative,
            false,
            &CompareConfig::default(),
        );
        for d in r.into_iter().map(Option::unwrap) {
            assert_eq!(d.verdict, Verdict::NoSignificantChange, "{d:?}");
            assert!(d.ci_low.unwrap() < d.change && d.change < d.ci_high.unwrap());
        }
    }

    #[test]
    fn twenty_percent_slower_is_a_regression_and_faster_an_improvement() {
        let cfg = CompareConfig::default();
        let slow = compare_samples(
            &sample(1, 1.0, 1000),
            &sample(2, 1.2, 1000),
            1,
            &STATS,
            Scale::Relative,
            false,
            &cfg,
        );
        let d = slow[0].as_ref().unwrap();
        assert_eq!(d.verdict, Verdict::Regressed);
        assert!((d.change - 0.2).abs() < 0.06, "{d:?}");
        assert!(d.ci_low.unwrap() > 0.1 && d.ci_high.unwrap() < 0.3);
        let fast = compare_samples(
            &sample(1, 1.0, 1000),
            &sample(2, 0.8, 1000),
            1,
            &STATS[..1],
            Scale::Relative,
            false,
            &cfg,
        );
        assert_eq!(fast[0].as_ref().unwrap().verdict, Verdict::Improved);
        // For a higher-is-better quantity the same numbers read the other way round.
        let tput = compare_samples(
            &sample(1, 1.0, 1000),
            &sample(2, 0.8, 1000),
            1,
            &STATS[..1],
            Scale::Relative,
            true,
            &cfg,
        );
        assert_eq!(tput[0].as_ref().unwrap().verdict, Verdict::Regressed);
    }

    #[test]
    fn a_small_significant_change_within_tolerance_is_not_a_regression() {
        let r = compare_samples(
            &sample(1, 1.0, 5000),
            &sample(1, 1.02, 5000),
            1,
            &STATS[..1],
            Scale::Relative,
            false,
            &CompareConfig::default(),
        );
        let d = r[0].as_ref().unwrap();
        assert!(d.ci_low.unwrap() > 0.0, "{d:?}");
        assert_eq!(d.verdict, Verdict::NoSignificantChange);
    }

    /// p99 of 128 samples is the second-largest value: shown, not judged. p50 of the same
    /// samples is judged.
    #[test]
    fn a_thin_tail_is_not_judged() {
        let a: Vec<f64> = (0..128).map(|i| 10.0 + f64::from(i % 16)).collect();
        let mut b = a.clone();
        b[127] = 40.0;
        b[126] = 40.0;
        let stats = [Statistic::Quantile(0.99), Statistic::Quantile(0.5)];
        let r = compare_samples(
            &a,
            &b,
            1,
            &stats,
            Scale::Relative,
            false,
            &CompareConfig::default(),
        );
        assert_eq!(r[0].as_ref().unwrap().verdict, Verdict::TooFewSamples);
        assert_eq!(r[1].as_ref().unwrap().verdict, Verdict::NoSignificantChange);
        assert_eq!(
            Verdict::TooFewSamples.to_string(),
            "too few samples to judge"
        );
    }

    #[test]
    fn changes_below_the_minimum_effect_are_not_regressions() {
        let a: Vec<f64> = (0..500).map(|i| 0.4 + f64::from(i % 10) * 0.001).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.25).collect();
        let r = compare_samples(
            &a,
            &b,
            1,
            &STATS[..1],
            Scale::Relative,
            false,
            &CompareConfig::default(),
        );
        let d = r[0].as_ref().unwrap();
        assert!(d.change > 0.2 && d.ci_low.unwrap() > 0.0);
        assert_eq!(d.verdict, Verdict::NoSignificantChange);
    }

    #[test]
    fn error_rates_compare_on_an_absolute_scale() {
        let a: Vec<f64> = (0..1000).map(|i| f64::from(i % 100 == 0)).collect();
        let b: Vec<f64> = (0..1000).map(|i| f64::from(i % 10 == 0)).collect();
        let r = compare_samples(
            &a,
            &b,
            1,
            &[Statistic::Mean],
            Scale::Absolute,
            false,
            &CompareConfig::default(),
        );
        let d = r[0].as_ref().unwrap();
        assert!((d.change - 0.09).abs() < 1e-12);
        assert_eq!(d.verdict, Verdict::Regressed);
        let zero = vec![0.0; 10];
        let same = compare_samples(
            &zero,
            &zero,
            1,
            &[Statistic::Mean],
            Scale::Absolute,
            false,
            &CompareConfig::default(),
        );
        assert_eq!(
            same[0].as_ref().unwrap().verdict,
            Verdict::NoSignificantChange
        );
    }

    #[test]
    fn blocks_widen_the_interval_of_correlated_values() {
        // Waves of 16 requests share a random offset: the values are correlated in blocks.
        let waves = |seed: u64| -> Vec<f64> {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut v = Vec::new();
            for _ in 0..8 {
                let offset: f64 = rng.random_range(0.0..10.0);
                for _ in 0..16 {
                    v.push(50.0 + offset + rng.random_range(0.0..1.0));
                }
            }
            v
        };
        let (a, b) = (waves(1), waves(2));
        let cfg = CompareConfig::default();
        let width = |block| {
            let d = compare_samples(&a, &b, block, &STATS[..1], Scale::Relative, false, &cfg)
                .remove(0)
                .unwrap();
            d.ci_high.unwrap() - d.ci_low.unwrap()
        };
        assert!(width(16) > 1.3 * width(1), "{} vs {}", width(16), width(1));
        let mut out = vec![0.0; 5];
        resample_blocks(&[1.0, 2.0, 3.0], 2, &mut StdRng::seed_from_u64(0), &mut out);
        assert!(out.windows(2).any(|w| w[1] == w[0] + 1.0));
    }

    #[test]
    fn single_values_use_the_tolerance() {
        let cfg = CompareConfig::default();
        let d = compare_values("avg", 1000.0, 800.0, Scale::Relative, true, &cfg).unwrap();
        assert_eq!(d.verdict, Verdict::Regressed);
        let d = compare_values("avg", 1000.0, 990.0, Scale::Relative, true, &cfg).unwrap();
        assert_eq!(d.verdict, Verdict::NoSignificantChange);
        assert!(compare_values("avg", 0.0, 1.0, Scale::Relative, true, &cfg).is_none());
        assert!(compare_samples(&[], &[1.0], 1, &STATS, Scale::Relative, false, &cfg)[0].is_none());
    }
}
