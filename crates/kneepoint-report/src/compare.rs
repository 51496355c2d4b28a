//! `kneepoint compare`: two runs of the same levels, per level and metric, with bootstrap
//! intervals (moving blocks of one level's concurrency) on the per-request values and a verdict (see [`kneepoint_metrics::compare_samples`]).

use std::fmt::Write as _;

use kneepoint_core::{Metric, Phase, Stat};
use kneepoint_metrics::{
    compare_run_values, compare_samples, compare_values, CompareConfig, Difference, GoodputSlo,
    LevelSummary, RequestMetrics, Scale, Statistic, Verdict, MIN_TAIL_SAMPLES,
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
    /// Repeated runs of the level in A and in B (1: a single run). With two or more on both
    /// sides the verdicts rest on the spread between runs.
    #[serde(default = "one_each")]
    pub runs: (usize, usize),
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
    /// What the intervals can and cannot see (single runs cannot tell host noise between
    /// runs from a change).
    #[serde(default)]
    pub caveat: Option<String>,
}

fn one_each() -> (usize, usize) {
    (1, 1)
}

/// Printed and saved when a level was compared from single runs.
pub const SINGLE_RUN_CAVEAT: &str = "single runs: the intervals hold the noise within each run only, so a verdict cannot separate a change from host noise between the runs (a busy neighbour, a restarted container); repeat each side with --num-runs 3 or more to judge on the spread between runs";

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
const LATENCY_METRICS: [(Metric, &[f64], f64); 3] = [
    (Metric::TimeToFirstToken, &[0.5, 0.9, 0.99], 1.0),
    (Metric::InterTokenLatency, &[0.5, 0.99], 0.1),
    (Metric::RequestLatency, &[0.5, 0.9, 0.99], 1.0),
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

fn samples(l: &Level, metric: Metric) -> Vec<f64> {
    measured(l)
        .into_iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| {
            let m = RequestMetrics::of(r);
            match metric {
                Metric::TimeToFirstToken => m.ttft_ms,
                Metric::InterTokenLatency => m.itl_ms,
                _ => m.request_latency_ms,
            }
        })
        .collect()
}

/// The level's measured records grouped by run (each run of a repeated level has its own
/// origin), in run order.
fn runs(l: &Level) -> Vec<Vec<kneepoint_core::RequestRecord>> {
    let mut by_origin: std::collections::BTreeMap<u64, Vec<kneepoint_core::RequestRecord>> =
        Default::default();
    for r in measured(l) {
        by_origin
            .entry(r.origin_unix_ns)
            .or_default()
            .push(r.clone());
    }
    by_origin.into_values().collect()
}

/// One value of `stat` of `metric` per run, judged on the spread between runs; a percentile
/// whose tail holds fewer than [`MIN_TAIL_SAMPLES`] in some run is shown, not judged.
fn between_runs(
    metric: Metric,
    stat: Statistic,
    a: &[LevelSummary],
    b: &[LevelSummary],
    higher_is_better: bool,
    scale: Scale,
    config: &CompareConfig,
) -> Option<Difference> {
    let label = stat.label();
    let value = |s: &LevelSummary| match metric {
        Metric::OutputTokenThroughput => Some(s.output_token_throughput),
        Metric::ErrorRate => Some(s.error_rate),
        _ => s.value(metric, label.parse::<Stat>().ok()?),
    };
    let va: Vec<f64> = a.iter().filter_map(value).collect();
    let vb: Vec<f64> = b.iter().filter_map(value).collect();
    let mut d = compare_run_values(&label, &va, &vb, scale, higher_is_better, config)?;
    if let Statistic::Quantile(q) = stat {
        let fewest = a.iter().chain(b).map(|s| s.ok_count).min().unwrap_or(0);
        if (fewest as f64) * (1.0 - q.max(1.0 - q)) < MIN_TAIL_SAMPLES {
            d.verdict = Verdict::TooFewSamples;
        }
    }
    Some(d)
}

