//! `kneepoint compare`: two runs of the same levels, per level and metric, with bootstrap
//! intervals (moving blocks of one level's concurrency) on the per-request values and a verdict (see [`kneepoint_metrics::compare_samples`]).

use std::fmt::Write as _;

use kneepoint_core::Phase;
use kneepoint_metrics::{
    compare_samples, compare_values, CompareConfig, Difference, RequestMetrics, Scale, Statistic,
    Verdict,
};
use serde::{Deserialize, Serialize};

use crate::artifact::{Artifact, Level, RunKind};
use crate::Error;

/// One metric of one level in both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricComparison {
    /// The metric (AIPerf's name).
    pub metric: String,
    /// One entry per statistic.
    pub differences: Vec<Difference>,
}

/// One level present in both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelComparison {
    /// The level's concurrency.
    pub concurrency: u32,
    /// Requests measured in run A and run B.
    pub requests: (usize, usize),
    /// Every metric compared.
    pub metrics: Vec<MetricComparison>,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The settings used.
    pub config: CompareConfig,
    /// Levels run in both, by concurrency.
    pub levels: Vec<LevelComparison>,
    /// Concurrencies run in only one of the two.
    pub unmatched: Vec<u32>,
    /// Regressed when any statistic regressed; improved when some improved and none regressed.
    pub verdict: Verdict,
}

impl Comparison {
    /// Every regressed statistic, as `(concurrency, metric, difference)`.
    pub fn regressions(&self) -> Vec<(u32, &str, &Difference)> {
        self.levels
            .iter()
            .flat_map(|l| {
                l.metrics.iter().flat_map(move |m| {
                    m.differences
                        .iter()
                        .filter(|d| d.verdict == Verdict::Regressed)
                        .map(move |d| (l.concurrency, m.metric.as_str(), d))
                })
            })
            .collect()
    }
}

/// Per-request metrics compared: name, quantiles, and the smallest change that counts, in ms
/// (ITL is an average over many gaps, so it is precise to well under a millisecond).
const LATENCY_METRICS: [(&str, &[f64], f64); 3] = [
    ("time_to_first_token", &[0.5, 0.9, 0.99], 1.0),
    ("inter_token_latency", &[0.5, 0.99], 0.1),
    ("request_latency", &[0.5, 0.9, 0.99], 1.0),
];

/// Measured records in the order they started.
fn measured(l: &Level) -> Vec<&kneepoint_core::RequestRecord> {
    let mut v: Vec<_> = l
        .records
        .iter()
        .filter(|r| r.phase == Phase::Profiling)
        .collect();
    v.sort_by_key(|r| (r.origin_unix_ns + r.start_ns, r.request_id));
    v
}

fn samples(l: &Level, metric: &str) -> Vec<f64> {
    measured(l)
        .into_iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| {
            let m = RequestMetrics::of(r);
            match metric {
                "time_to_first_token" => m.ttft_ms,
                "inter_token_latency" => m.itl_ms,
                _ => m.request_latency_ms,
            }
        })
        .collect()
}

fn errors(l: &Level) -> Vec<f64> {
    measured(l)
        .into_iter()
        .map(|r| f64::from(u8::from(!r.is_ok())))
        .collect()
}

fn level(a: &Level, b: &Level, config: &CompareConfig) -> LevelComparison {
    let mut metrics = Vec::new();
    for (i, (name, qs, min_ms)) in LATENCY_METRICS.iter().enumerate() {
        let stats: Vec<Statistic> = qs.iter().map(|&q| Statistic::Quantile(q)).collect();
        let cfg = CompareConfig {
            seed: config.seed.wrapping_add(i as u64),
            min_effect: config.min_effect.min(*min_ms),
            ..*config
        };
        let block = a.concurrency.max(1) as usize;
        let diffs = compare_samples(
            &samples(a, name),
            &samples(b, name),
            block,
            &stats,
            Scale::Relative,
            false,
            &cfg,
        );
        metrics.push(MetricComparison {
            metric: (*name).into(),
            differences: diffs.into_iter().flatten().collect(),
        });
    }
    metrics.push(MetricComparison {
        metric: "output_token_throughput".into(),
        differences: compare_values(
            "avg",
            a.summary.output_token_throughput,
            b.summary.output_token_throughput,
            Scale::Relative,
            true,
            config,
        )
        .into_iter()
        .collect(),
    });
    metrics.push(MetricComparison {
        metric: "error_rate".into(),
        differences: compare_samples(
            &errors(a),
            &errors(b),
            a.concurrency.max(1) as usize,
            &[Statistic::Mean],
            Scale::Absolute,
            false,
            config,
        )
        .into_iter()
        .flatten()
        .collect(),
    });
    LevelComparison {
        concurrency: a.concurrency,
        requests: (a.summary.request_count, b.summary.request_count),
        metrics,
    }
}

