//! What a search leaves: its report, each probe's folder name, and `search_history.json`
//! (written after every probe, and again by `report` from a saved folder).

use kneepoint_core::folder;
use kneepoint_core::{Metric, Stat};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{
    operating_zone, KneeRule, LevelPoint, OperatingZone, Outcome, Probe, ProbeRecord, ProbeSpend,
    SearchCost, ZonePoint,
};
use kneepoint_report::schema::{write_document, ProbeRow, SearchHistory, SCHEMA_VERSION};
use serde_json::Value;

use crate::sweep_doc::RunState;
use crate::Error;

/// What a search produced.
#[derive(Debug)]
#[non_exhaustive]
pub struct SearchReport {
    /// Every probe, in order.
    pub history: Vec<ProbeRecord>,
    /// The answer and why the search stopped.
    pub outcome: Outcome,
    /// Knee, breaking point and ideal balance over the probed levels.
    pub zone: OperatingZone,
    /// Each probe's full summary, in probe order.
    pub summaries: Vec<LevelSummary>,
    /// Probes, requests and endpoint time spent, beside what doubling + bisection would have
    /// spent to locate the same boundary.
    pub cost: SearchCost,
    /// Where the files are.
    pub artifact_dir: PathBuf,
    /// True when the search was interrupted before it finished.
    pub interrupted: bool,
}

pub(crate) fn zone_of(
    search: &kneepoint_planner::SearchPlanner,
    summaries: &[LevelSummary],
) -> Result<OperatingZone, Error> {
    // The last observation of each level stands for it; a level passes only if every
    // observation passed. Levels between the search's answer and its lowest failure passed
    // without the confidence the answer needs (noisy readings): left out, so that the zone
    // never says to operate above the answer, nor that the SLAs break where they passed.
    let o = search.outcome();
    let uncertain =
        |c: u32| c > o.feasible_max.unwrap_or(0) && o.infeasible_min.is_none_or(|h| c < h);
    let mut by_level: BTreeMap<u32, ZonePoint> = BTreeMap::new();
    for (r, s) in search.history().iter().zip(summaries) {
        let c = r.probe.concurrency;
        if uncertain(c) {
            continue;
        }
        let prev_ok = by_level.get(&c).and_then(|z| z.meets_slas).unwrap_or(true);
        by_level.insert(
            c,
            ZonePoint::of_counts(
                LevelPoint::new(
                    c,
                    crate::work_throughput(s.output_token_throughput, s.request_throughput),
                    s.value(Metric::RequestLatency, Stat::P99).unwrap_or(0.0),
                ),
                Some(prev_ok && r.pass),
                s.request_count,
                s.error_count,
                s.errors_by_kind
                    .get(&kneepoint_core::ErrorKind::Cancelled)
                    .copied()
                    .unwrap_or(0),
            ),
        );
    }
    let points: Vec<ZonePoint> = by_level.into_values().collect();
    Ok(operating_zone(&points, &KneeRule::default())?)
}

/// What the search spent (each probe's measured duration), beside doubling + bisection.
pub(crate) fn cost_of(
    search: &kneepoint_planner::SearchPlanner,
    summaries: &[LevelSummary],
) -> SearchCost {
    let spent: Vec<ProbeSpend> = summaries
        .iter()
        .map(|s| ProbeSpend {
            requests: s.request_count as u64,
            seconds: s.benchmark_duration_s,
        })
        .collect();
    search.cost_with(&spent)
}

/// A probe's folder name.
pub fn probe_dir(p: &Probe) -> String {
    folder::probe_dir(p.iteration, p.concurrency)
}

/// AIPerf's name for what the search answered: `max-goodput-under-slo` when the share of
/// requests meeting their SLOs is judged, else `max-concurrency-under-sla`.
pub(crate) fn recipe(config: &kneepoint_planner::SearchConfig) -> &'static str {
    if config.slas.iter().any(|s| s.metric == Metric::SloMissRate) {
        "max-goodput-under-slo"
    } else {
        "max-concurrency-under-sla"
    }
}

/// Writes `search_history.json`: every probe with its folder, the boundary and the zone.
pub(crate) fn write_search_history(
    dir: &Path,
    description: &Value,
    search: &kneepoint_planner::SearchPlanner,
    summaries: &[LevelSummary],
    state: RunState,
) -> Result<(), Error> {
    let doc = SearchHistory {
        schema_version: SCHEMA_VERSION,
        kneepoint_version: env!("CARGO_PKG_VERSION").to_owned(),
        recipe: recipe(search.config()).into(),
        complete: state == RunState::Complete,
        interrupted: state == RunState::Interrupted,
        settings: description.clone(),
        search_params: search.config().clone(),
        probes: search
            .history()
            .iter()
            .map(|r| ProbeRow::new(r.clone(), probe_dir(&r.probe)))
            .collect(),
        boundary: search.outcome(),
        zone: zone_of(search, summaries).ok(),
        cost: Some(cost_of(search, summaries)),
    };
    write_document(&dir.join(folder::SEARCH_HISTORY), &doc)?;
    Ok(())
}
