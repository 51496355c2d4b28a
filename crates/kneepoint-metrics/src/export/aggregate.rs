//! `aggregate/profile_export_aiperf_aggregate.json` and `.csv`: each summary statistic of a
//! level's repeated runs, with mean, spread and confidence interval (AIPerf's multi-run
//! layout).

use kneepoint_core::folder;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};

use crate::export::write_atomic;
use crate::{Convergence, Error, RunAggregate};

/// What the aggregate file says about the runs besides the statistics.
#[derive(Debug, Clone, Default)]
pub struct AggregateInfo {
    /// Runs asked for (the cap with convergence).
    pub num_runs_requested: u32,
    /// Runs that did not complete (interrupted), by label.
    pub failed_runs: Vec<String>,
    /// Why the runs stopped (convergence's reason, the cap, or an interruption).
    pub stop_reason: String,
    /// The convergence test's last verdict, when a rule was set.
    pub convergence: Option<Convergence>,
}

/// The aggregate as JSON.
pub fn aggregate_json(a: &RunAggregate, info: &AggregateInfo) -> Value {
    json!({
        "metadata": {
            "aggregation_type": "confidence",
            "num_profile_runs": info.num_runs_requested,
            "num_successful_runs": a.run_labels.len(),
            "confidence_level": a.confidence_level,
            "run_labels": a.run_labels,
            "failed_runs": info.failed_runs,
            "stop_reason": info.stop_reason,
            "convergence": info.convergence,
        },
        "metrics": a.metrics,
    })
}

/// The aggregate as CSV, one row per statistic.
pub fn aggregate_csv(a: &RunAggregate) -> String {
    let mut out =
        String::from("Metric,Unit,Mean,Std,Min,Max,CV,SE,CI Low,CI High,t Critical,Runs\n");
    let f = |v: Option<f64>| {
        v.filter(|v| v.is_finite())
            .map_or(String::new(), |v| format!("{v:.6}"))
    };
    for (k, s) in &a.metrics {
        let _ = writeln!(
            out,
            "{k},{},{},{},{},{},{},{},{},{},{},{}",
            s.unit,
            f(Some(s.mean)),
            f(Some(s.std)),
            f(Some(s.min)),
            f(Some(s.max)),
            f(Some(s.cv)),
            f(Some(s.se)),
            f(s.ci_low),
            f(s.ci_high),
            f(s.t_critical),
            s.n
        );
    }
    out
}

/// Writes both files into `dir` (created).
pub fn write_aggregate(dir: &Path, a: &RunAggregate, info: &AggregateInfo) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let bytes =
        serde_json::to_vec_pretty(&aggregate_json(a, info)).map_err(|source| Error::Json {
            what: "run aggregate",
            source,
        })?;
    write_atomic(&dir.join(folder::AGGREGATE_JSON), &bytes)?;
    write_atomic(
        &dir.join(folder::AGGREGATE_CSV),
        aggregate_csv(a).as_bytes(),
    )
}
