//! `kneepoint sweep`: levels run one after another, each with its own artifact folder, then the
//! knee, the operating zone and (given a peak) the fleet size.

use std::path::{Path, PathBuf};

use kneepoint_metrics::export::write_atomic;
use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{
    check_all, fleet_size, operating_zone, FleetPlan, InstanceCapacity, KneeRule, LevelPoint,
    OperatingZone, PeakTraffic, Sla, SlaCheck, ZonePoint,
};
use serde_json::json;

use crate::config::{LevelRow, SweepSettings};
use kneepoint_runner::CancelToken;

use crate::session::{measurement, Session};

/// What a sweep produced.
#[derive(Debug)]
pub struct SweepOutcome {
    /// One row per level, in run order.
    pub rows: Vec<LevelRow>,
    /// Full summaries, in run order.
    pub summaries: Vec<LevelSummary>,
    /// Knee, SLA breaking point, ideal balance.
    pub zone: OperatingZone,
    /// Instances for the peak, at the ideal balance (when a peak was given).
    pub fleet: Option<FleetPlan>,
    /// Where the files are.
    pub artifact_dir: PathBuf,
    /// Requests sent per level (measured), to check against records.
    pub sent: Vec<usize>,
    /// True when the sweep was interrupted (the last level is partial, later ones not run).
    pub interrupted: bool,
}

fn row(s: &LevelSummary, dir: String, checks: &[SlaCheck]) -> LevelRow {
    let st = |m: &str, q: &str| s.stat(m, q);
    LevelRow {
        concurrency: s.concurrency,
        request_count: s.request_count,
        error_count: s.error_count,
        error_rate: s.error_rate,
        benchmark_duration_s: s.benchmark_duration_s,
        request_throughput: s.request_throughput,
        output_token_throughput: s.output_token_throughput,
        ttft_p50_ms: st("time_to_first_token", "p50"),
        ttft_p95_ms: st("time_to_first_token", "p95"),
        itl_p95_ms: st("inter_token_latency", "p95"),
        e2e_p50_ms: st("request_latency", "p50"),
        e2e_p90_ms: st("request_latency", "p90"),
        e2e_p99_ms: st("request_latency", "p99"),
        e2e_spread_ms: st("request_latency", "p99")
            .zip(st("request_latency", "p50"))
            .map(|(a, b)| a - b),
        meets_slas: (!checks.is_empty()).then(|| checks.iter().all(|c| c.holds)),
        first_breach: checks.iter().find(|c| !c.holds).map(|c| c.sla.clone()),
        is_knee: false,
        dir,
    }
}

fn zone_of(rows: &[LevelRow]) -> anyhow::Result<OperatingZone> {
    let points: Vec<ZonePoint> = rows
        .iter()
        .map(|r| ZonePoint {
            point: LevelPoint::new(
                r.concurrency,
                r.output_token_throughput,
                r.e2e_p99_ms.unwrap_or(0.0),
            ),
            meets_slas: r.meets_slas,
        })
        .collect();
    Ok(operating_zone(&points, &KneeRule::default())?)
}

/// What `sweep_summary.json` is made of, apart from the levels.
pub(crate) struct SweepDoc<'a> {
    pub(crate) settings: &'a serde_json::Value,
    pub(crate) levels_planned: serde_json::Value,
    pub(crate) slas: &'a [Sla],
    pub(crate) peak: Option<PeakTraffic>,
}

pub(crate) fn write_sweep_summary(
    dir: &Path,
    doc: &SweepDoc<'_>,
    rows: &[LevelRow],
    zone: &OperatingZone,
    fleet: Option<&FleetPlan>,
    state: RunState,
) -> anyhow::Result<()> {
    let doc = json!({
        "kneepoint_version": env!("CARGO_PKG_VERSION"),
        "complete": state == RunState::Complete,
        "interrupted": state == RunState::Interrupted,
        "settings": doc.settings,
        "levels_planned": doc.levels_planned,
        "slas": doc.slas,
        "levels": rows,
        "knee": zone.knee,
        "zone": zone,
        "peak": doc.peak,
        "fleet": fleet,
    });
    write_atomic(
        &dir.join("sweep_summary.json"),
        &serde_json::to_vec_pretty(&doc)?,
    )?;
    Ok(())
}

