//! `kneepoint check`: the regression gate for CI pipelines, a run against a baseline from
//! the results store or a folder.

use std::path::Path;

use clap::Args;
use kneepoint_store::{RunFilter, RunRecord, Store};

use crate::{NotComparable, Regressed};

/// `kneepoint check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The baseline: an artifact folder, a stored run's id (or its first digits), or
    /// `latest` (the newest stored run the filters match, other than --run).
    #[arg(long, value_name = "RUN")]
    pub baseline: String,
    /// The run checked: a folder, a stored run's id, or `latest`.
    #[arg(long, value_name = "RUN")]
    pub run: String,
    /// How much worse (percent) a figure may be before it fails the check, when the levels'
    /// intervals say the difference is real.
    #[arg(long, value_name = "PCT", default_value_t = 10.0)]
    pub max_regression: f64,
    /// The store, and the runs `latest` picks from.
    #[command(flatten)]
    pub runs: crate::store_cmd::StoredRuns,
    /// The comparison as JSON.
    #[arg(long)]
    pub json: bool,
    /// Judge figures that have no interval (levels under about 20 requests) on their values
    /// alone; without it such a figure worse than allowed leaves no verdict (exit 2).
    #[arg(long)]
    pub point_comparisons: bool,
}

/// Runs the check: exit 0 when it holds, 1 (`Regressed`) naming the figures that regressed,
/// 2 (`NotComparable`) when there is no verdict: the runs measured different things, a
/// figure could not be judged, or a run or the store could not be read.
pub fn run(args: &CheckArgs) -> anyhow::Result<()> {
    check(args).map_err(|e| {
        if e.is::<Regressed>() || e.is::<NotComparable>() {
            e
        } else {
            NotComparable(format!("no verdict: {}", crate::error_text(&e))).into()
        }
    })
}

fn check(args: &CheckArgs) -> anyhow::Result<()> {
    let pct = args.max_regression;
    if !(pct.is_finite() && pct >= 0.0) {
        anyhow::bail!("--max-regression must be a percentage of at least 0, not {pct}");
    }
    let mut store: Option<Store> = None;
    let filter = args.runs.filter()?;
    let run = resolve(&args.run, None, &filter, &mut store, &args.runs)?;
    let baseline = resolve(
        &args.baseline,
        Some(&run.id),
        &filter,
        &mut store,
        &args.runs,
    )?;
    let options =
        kneepoint_store::CheckOptions::new(pct / 100.0).point_comparisons(args.point_comparisons);
    let report = match kneepoint_store::check_with(&baseline, &run, &options) {
        Ok(r) => r,
        Err(kneepoint_store::Error::NotComparable { reasons }) => {
            return Err(NotComparable(format!(
                "run {} cannot be checked against baseline {}: {}",
                run.id,
                baseline.id,
                reasons.join("; ")
            ))
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    let regressed: Vec<String> = report
        .regressions()
        .map(|f| format!("{} at {} ({:+.1} %)", f.figure, f.level, f.worse_by * 100.0))
        .collect();
    if regressed.is_empty() {
        return Ok(());
    }
    Err(Regressed(format!(
        "regressed beyond {pct} %: {}",
        regressed.join(", ")
    ))
    .into())
}

/// A folder, a stored id, or `latest` (other than `not`).
fn resolve(
    spec: &str,
    not: Option<&str>,
    filter: &RunFilter,
    store: &mut Option<Store>,
    runs: &crate::store_cmd::StoredRuns,
) -> anyhow::Result<RunRecord> {
    if Path::new(spec).is_dir() {
        return Ok(RunRecord::from_folder(Path::new(spec))?);
    }
    if store.is_none() {
        *store = Some(crate::store_cmd::open_read(&runs.location()?)?);
    }
    let Some(s) = store.as_mut() else {
        anyhow::bail!("no results store");
    };
    let id = if spec == "latest" {
        let newest = s
            .runs(filter)?
            .into_iter()
            .find(|r| Some(r.id.as_str()) != not);
        match newest {
            Some(r) => r.id,
            None => anyhow::bail!(
                "no stored run matches `latest` with these filters in {}",
                s.location()
            ),
        }
    } else {
        spec.to_owned()
    };
    match s.run(&id)? {
        Some(r) => Ok(r),
        None => anyhow::bail!(
            "{spec:?} is neither a folder nor a run in the results store {}",
            s.location()
        ),
    }
}
