//! The regression gate: a run against a baseline, level by level, on throughput and latency
//! percentiles. A figure regressed when it is worse by more than the allowed share *and* the
//! levels' own intervals say the difference is real (its log ratio beyond 1.645 standard
//! errors, one-sided 95 %); a figure without an interval on either side is shown, not judged.

use kneepoint_core::{Metric, Stat};
use kneepoint_metrics::LevelSummary;
use serde::Serialize;

use crate::{Error, RunRecord};

/// One-sided 95 %: a worse reading this many standard errors out is not noise.
const Z: f64 = 1.645;

/// The figures compared at each level: (metric, statistic, label, higher is better).
const FIGURES: [(Metric, Stat, &str, bool); 4] = [
    (
        Metric::OutputTokenThroughput,
        Stat::Avg,
        "output tok/s",
        true,
    ),
    (Metric::TimeToFirstToken, Stat::P95, "TTFT p95 ms", false),
    (Metric::InterTokenLatency, Stat::P95, "ITL p95 ms", false),
    (Metric::RequestLatency, Stat::P99, "e2e p99 ms", false),
];

/// One figure at one level, in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CheckedFigure {
    /// The level (`concurrency_64`).
    pub level: String,
    /// What was compared (`e2e p99 ms`).
    pub figure: String,
    /// The baseline's value and 90 % interval.
    pub baseline: f64,
    /// The baseline's 90 % interval, when it has one.
    pub baseline_interval: Option<[f64; 2]>,
    /// The run's value.
    pub run: f64,
    /// The run's 90 % interval, when it has one.
    pub run_interval: Option<[f64; 2]>,
    /// How much worse the run is, as a share of the baseline (negative: better).
    pub worse_by: f64,
    /// Standard errors between the two (`None` without intervals).
    pub z: Option<f64>,
    /// Worse by more than allowed, and the difference is real.
    pub regressed: bool,
}

/// A run checked against a baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CheckReport {
    /// The baseline's id.
    pub baseline: String,
    /// The run's id.
    pub run: String,
    /// The share a figure may worsen by.
    pub max_regression: f64,
    /// Every figure compared.
    pub figures: Vec<CheckedFigure>,
}

impl CheckReport {
    /// The figures that regressed.
    pub fn regressions(&self) -> impl Iterator<Item = &CheckedFigure> {
        self.figures.iter().filter(|f| f.regressed)
    }
}

/// The name a level is matched by across runs: its folder, a search probe's number left out.
fn level_key(name: &str) -> &str {
    match name.strip_prefix("probe_") {
        Some(rest) => rest.split_once('_').map_or(name, |(_, tail)| tail),
        None => name,
    }
}

fn figure(s: &LevelSummary, metric: Metric, stat: Stat) -> Option<f64> {
    match metric {
        Metric::OutputTokenThroughput => Some(s.output_token_throughput),
        _ => s.value(metric, stat),
    }
    .filter(|v| v.is_finite() && *v > 0.0)
}

/// Checks `run` against `baseline`: refused as [`Error::NotComparable`] when they measured
/// different things (workload, model, API, target; a simulator's time scale is a server's
/// speed, so it is compared, not refused) or share no level.
pub fn check(
    baseline: &RunRecord,
    run: &RunRecord,
    max_regression: f64,
) -> Result<CheckReport, Error> {
    let mut reasons: Vec<String> =
        kneepoint_report::settings_differences(&baseline.settings, &run.settings)
            .into_iter()
            .filter(|d| !d.starts_with("simulator time scale"))
            .collect();
    if baseline.command != run.command {
        reasons.push(format!(
            "command: {} in the baseline, {} in the run",
            baseline.command, run.command
        ));
    }
    let mut figures = Vec::new();
    for b in &baseline.levels {
        let Some(r) = run
            .levels
            .iter()
            .rev()
            .find(|r| level_key(&r.name) == level_key(&b.name))
        else {
            continue;
        };
        for (metric, stat, label, higher_is_better) in FIGURES {
            let (Some(x), Some(y)) = (
                figure(&b.summary, metric, stat),
                figure(&r.summary, metric, stat),
            ) else {
                continue;
            };
            let worse_by = if higher_is_better {
                1.0 - y / x
            } else {
                y / x - 1.0
            };
            let (ib, ir) = (
                b.summary.interval(metric, stat),
                r.summary.interval(metric, stat),
            );
            let z = match (ib, ir) {
                (Some(ib), Some(ir)) => {
                    let se = (ib.relative_se.powi(2) + ir.relative_se.powi(2)).sqrt();
                    let ln = (y / x).ln() * if higher_is_better { -1.0 } else { 1.0 };
                    (se > 0.0).then(|| ln / se)
                }
                _ => None,
            };
            figures.push(CheckedFigure {
                level: level_key(&b.name).to_owned(),
                figure: label.to_owned(),
                baseline: x,
                baseline_interval: ib.map(|i| [i.low, i.high]),
                run: y,
                run_interval: ir.map(|i| [i.low, i.high]),
                worse_by,
                z,
                regressed: worse_by > max_regression && z.is_some_and(|z| z > Z),
            });
        }
    }
    if figures.is_empty() {
        reasons.push("no level was measured in both runs".into());
    }
    if !reasons.is_empty() {
        return Err(Error::NotComparable { reasons });
    }
    Ok(CheckReport {
        baseline: baseline.id.clone(),
        run: run.id.clone(),
        max_regression,
        figures,
    })
}