/// The last level of each concurrency (a search may probe one twice).
fn by_concurrency(a: &Artifact) -> std::collections::BTreeMap<u32, &Level> {
    a.levels.iter().map(|l| (l.concurrency, l)).collect()
}

/// Compares run `b` against run `a` (the baseline), level by level.
pub fn compare_runs(
    a: &Artifact,
    b: &Artifact,
    config: &CompareConfig,
) -> Result<Comparison, Error> {
    if a.kind == RunKind::Recommend || b.kind == RunKind::Recommend {
        return Err(Error::Compare {
            reason: "compare the candidates' own run folders, not a recommendation".into(),
        });
    }
    let (la, lb) = (by_concurrency(a), by_concurrency(b));
    let levels: Vec<LevelComparison> = la
        .iter()
        .filter_map(|(c, x)| lb.get(c).map(|y| level(x, y, config)))
        .collect();
    if levels.is_empty() {
        return Err(Error::Compare {
            reason: format!(
                "the runs share no concurrency level (A: {:?}, B: {:?})",
                la.keys().collect::<Vec<_>>(),
                lb.keys().collect::<Vec<_>>()
            ),
        });
    }
    let unmatched = la
        .keys()
        .filter(|c| !lb.contains_key(c))
        .chain(lb.keys().filter(|c| !la.contains_key(c)))
        .copied()
        .collect();
    let all = levels
        .iter()
        .flat_map(|l| l.metrics.iter().flat_map(|m| m.differences.iter()));
    let (mut regressed, mut improved) = (false, false);
    for d in all {
        regressed |= d.verdict == Verdict::Regressed;
        improved |= d.verdict == Verdict::Improved;
    }
    Ok(Comparison {
        config: *config,
        levels,
        unmatched,
        verdict: if regressed {
            Verdict::Regressed
        } else if improved {
            Verdict::Improved
        } else {
            Verdict::NoSignificantChange
        },
    })
}

fn pct(d: &Difference, v: f64) -> String {
    match d.scale {
        Scale::Relative => format!("{:+.1} %", v * 100.0),
        Scale::Absolute => format!("{:+.2} pp", v * 100.0),
    }
}

/// The comparison as a terminal table.
pub fn comparison_text(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:>11}  {:<24} {:>5} {:>12} {:>12} {:>9}  {:<22} verdict",
        "concurrency", "metric", "stat", "A", "B", "change", "interval"
    );
    for l in &c.levels {
        for m in &l.metrics {
            for d in &m.differences {
                let ci = match (d.ci_low, d.ci_high) {
                    (Some(lo), Some(hi)) => format!("[{}, {}]", pct(d, lo), pct(d, hi)),
                    _ => "(one value per run)".into(),
                };
                let _ = writeln!(
                    o,
                    "{:>11}  {:<24} {:>5} {:>12.3} {:>12.3} {:>9}  {:<22} {}",
                    l.concurrency,
                    m.metric,
                    d.stat,
                    d.a,
                    d.b,
                    pct(d, d.change),
                    ci,
                    d.verdict
                );
            }
        }
    }
    if !c.unmatched.is_empty() {
        let _ = writeln!(
            o,
            "levels in only one run (not compared): {:?}",
            c.unmatched
        );
    }
    let _ = writeln!(
        o,
        "overall: {} (tolerance {:.0} % relative and at least {} ms ({} ms for ITL), {:.1} pp for the error rate; {:.0} % bootstrap intervals, {} resamples)",
        c.verdict,
        c.config.tolerance * 100.0,
        c.config.min_effect,
        c.config.min_effect.min(LATENCY_METRICS[1].2),
        c.config.absolute_tolerance * 100.0,
        c.config.confidence * 100.0,
        c.config.resamples
    );
    o
}
