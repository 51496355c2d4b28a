//! `kneepoint report DIR`: summaries, plots and the HTML page made again from a saved artifact
//! folder, without sending a request. Per-level aggregates come from the records; the
//! top-level document of a sweep is recomputed from those, a search's by replaying its probes
//! through the planner; the output is byte-for-byte what the run itself wrote.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{PeakTraffic, Search, SearchConfig, Sla};
use kneepoint_report::{write_report, Artifact, RunKind};
use serde_json::Value;

use crate::search_cmd::write_search_history;
use crate::session::measurement;
use crate::sweep::{conclude, write_sweep_summary, RunState, SweepDoc};

/// What `kneepoint report` did.
#[derive(Debug)]
pub struct ReportOutcome {
    /// The kind of run found.
    pub kind: RunKind,
    /// Every file written.
    pub files: Vec<PathBuf>,
    /// The page.
    pub html: PathBuf,
}

fn state(doc: &Value) -> RunState {
    if doc.get("interrupted").and_then(Value::as_bool) == Some(true) {
        RunState::Interrupted
    } else if doc.get("complete").and_then(Value::as_bool) == Some(true) {
        RunState::Complete
    } else {
        RunState::Running
    }
}

fn field<T: serde::de::DeserializeOwned>(doc: &Value, ptr: &str, what: &str) -> anyhow::Result<T> {
    serde_json::from_value(doc.pointer(ptr).cloned().unwrap_or(Value::Null))
        .with_context(|| format!("the saved {what} cannot be read"))
}

fn resummarise_sweep(a: &Artifact) -> anyhow::Result<PathBuf> {
    let slas: Vec<Sla> = field(&a.doc, "/slas", "SLAs")?;
    let peak: Option<PeakTraffic> = field(&a.doc, "/peak", "peak")?;
    let headroom = a
        .doc
        .pointer("/fleet/headroom")
        .and_then(Value::as_f64)
        .unwrap_or(0.2);
    let settings = a.doc.get("settings").cloned().unwrap_or(Value::Null);
    let doc = SweepDoc {
        settings: &settings,
        levels_planned: a.doc.get("levels_planned").cloned().unwrap_or(Value::Null),
        slas: &slas,
        peak,
    };
    let levels: Vec<(&LevelSummary, String)> = a
        .levels
        .iter()
        .map(|l| (&l.summary, l.dir.clone()))
        .collect();
    let (rows, zone, fleet) = conclude(&levels, &slas, peak, headroom)?;
    write_sweep_summary(&a.root, &doc, &rows, &zone, fleet.as_ref(), state(&a.doc))?;
    Ok(a.root.join("sweep_summary.json"))
}

fn resummarise_search(a: &Artifact) -> anyhow::Result<PathBuf> {
    let config: SearchConfig = field(&a.doc, "/search_params", "search parameters")?;
    let mut search = Search::new(config)?;
    for l in &a.levels {
        match search.next_probe() {
            Some(p) if p.concurrency == l.concurrency => {}
            other => bail!(
                "{}: replaying the search asked for {:?}, but the saved probe is concurrency {}",
                a.root.display(),
                other.map(|p| p.concurrency),
                l.concurrency
            ),
        }
        search.observe(l.concurrency, &measurement(&l.summary))?;
    }
    // The run asked for the next probe once more after its last observation (that is when the
    // planner decides to stop); so does the replay.
    let _ = search.next_probe();
    let summaries: Vec<LevelSummary> = a.levels.iter().map(|l| l.summary.clone()).collect();
    let settings = a.doc.get("settings").cloned().unwrap_or(Value::Null);
    write_search_history(&a.root, &settings, &search, &summaries, state(&a.doc))?;
    Ok(a.root.join("search_history.json"))
}

fn resummarise(a: &Artifact) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for c in &a.candidates {
        files.extend(resummarise(c)?);
    }
    files.extend(
        a.rewrite_level_summaries()
            .with_context(|| format!("re-writing the level summaries of {}", a.root.display()))?,
    );
    match a.kind {
        // Open-loop levels are request rates: there is no knee or zone to recompute, and the
        // summary document is kept as saved (its level files were re-rendered above).
        RunKind::Sweep if a.doc.get("load").and_then(Value::as_str) == Some("open_loop") => {}
        RunKind::Sweep => files.push(resummarise_sweep(a)?),
        RunKind::Search => files.push(resummarise_search(a)?),
        // The ranking is kept as saved: it also holds prices that only the config knew.
        _ => {}
    }
    Ok(files)
}

/// Re-renders the run in `dir`: level summaries, the run's summary document, plots and
/// `report.html`.
pub fn run_report(dir: &Path) -> anyhow::Result<ReportOutcome> {
    let a = Artifact::load(dir)?;
    let mut files = resummarise(&a)?;
    let a = Artifact::load(dir)?;
    files.extend(write_report(&a)?);
    Ok(ReportOutcome {
        kind: a.kind,
        files,
        html: dir.join("report.html"),
    })
}

/// Writes the plots and `report.html` of a run that just finished; a failure is a warning (the
/// measurements are already saved).
pub(crate) fn render_quietly(dir: &Path) {
    let result = Artifact::load(dir).and_then(|a| write_report(&a));
    if let Err(e) = result {
        eprintln!(
            "warning: the report of {} was not written: {e}",
            dir.display()
        );
    }
}