/// A level compared run against run (both sides repeated).
fn level_between_runs(
    a: &Level,
    b: &Level,
    ra: &[Vec<kneepoint_core::RequestRecord>],
    rb: &[Vec<kneepoint_core::RequestRecord>],
    config: &CompareConfig,
) -> LevelComparison {
    let summarise = |runs: &[Vec<kneepoint_core::RequestRecord>]| -> Vec<LevelSummary> {
        runs.iter()
            .map(|r| LevelSummary::from_records(a.concurrency, r, &GoodputSlo::default()))
            .collect()
    };
    let (sa, sb) = (summarise(ra), summarise(rb));
    let mut metrics = Vec::new();
    for &(metric, qs, min_ms) in LATENCY_METRICS.iter() {
        let cfg = CompareConfig {
            min_effect: config.min_effect.min(min_ms),
            ..*config
        };
        let differences = qs
            .iter()
            .filter_map(|&q| {
                between_runs(
                    metric,
                    Statistic::Quantile(q),
                    &sa,
                    &sb,
                    false,
                    Scale::Relative,
                    &cfg,
                )
            })
            .collect();
        metrics.push(MetricComparison {
            metric: metric.name().into(),
            differences,
        });
    }
    let tput = between_runs(
        Metric::OutputTokenThroughput,
        Statistic::Mean,
        &sa,
        &sb,
        true,
        Scale::Relative,
        &CompareConfig {
            min_effect: 0.0,
            ..*config
        },
    );
    metrics.push(MetricComparison {
        metric: "output_token_throughput".into(),
        differences: tput.into_iter().collect(),
    });
    let err = between_runs(
        Metric::ErrorRate,
        Statistic::Mean,
        &sa,
        &sb,
        false,
        Scale::Absolute,
        config,
    );
    metrics.push(MetricComparison {
        metric: "error_rate".into(),
        differences: err.into_iter().collect(),
    });
    LevelComparison {
        concurrency: a.concurrency,
        requests: (a.summary.request_count, b.summary.request_count),
        runs: (ra.len(), rb.len()),
        metrics,
    }
}

fn errors(l: &Level) -> Vec<f64> {
    measured(l)
        .into_iter()
        .map(|r| f64::from(u8::from(!r.is_ok())))
        .collect()
}

