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
    /// Whether figures without intervals were judged on their values.
    pub point_comparisons: bool,
    /// Every figure compared.
    pub figures: Vec<CheckedFigure>,
}

impl CheckReport {
    /// The figures that regressed.
    pub fn regressions(&self) -> impl Iterator<Item = &CheckedFigure> {
        self.figures.iter().filter(|f| f.regressed)
    }
}

/// Why figures without intervals leave no verdict: any of them worse than allowed (it may
/// be noise or a regression: nothing tells), or none judged at all.
fn unjudged(figures: &[CheckedFigure], max_regression: f64, reasons: &mut Vec<String>) {
    const WHY: &str = "levels need about 20 successful requests for an interval: rerun with more requests, or pass --point-comparisons to judge values alone";
    let worse: Vec<String> = figures
        .iter()
        .filter(|f| f.z.is_none() && f.worse_by > max_regression)
        .map(|f| format!("{} at {} ({:+.1} %)", f.figure, f.level, f.worse_by * 100.0))
        .collect();
    if !worse.is_empty() {
        reasons.push(format!(
            "worse than allowed but without an interval to tell noise from a regression: {} ({WHY})",
            worse.join(", ")
        ));
    } else if !figures.is_empty() && figures.iter().all(|f| f.z.is_none()) {
        reasons.push(format!(
            "no figure has an interval, so none was judged ({WHY})"
        ));
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

/// How a check judges.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct CheckOptions {
    /// The share a figure may worsen by.
    pub max_regression: f64,
    /// Judge figures that have no interval (levels too small for one) on their values
    /// alone, instead of refusing the check as [`Error::NotComparable`].
    pub point_comparisons: bool,
}

impl CheckOptions {
    /// A check allowing `max_regression` (a share: 0.1 is 10 %), figures without
    /// intervals refused.
    pub fn new(max_regression: f64) -> Self {
        CheckOptions {
            max_regression,
            point_comparisons: false,
        }
    }

    /// Judges figures without intervals on their values.
    pub fn point_comparisons(mut self, yes: bool) -> Self {
        self.point_comparisons = yes;
        self
    }
}

/// [`check_with`] allowing `max_regression`, figures without intervals refused.
pub fn check(
    baseline: &RunRecord,
    run: &RunRecord,
    max_regression: f64,
) -> Result<CheckReport, Error> {
    check_with(baseline, run, &CheckOptions::new(max_regression))
}

/// Checks `run` against `baseline`: refused as [`Error::NotComparable`] when they measured
/// different things (workload, model, API, target; a simulator's time scale is a server's
/// speed, so it is compared, not refused), when either run's folder kept no settings (its
/// workload cannot be compared), when they share no level, or when a figure worse than
/// allowed has no interval to judge it by (unless [`CheckOptions::point_comparisons`]).
pub fn check_with(
    baseline: &RunRecord,
    run: &RunRecord,
    options: &CheckOptions,
) -> Result<CheckReport, Error> {
    let max_regression = options.max_regression;
    let mut reasons: Vec<String> =
        kneepoint_report::settings_differences(&baseline.settings, &run.settings)
            .into_iter()
            .filter(|d| !d.starts_with("simulator time scale"))
            .collect();
    for (which, r) in [("baseline", baseline), ("run", run)] {
        if !r.settings.is_object() {
            reasons.push(format!(
                "the {which} ({}) keeps no settings (killed before it wrote them): its workload cannot be compared",
                r.id
            ));
        }
    }
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
                regressed: worse_by > max_regression
                    && z.map_or(options.point_comparisons, |z| z > Z),
            });
        }
    }
    if figures.is_empty() {
        reasons.push("no level was measured in both runs".into());
    }
    // A regression the intervals prove is a verdict whatever else could not be judged.
    if !options.point_comparisons && !figures.iter().any(|f| f.regressed) {
        unjudged(&figures, max_regression, &mut reasons);
    }
    if !reasons.is_empty() {
        return Err(Error::NotComparable { reasons });
    }
    Ok(CheckReport {
        baseline: baseline.id.clone(),
        run: run.id.clone(),
        max_regression,
        point_comparisons: options.point_comparisons,
        figures,
    })
}
