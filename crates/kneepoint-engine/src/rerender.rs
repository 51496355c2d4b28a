//! Re-rendering a saved artifact folder: level summaries, the run's summary document, plots and
//! `report.html`, made again from the records without sending a request. A sweep's summary is
//! recomputed from its levels, a search's by replaying its probes through the planner; the
//! output is byte for byte what the run itself wrote.

use kneepoint_core::folder;
use std::path::{Path, PathBuf};

use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{Measurement, PeakTraffic, Probe, SearchConfig, Sla};
use kneepoint_report::{Artifact, RunKind};
use serde_json::Value;

use crate::search_doc::write_search_history;
use crate::sweep_doc::{conclude, write_sweep_summary, RunState, SweepDoc};
use crate::Error;

/// What a re-render did.
#[derive(Debug)]
#[non_exhaustive]
pub struct Rerendered {
    /// The kind of run found.
    pub kind: RunKind,
    /// Every file written.
    pub files: Vec<PathBuf>,
    /// Where the page is (drawn only with the `report` feature).
    pub html: PathBuf,
    /// Levels recomputed from a records file that had lost records (with
    /// [`RerenderOptions::recompute_short`]): each folder with the records read and saved.
    pub short_levels: Vec<(PathBuf, usize, usize)>,
}

/// How [`rerender_with`] treats what it finds.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct RerenderOptions {
    /// Rebuild the summaries of a level whose records file holds fewer measured records than
    /// the run saved, marking it partial with a warning that gives the counts. Without it
    /// such a level is refused ([`Error::ShortRecords`]) and nothing is written.
    pub recompute_short: bool,
}

impl RerenderOptions {
    /// Options that recompute short levels (`kneepoint report --recompute`).
    pub fn recompute_short() -> Self {
        RerenderOptions {
            recompute_short: true,
        }
    }
}

/// Checks every level (a recommendation's candidates' too) for a short records file: refused
/// unless `recompute`, else marked; returns the short ones.
fn check_short(a: &mut Artifact, recompute: bool) -> Result<Vec<(PathBuf, usize, usize)>, Error> {
    let mut short = Vec::new();
    for c in &mut a.candidates {
        short.extend(check_short(c, recompute)?);
    }
    for l in &mut a.levels {
        if let Some((read, saved)) = l.short() {
            let path = a.root.join(&l.dir);
            if !recompute {
                return Err(Error::ShortRecords { path, read, saved });
            }
            l.mark_short();
            short.push((path, read, saved));
        }
    }
    Ok(short)
}

fn field<T: serde::de::DeserializeOwned>(
    a: &Artifact,
    ptr: &str,
    what: &'static str,
) -> Result<T, Error> {
    serde_json::from_value(a.doc.pointer(ptr).cloned().unwrap_or(Value::Null)).map_err(|source| {
        Error::Saved {
            path: a.root.clone(),
            what,
            source,
        }
    })
}

fn resummarise_sweep(a: &Artifact) -> Result<PathBuf, Error> {
    let slas: Vec<Sla> = field(a, "/slas", "SLAs")?;
    let peak: Option<PeakTraffic> = field(a, "/peak", "peak")?;
    let headroom = a
        .doc
        .pointer("/fleet/headroom")
        .and_then(Value::as_f64)
        .unwrap_or(0.2);
    let doc = SweepDoc {
        settings: a.doc.get("settings").cloned().unwrap_or(Value::Null),
        levels_planned: a.doc.get("levels_planned").cloned().unwrap_or(Value::Null),
        slas: slas.clone(),
        peak,
    };
    let levels: Vec<(&LevelSummary, String)> = a
        .levels
        .iter()
        .map(|l| (&l.summary, l.dir.clone()))
        .collect();
    let (rows, zone, fleet) = conclude(&levels, &slas, peak, headroom)?;
    let state = RunState::of(&a.doc);
    write_sweep_summary(&a.root, &doc, rows, &zone, fleet.as_ref(), state)?;
    Ok(a.root.join(folder::SWEEP_SUMMARY))
}

fn resummarise_search(a: &Artifact) -> Result<PathBuf, Error> {
    let config: SearchConfig = field(a, "/search_params", "search parameters")?;
    let mut search = kneepoint_planner::SearchPlanner::new(config)?;
    let saved = a.doc.get("probes").and_then(Value::as_array);
    for (i, l) in a.levels.iter().enumerate() {
        // A search saved by an earlier version may have chosen other probes than this one
        // would: its levels are replayed as they were measured, each with its saved probe
        // (phase, expected verdict, iteration).
        let chosen = search.next_probe();
        let probe = saved
            .and_then(|rows| {
                rows.iter()
                    .find(|r| r.get("dir").and_then(Value::as_str) == Some(l.dir.as_str()))
            })
            .and_then(|r| serde_json::from_value::<Probe>(r.get("probe")?.clone()).ok())
            .filter(|p| p.concurrency == l.concurrency)
            .or(chosen.filter(|p| p.concurrency == l.concurrency))
            .unwrap_or(Probe::replayed(
                i as u32 + 1,
                l.concurrency,
                l.summary.request_count as u32,
            ));
        search.replay(probe, &Measurement::from(&l.summary))?;
    }
    // The run asked for the next probe once more after its last observation (that is when the
    // planner decides to stop); so does the replay.
    let _ = search.next_probe();
    let summaries: Vec<LevelSummary> = a.levels.iter().map(|l| l.summary.clone()).collect();
    let settings = a.doc.get("settings").cloned().unwrap_or(Value::Null);
    write_search_history(
        &a.root,
        &settings,
        &search,
        &summaries,
        RunState::of(&a.doc),
    )?;
    Ok(a.root.join(folder::SEARCH_HISTORY))
}

fn resummarise(a: &Artifact) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for c in &a.candidates {
        files.extend(resummarise(c)?);
    }
    files.extend(a.rewrite_level_summaries()?);
    match a.kind {
        // Open-loop levels are request rates: there is no knee or zone to recompute, and the
        // summary document is kept as saved (its level files were re-rendered above).
        RunKind::Sweep if a.doc.get("load").and_then(Value::as_str) == Some("open_loop") => {}
        RunKind::Sweep => files.push(resummarise_sweep(a)?),
        RunKind::Search => files.push(resummarise_search(a)?),
        RunKind::Lengths => files.push(crate::length_sweep::resummarise(a)?),
        // The ranking is kept as saved: it also holds prices that only the config knew.
        _ => {}
    }
    Ok(files)
}

/// Re-renders the run in `dir`: level summaries, the run's summary document, plots and
/// `report.html`. A level whose records file lost records is refused
/// ([`Error::ShortRecords`]); [`rerender_with`] can recompute it instead.
pub fn rerender(dir: &Path) -> Result<Rerendered, Error> {
    rerender_with(dir, RerenderOptions::default())
}

/// [`rerender`] with `options`.
pub fn rerender_with(dir: &Path, options: RerenderOptions) -> Result<Rerendered, Error> {
    let mut a = Artifact::load(dir)?;
    let short_levels = check_short(&mut a, options.recompute_short)?;
    let files = resummarise(&a)?;
    let a = Artifact::load(dir)?;
    #[cfg(feature = "report")]
    let files = [files, kneepoint_report::write_report(&a)?].concat();
    Ok(Rerendered {
        kind: a.kind,
        files,
        html: dir.join(folder::REPORT_HTML),
        short_levels,
    })
}