fn level(a: &Level, b: &Level, config: &CompareConfig) -> LevelComparison {
    let (ra, rb) = (runs(a), runs(b));
    if ra.len() >= 2 && rb.len() >= 2 {
        return level_between_runs(a, b, &ra, &rb, config);
    }
    let mut metrics = Vec::new();
    for (i, &(metric, qs, min_ms)) in LATENCY_METRICS.iter().enumerate() {
        let stats: Vec<Statistic> = qs.iter().map(|&q| Statistic::Quantile(q)).collect();
        let cfg = CompareConfig {
            seed: config.seed.wrapping_add(i as u64),
            min_effect: config.min_effect.min(min_ms),
            ..*config
        };
        let block = a.concurrency.max(1) as usize;
        let diffs = compare_samples(
            &samples(a, metric),
            &samples(b, metric),
            block,
            &stats,
            Scale::Relative,
            false,
            &cfg,
        );
        metrics.push(MetricComparison {
            metric: metric.name().into(),
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
        runs: (ra.len().max(1), rb.len().max(1)),
        metrics,
    }
}

/// The last level of each concurrency (a search may probe one twice).
fn by_concurrency(a: &Artifact) -> std::collections::BTreeMap<u32, &Level> {
    a.levels.iter().map(|l| (l.concurrency, l)).collect()
}

/// Refuses a run with a level compared with `other`'s that `report` would refuse (a records
/// file holding fewer measured records than the run saved) or that holds no measured record:
/// a lost file is not a regression.
fn refuse_unsound(name: &str, run: &Artifact, other: &Artifact) -> Result<(), Error> {
    let compared = |c: u32| other.levels.iter().any(|o| o.concurrency == c);
    for l in run.levels.iter().filter(|l| compared(l.concurrency)) {
        let at = run.root.join(&l.dir);
        let reason = match l.short() {
            Some((read, saved)) => format!(
                "{}: its records file holds {read} of the {saved} measured records the run saved (cut short or emptied): `kneepoint report --recompute` rebuilds it from what is left, marked partial",
                at.display()
            ),
            None if l.summary.request_count == 0 => format!(
                "{}: the level holds no measured record",
                at.display()
            ),
            None => continue,
        };
        return Err(Error::Compare {
            reason: format!("run {name}, {reason}"),
        });
    }
    Ok(())
}

/// Compares run `b` against run `a` (the baseline), level by level; refused
/// ([`Error::NotComparable`]) when they measured different workloads, targets, models or
/// time scales ([`differences`](crate::differences)).
pub fn compare_runs(
    a: &Artifact,
    b: &Artifact,
    config: &CompareConfig,
) -> Result<Comparison, Error> {
    let differences = crate::differences(a, b);
    if !differences.is_empty() {
        return Err(Error::NotComparable { differences });
    }
    compare_runs_forced(a, b, config)
}

/// [`compare_runs`] whatever the runs measured (`compare --force`).
pub fn compare_runs_forced(
    a: &Artifact,
    b: &Artifact,
    config: &CompareConfig,
) -> Result<Comparison, Error> {
    if a.kind == RunKind::Recommend || b.kind == RunKind::Recommend {
        return Err(Error::Compare {
            reason: "compare the candidates' own run folders, not a recommendation".into(),
        });
    }
    if a.kind == RunKind::Lengths || b.kind == RunKind::Lengths {
        // every length runs at one concurrency: matched by concurrency, they would collapse
        return Err(Error::Compare {
            reason: "compare matches levels by concurrency, and a length sweep's levels all share one: comparing length sweeps level by level is not supported yet (their length_sweep.json rows line up by isl and osl)".into(),
        });
    }
    refuse_unsound("A", a, b)?;
    refuse_unsound("B", b, a)?;
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
    let single = levels.iter().any(|l| l.runs.0 < 2 || l.runs.1 < 2);
    Ok(Comparison {
        caveat: single.then(|| SINGLE_RUN_CAVEAT.to_owned()),
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
            "levels in only one run (not compared): {}",
            c.unmatched
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let thin = c
        .levels
        .iter()
        .flat_map(|l| &l.metrics)
        .flat_map(|m| &m.differences)
        .any(|d| d.verdict == Verdict::TooFewSamples);
    if thin {
        let _ = writeln!(
            o,
            "too few samples: a percentile is judged only when each run holds at least {} requests beyond it (p99 needs 1,000 per level, p95 200, p90 100); more requests per level (--request-count) let it be judged",
            kneepoint_metrics::MIN_TAIL_SAMPLES
        );
    }
    if let Some(c) = &c.caveat {
        let _ = writeln!(o, "note: {c}");
    }
    let intervals = if c.caveat.is_none() {
        format!(
            "{:.0} % intervals between runs (Welch t on the run values)",
            c.config.confidence * 100.0
        )
    } else {
        format!(
            "{:.0} % bootstrap intervals within runs, {} resamples",
            c.config.confidence * 100.0,
            c.config.resamples
        )
    };
    let _ = writeln!(
        o,
        "overall: {} (tolerance {:.0} % relative and at least {} ms ({} ms for ITL), {:.1} pp for the error rate; {intervals})",
        c.verdict,
        c.config.tolerance * 100.0,
        c.config.min_effect,
        c.config.min_effect.min(LATENCY_METRICS[1].2),
        c.config.absolute_tolerance * 100.0,
    );
    o
}