/// The rows, operating zone and fleet of finished levels: the same computation for a live sweep
/// and for `kneepoint report` re-rendering a saved one.
pub(crate) fn conclude(
    levels: &[(&LevelSummary, String)],
    slas: &[Sla],
    peak: Option<PeakTraffic>,
    headroom: f64,
) -> anyhow::Result<(Vec<LevelRow>, OperatingZone, Option<FleetPlan>)> {
    let mut rows: Vec<LevelRow> = levels
        .iter()
        .map(|(s, dir)| row(s, dir.clone(), &check_all(slas, &measurement(s))))
        .collect();
    let zone = zone_of(&rows)?;
    for r in &mut rows {
        r.is_knee = zone.knee.knee == Some(r.concurrency);
    }
    // The fleet is sized at the ideal balance, the level to operate at.
    let at_ideal = rows
        .iter()
        .find(|r| Some(r.concurrency) == zone.ideal_balance);
    let fleet = match (peak, at_ideal) {
        (Some(peak), Some(r)) => {
            let capacity = InstanceCapacity {
                concurrency: r.concurrency,
                request_throughput: r.request_throughput,
                output_token_throughput: r.output_token_throughput,
            };
            Some(fleet_size(peak, &capacity, headroom)?)
        }
        _ => None,
    };
    Ok((rows, zone, fleet))
}

/// Where a sweep or search is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunState {
    Running,
    Complete,
    Interrupted,
}

/// Runs the sweep described by `settings` and writes every artifact. `progress` shows a bar per
/// level on stderr.
pub async fn run_sweep(settings: &SweepSettings, progress: bool) -> anyhow::Result<SweepOutcome> {
    run_sweep_with(settings, progress, &CancelToken::new()).await
}

/// [`run_sweep`] that stops when `cancel` fires: the current level's in-flight requests are
/// recorded as cancelled, its files are written and marked partial, and no further level runs.
pub async fn run_sweep_with(
    settings: &SweepSettings,
    progress: bool,
    cancel: &CancelToken,
) -> anyhow::Result<SweepOutcome> {
    let dir = settings.common.artifact_dir.clone();
    let mut session = Session::start(&settings.common, progress).await?;
    let description = session.description().clone();
    let doc = SweepDoc {
        settings: &description,
        levels_planned: serde_json::to_value(settings.plan.levels())?,
        slas: &settings.slas,
        peak: settings.peak,
    };
    let mut names = Vec::new();
    let mut summaries = Vec::new();
    let mut sent = Vec::new();
    for level in settings.plan.levels() {
        let c = level.concurrency;
        let name = format!("concurrency_{c}");
        let label = format!("concurrency {c}");
        let (summary, cancelled) = session
            .run_level(&dir.join(&name), c, level.request_count, &label, cancel)
            .await?;
        sent.push(summary.request_count);
        summaries.push(summary);
        names.push(name);
        let done: Vec<(&LevelSummary, String)> =
            summaries.iter().zip(names.iter().cloned()).collect();
        let (rows, zone, _) = conclude(&done, &settings.slas, None, settings.headroom)?;
        write_sweep_summary(&dir, &doc, &rows, &zone, None, RunState::Running)?;
        if cancelled {
            break;
        }
    }
    let interrupted = cancel.is_cancelled();
    let done: Vec<(&LevelSummary, String)> = summaries.iter().zip(names.iter().cloned()).collect();
    let (rows, zone, fleet) = conclude(&done, &settings.slas, settings.peak, settings.headroom)?;
    let state = if interrupted {
        RunState::Interrupted
    } else {
        RunState::Complete
    };
    write_sweep_summary(&dir, &doc, &rows, &zone, fleet.as_ref(), state)?;
    crate::report_cmd::render_quietly(&dir);
    Ok(SweepOutcome {
        rows,
        summaries,
        zone,
        fleet,
        artifact_dir: dir,
        sent,
        interrupted,
    })
}
