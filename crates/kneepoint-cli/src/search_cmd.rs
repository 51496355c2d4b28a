//! `kneepoint search`: the max-concurrency-under-SLA recipe, one probe at a time, each probe a
//! level with its own artifact folder, and `search_history.json` rewritten after every probe.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kneepoint_metrics::export::write_atomic;
use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{
    operating_zone, KneeRule, LevelPoint, OperatingZone, Outcome, Probe, ProbeRecord, Search,
    ZonePoint,
};
use kneepoint_runner::drive_search;
use serde_json::json;
use tokio::sync::Mutex;

use crate::config::SearchSettings;
use crate::output::probe_line;
use kneepoint_runner::CancelToken;

use crate::session::{measurement, Session};
use crate::sweep::RunState;

/// What a search produced.
#[derive(Debug)]
pub struct SearchOutcome {
    /// Every probe, in order.
    pub history: Vec<ProbeRecord>,
    /// The answer and why the search stopped.
    pub outcome: Outcome,
    /// Knee, breaking point and ideal balance over the probed levels.
    pub zone: OperatingZone,
    /// Each probe's full summary, in probe order.
    pub summaries: Vec<LevelSummary>,
    /// Where the files are.
    pub artifact_dir: PathBuf,
    /// True when the search was interrupted before it finished.
    pub interrupted: bool,
}

fn zone_of(history: &[ProbeRecord], summaries: &[LevelSummary]) -> anyhow::Result<OperatingZone> {
    // The last observation of each level stands for it; a level passes only if every
    // observation passed.
    let mut by_level: std::collections::BTreeMap<u32, ZonePoint> = Default::default();
    for (r, s) in history.iter().zip(summaries) {
        let c = r.probe.concurrency;
        let prev_ok = by_level.get(&c).and_then(|z| z.meets_slas).unwrap_or(true);
        by_level.insert(
            c,
            ZonePoint {
                point: LevelPoint::new(
                    c,
                    s.output_token_throughput,
                    s.stat("request_latency", "p99").unwrap_or(0.0),
                ),
                meets_slas: Some(prev_ok && r.pass),
            },
        );
    }
    let points: Vec<ZonePoint> = by_level.into_values().collect();
    Ok(operating_zone(&points, &KneeRule::default())?)
}

pub(crate) fn probe_dir(p: &Probe) -> String {
    format!("probe_{:02}_concurrency_{}", p.iteration, p.concurrency)
}

/// Writes `search_history.json`: every probe with its folder, the boundary and the zone.
pub(crate) fn write_search_history(
    dir: &Path,
    description: &serde_json::Value,
    search: &Search,
    summaries: &[LevelSummary],
    state: RunState,
) -> anyhow::Result<()> {
    let probes: Vec<_> = search
        .history()
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            v["dir"] = json!(probe_dir(&r.probe));
            v
        })
        .collect();
    let zone = zone_of(search.history(), summaries).ok();
    let doc = json!({
        "kneepoint_version": env!("CARGO_PKG_VERSION"),
        "recipe": "max-concurrency-under-sla",
        "complete": state == RunState::Complete,
        "interrupted": state == RunState::Interrupted,
        "settings": description,
        "search_params": search.config(),
        "probes": probes,
        "boundary": search.outcome(),
        "zone": zone,
    });
    write_atomic(
        &dir.join("search_history.json"),
        &serde_json::to_vec_pretty(&doc)?,
    )?;
    Ok(())
}

/// The run stopped because it was interrupted (Ctrl-C or SIGTERM).
#[derive(Debug, Clone, Copy)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Runs the search described by `settings`, writing every artifact.
pub async fn run_search(
    settings: &SearchSettings,
    progress: bool,
) -> anyhow::Result<SearchOutcome> {
    run_search_with(settings, progress, &CancelToken::new()).await
}

/// [`run_search`] that stops when `cancel` fires: the probe in progress is written and marked
/// partial (and not fed to the planner), and the history is marked interrupted.
pub async fn run_search_with(
    settings: &SearchSettings,
    progress: bool,
    cancel: &CancelToken,
) -> anyhow::Result<SearchOutcome> {
    let dir = settings.common.artifact_dir.clone();
    let session = Arc::new(Mutex::new(
        Session::start(&settings.common, progress).await?,
    ));
    let summaries = Arc::new(Mutex::new(Vec::<LevelSummary>::new()));
    let mut search = Search::new(settings.search.clone())?;
    let description = session.lock().await.description().clone();
    let write_history =
        |search: &Search, summaries: &[LevelSummary], state: RunState| -> anyhow::Result<()> {
            write_search_history(&dir, &description, search, summaries, state)
        };
    let by_confidence = settings.sla_by_confidence;
    let measure = |p: Probe| {
        let (session, summaries, dir) = (session.clone(), summaries.clone(), dir.clone());
        let slas = settings.search.slas.clone();
        let cancel = cancel.clone();
        async move {
            let mut s = session.lock().await;
            let label = format!("probe {} @ {}", p.iteration, p.concurrency);
            let dir = dir.join(probe_dir(&p));
            let (summary, cancelled, runs) = s
                .run_level(&dir, p.concurrency, p.request_count, &label, &cancel)
                .await?;
            if cancelled {
                return Err(anyhow::Error::new(Interrupted));
            }
            let m = match (&runs, by_confidence) {
                (Some(r), true) => {
                    crate::runs::pessimistic(measurement(&summary), &r.aggregate, &slas)
                }
                _ => measurement(&summary),
            };
            summaries.lock().await.push(summary);
            Ok::<_, anyhow::Error>(m)
        }
    };
    let after = |search: &Search| -> anyhow::Result<()> {
        if let (Some(r), true) = (search.history().last(), progress) {
            eprintln!("{}", probe_line(r));
        }
        let done = summaries.try_lock().map(|s| s.clone()).unwrap_or_default();
        write_history(search, &done, RunState::Running)
    };
    let interrupted = match drive_search(&mut search, measure, after).await {
        Ok(_) => false,
        Err(e) if e.is::<Interrupted>() => true,
        Err(e) => return Err(e),
    };
    let summaries = std::mem::take(&mut *summaries.lock().await);
    let state = if interrupted {
        RunState::Interrupted
    } else {
        RunState::Complete
    };
    write_history(&search, &summaries, state)?;
    crate::report_cmd::render_quietly(&dir);
    Ok(SearchOutcome {
        history: search.history().to_vec(),
        outcome: search.outcome(),
        zone: zone_of(search.history(), &summaries)?,
        summaries,
        artifact_dir: dir,
        interrupted,
    })
}
