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
    /// Open loop: the request rate of each level, in run order (empty for a closed loop).
    pub request_rates: Vec<f64>,
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
    if let Some(open) = &settings.common.open_loop {
        return open_loop_sweep(settings, open, session, &doc, progress, cancel).await;
    }
    let mut names = Vec::new();
    let mut summaries = Vec::new();
    let mut sent = Vec::new();
    for level in settings.plan.levels() {
        let c = level.concurrency;
        let name = format!("concurrency_{c}");
        let label = format!("concurrency {c}");
        let (summary, cancelled, runs) = session
            .run_level(&dir.join(&name), c, level.request_count, &label, cancel)
            .await?;
        if let (Some(r), true) = (&runs, progress) {
            eprintln!("{label}: {} runs; {}", r.completed, r.stop_reason);
        }
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
        request_rates: Vec::new(),
    })
}

/// An open-loop sweep: one level per request rate, in `request_rate_<R>/`. The knee and the
/// operating zone are found over closed-loop concurrency levels, so they are not computed here;
/// each level reports latency from the actual and from the intended start and its schedule lag.
async fn open_loop_sweep(
    settings: &SweepSettings,
    open: &crate::config::OpenLoopSettings,
    mut session: Session,
    doc: &SweepDoc<'_>,
    progress: bool,
    cancel: &CancelToken,
) -> anyhow::Result<SweepOutcome> {
    let dir = settings.common.artifact_dir.clone();
    let cap = open.max_in_flight.unwrap_or(0);
    let mut rows = Vec::new();
    let mut summaries = Vec::new();
    let mut sent = Vec::new();
    let mut rates = Vec::new();
    let zone = OperatingZone {
        knee: kneepoint_planner::KneeEstimate {
            knee: None,
            reason: "open-loop levels are request rates; the knee is found over closed-loop concurrency levels".into(),
            steps: Vec::new(),
        },
        sla_breaking_point: None,
        ideal_balance: None,
        safe_max: None,
        summary: "open loop: compare latency from the intended start and the schedule lag across rates".into(),
    };
    // A trace replay is one level at the trace's own times (its rate shows as 0 in the table).
    let levels: Vec<(String, String, Option<f64>)> = match open.replay_speedup {
        Some(f) => vec![(format!("trace_replay_x{f}"), format!("trace x{f}"), None)],
        None => open
            .rates
            .iter()
            .map(|&r| {
                (
                    format!("request_rate_{r}"),
                    format!("{r} requests/s"),
                    Some(r),
                )
            })
            .collect(),
    };
    for (name, label, rate) in levels {
        session.set_rate(rate);
        let rate = rate.unwrap_or(0.0);
        let (summary, cancelled, runs) = session
            .run_level(
                &dir.join(&name),
                cap,
                settings.common.request_count,
                &label,
                cancel,
            )
            .await?;
        if let (Some(r), true) = (&runs, progress) {
            eprintln!("{label}: {} runs; {}", r.completed, r.stop_reason);
        }
        let checks = check_all(&settings.slas, &measurement(&summary));
        rows.push(row(&summary, name, &checks));
        sent.push(summary.request_count);
        summaries.push(summary);
        rates.push(rate);
        let body = json!({
            "kneepoint_version": env!("CARGO_PKG_VERSION"),
            "complete": false,
            "interrupted": cancel.is_cancelled(),
            "load": "open_loop",
            "settings": doc.settings,
            "request_rates": rates,
            "slas": doc.slas,
            "levels": rows,
            "zone": zone,
        });
        write_atomic(
            &dir.join("sweep_summary.json"),
            &serde_json::to_vec_pretty(&body)?,
        )?;
        if cancelled {
            break;
        }
    }
    let interrupted = cancel.is_cancelled();
    let body = json!({
        "kneepoint_version": env!("CARGO_PKG_VERSION"),
        "complete": !interrupted,
        "interrupted": interrupted,
        "load": "open_loop",
        "settings": doc.settings,
        "request_rates": rates,
        "slas": doc.slas,
        "levels": rows,
        "zone": zone,
    });
    write_atomic(
        &dir.join("sweep_summary.json"),
        &serde_json::to_vec_pretty(&body)?,
    )?;
    crate::report_cmd::render_quietly(&dir);
    Ok(SweepOutcome {
        rows,
        summaries,
        zone,
        fleet: None,
        artifact_dir: dir,
        sent,
        interrupted,
        request_rates: rates,
    })
}
