//! A sweep: levels run one after another, each in its own folder, then the knee, the operating
//! zone and (given a peak) the fleet size, in `sweep_summary.json`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kneepoint_core::Transport;
use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{
    check_all, explain_knee, fleet_size, operating_zone, FleetPlan, InstanceCapacity, KneeEstimate,
    KneeExplanation, KneeRule, LevelPoint, Measurement, OperatingZone, PeakTraffic, Sla,
    SweepLevel, SweepPlan, ZonePoint,
};
use kneepoint_report::schema::{write_document, LevelRow, SweepSummary, SCHEMA_VERSION};
use kneepoint_runner::CancelToken;
use serde_json::Value;

use crate::bench::{bench_methods, BenchBuilder};
use crate::{Bench, Error};

/// What a sweep produced.
#[derive(Debug)]
#[non_exhaustive]
pub struct SweepReport {
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
    /// Requests recorded per level, in run order.
    pub sent: Vec<usize>,
    /// True when the sweep was interrupted (the last level is partial, later ones not run).
    pub interrupted: bool,
    /// Levels added beyond the plan because the capacity was not yet established (see
    /// [`SweepBuilder::extend_to`]).
    pub extended: Vec<u32>,
    /// Open loop: the request rate of each level, in run order (empty for a closed loop).
    pub request_rates: Vec<f64>,
    /// Why the knee is where it is, from the server's metrics (when they were scraped).
    pub knee_explanation: Option<KneeExplanation>,
}

/// The knee's explanation from the rows' server metrics; `None` when no level was scraped.
pub fn knee_explanation(rows: &[LevelRow], zone: &OperatingZone) -> Option<KneeExplanation> {
    let servers: Vec<(u32, Option<kneepoint_core::ServerSummary>)> = rows
        .iter()
        .map(|r| (r.concurrency, r.server_summary()))
        .collect();
    if servers.iter().all(|(_, s)| s.is_none()) {
        return None;
    }
    let refs: Vec<(u32, Option<&kneepoint_core::ServerSummary>)> =
        servers.iter().map(|(c, s)| (*c, s.as_ref())).collect();
    Some(explain_knee(&refs, zone.knee.knee))
}

/// Where a sweep or search is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunState {
    Running,
    Complete,
    Interrupted,
}

impl RunState {
    pub(crate) fn of(doc: &Value) -> Self {
        if doc.get("interrupted").and_then(Value::as_bool) == Some(true) {
            RunState::Interrupted
        } else if doc.get("complete").and_then(Value::as_bool) == Some(true) {
            RunState::Complete
        } else {
            RunState::Running
        }
    }
}

/// The row of one level, judged against `slas`.
pub fn level_row(s: &LevelSummary, dir: String, slas: &[Sla]) -> LevelRow {
    let checks = check_all(slas, &Measurement::from(s));
    LevelRow::new(
        s,
        dir,
        (!checks.is_empty()).then(|| checks.iter().all(|c| c.holds)),
        checks.iter().find(|c| !c.holds).map(|c| c.sla.clone()),
    )
}

fn zone_of(rows: &[LevelRow]) -> Result<OperatingZone, Error> {
    let points: Vec<ZonePoint> = rows
        .iter()
        .map(|r| {
            let point = LevelPoint::new(
                r.concurrency,
                crate::work_throughput(r.output_token_throughput, r.request_throughput),
                r.e2e_p99_ms.unwrap_or(0.0),
            );
            ZonePoint::new(point, r.meets_slas, r.error_rate)
        })
        .collect();
    Ok(operating_zone(&points, &KneeRule::default())?)
}

/// The rows, operating zone and fleet of finished levels (summary and folder name each): the
/// same computation for a live sweep and for re-rendering a saved one.
pub fn conclude(
    levels: &[(&LevelSummary, String)],
    slas: &[Sla],
    peak: Option<PeakTraffic>,
    headroom: f64,
) -> Result<(Vec<LevelRow>, OperatingZone, Option<FleetPlan>), Error> {
    let mut rows: Vec<LevelRow> = levels
        .iter()
        .map(|(s, dir)| level_row(s, dir.clone(), slas))
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

/// What `sweep_summary.json` is made of, apart from the levels.
pub(crate) struct SweepDoc {
    pub(crate) settings: Value,
    pub(crate) levels_planned: Value,
    pub(crate) slas: Vec<Sla>,
    pub(crate) peak: Option<PeakTraffic>,
}

pub(crate) fn write_sweep_summary(
    dir: &Path,
    doc: &SweepDoc,
    rows: Vec<LevelRow>,
    zone: &OperatingZone,
    fleet: Option<&FleetPlan>,
    state: RunState,
) -> Result<Option<KneeExplanation>, Error> {
    let explanation = knee_explanation(&rows, zone);
    let summary = SweepSummary {
        schema_version: SCHEMA_VERSION,
        kneepoint_version: env!("CARGO_PKG_VERSION").to_owned(),
        complete: state == RunState::Complete,
        interrupted: state == RunState::Interrupted,
        load: None,
        settings: doc.settings.clone(),
        levels_planned: Some(doc.levels_planned.clone()),
        request_rates: None,
        slas: doc.slas.clone(),
        knee_explanation: explanation.clone(),
        levels: rows,
        knee: Some(zone.knee.clone()),
        zone: zone.clone(),
        peak: doc.peak,
        fleet: fleet.cloned(),
    };
    write_document(&dir.join("sweep_summary.json"), &summary)?;
    Ok(explanation)
}

/// Builds a [`Sweep`]: the bench's methods (workload, settings, artifacts, observer...) and
/// the sweep's own (levels, SLAs, peak, headroom).
pub struct SweepBuilder {
    bench: BenchBuilder,
    levels: Vec<u32>,
    plan: Option<SweepPlan>,
    slas: Vec<Sla>,
    peak: Option<PeakTraffic>,
    headroom: f64,
    extend_to: Option<u32>,
}

impl SweepBuilder {
    bench_methods!();

    /// The concurrency levels, each sending the settings' request count.
    pub fn levels(mut self, levels: impl IntoIterator<Item = u32>) -> Self {
        self.levels = levels.into_iter().collect();
        self
    }

    /// A plan with a request count per level (overrides [`SweepBuilder::levels`]).
    pub fn plan(mut self, plan: SweepPlan) -> Self {
        self.plan = Some(plan);
        self
    }

    /// SLAs that mark each level pass or fail.
    pub fn slas(mut self, slas: Vec<Sla>) -> Self {
        self.slas = slas;
        self
    }

    /// Peak traffic to size a fleet for (at the ideal balance).
    pub fn peak(mut self, peak: Option<PeakTraffic>) -> Self {
        self.peak = peak;
        self
    }

    /// Capacity reserved when sizing the fleet (a fraction in `[0, 1)`, default 0.2).
    pub fn headroom(mut self, headroom: f64) -> Self {
        self.headroom = headroom;
        self
    }

    /// When the planned levels end before the capacity is established (no knee, no SLA or
    /// error limit), keep adding levels, each four times the last, up to `bound` (the
    /// engine's stage-1 bound: the sequences it runs at once) — at most
    /// [`MAX_EXTENSIONS`] of them. Closed-loop sweeps only.
    pub fn extend_to(mut self, bound: Option<u32>) -> Self {
        self.extend_to = bound;
        self
    }

    /// Validates everything and creates the artifact folder.
    pub fn build(self) -> Result<Sweep, Error> {
        if !(0.0..1.0).contains(&self.headroom) {
            return Err(Error::invalid("headroom must be at least 0 and below 1"));
        }
        // Everything is checked before the artifact folder is made.
        let settings = self.bench.level_settings();
        let count = settings.request_count.max(1);
        let plan = match self.plan {
            Some(p) => p,
            None if settings.open_loop.is_some() && self.levels.is_empty() => {
                SweepPlan::uniform(&[1], count)?
            }
            None if self.levels.is_empty() => {
                return Err(Error::invalid(
                    "a sweep needs concurrency levels: call .levels([...])",
                ))
            }
            None => SweepPlan::uniform(&self.levels, count)?,
        };
        let bench = self.bench.build()?;
        Ok(Sweep {
            bench,
            plan,
            slas: self.slas,
            peak: self.peak,
            headroom: self.headroom,
            extend_to: self.extend_to,
        })
    }
}

/// A sweep ready to run.
#[derive(Debug)]
pub struct Sweep {
    bench: Bench,
    plan: SweepPlan,
    slas: Vec<Sla>,
    peak: Option<PeakTraffic>,
    headroom: f64,
    extend_to: Option<u32>,
}

/// The most levels [`SweepBuilder::extend_to`] adds.
pub const MAX_EXTENSIONS: usize = 4;

/// The next level of an extension: four times the highest, at most `bound`; `None` once the
/// capacity is established or the bound reached.
fn next_extension(zone: &OperatingZone, levels: &[SweepLevel], bound: u32) -> Option<SweepLevel> {
    let top = levels.iter().max_by_key(|l| l.concurrency)?;
    kneepoint_planner::sweep_lower_bound(zone, Some(top.concurrency), Some(bound))?;
    let next = top.concurrency.saturating_mul(4).min(bound);
    (next > top.concurrency).then_some(SweepLevel {
        concurrency: next,
        request_count: top.request_count.max(next),
    })
}

impl Sweep {
    /// Starts a sweep over `transport`.
    pub fn builder(transport: Arc<dyn Transport>) -> SweepBuilder {
        Sweep::on(Bench::builder(transport))
    }

    /// Starts a sweep on a bench already configured.
    pub fn on(bench: BenchBuilder) -> SweepBuilder {
        SweepBuilder {
            bench,
            levels: Vec::new(),
            plan: None,
            slas: Vec::new(),
            peak: None,
            headroom: 0.2,
            extend_to: None,
        }
    }

    /// Runs every level and writes every artifact. When `cancel` fires, the current level's
    /// in-flight requests are recorded as cancelled, its files are written and marked partial,
    /// no further level runs, and the summary says it was interrupted.
    pub async fn run(mut self, cancel: &CancelToken) -> Result<SweepReport, Error> {
        if self.bench.settings.open_loop.is_some() {
            return crate::open_sweep::run(self.bench, &self.slas, cancel).await;
        }
        let dir = self.bench.artifact_dir.clone();
        let doc = SweepDoc {
            settings: self.bench.description.clone(),
            levels_planned: serde_json::to_value(self.plan.levels()).unwrap_or(Value::Null),
            slas: self.slas.clone(),
            peak: self.peak,
        };
        let mut names = Vec::new();
        let mut summaries = Vec::new();
        let mut sent = Vec::new();
        let mut queue: std::collections::VecDeque<SweepLevel> =
            self.plan.levels().iter().copied().collect();
        let mut ran: Vec<SweepLevel> = Vec::new();
        let mut extended = Vec::new();
        while let Some(level) = queue.pop_front() {
            ran.push(level);
            let c = level.concurrency;
            let name = format!("concurrency_{c}");
            let label = format!("concurrency {c}");
            let (summary, cancelled, runs) = self
                .bench
                .run_level(&dir.join(&name), c, level.request_count, &label, cancel)
                .await?;
            if let Some(r) = &runs {
                self.bench
                    .observer
                    .note(&format!("{label}: {} runs; {}", r.completed, r.stop_reason));
            }
            sent.push(summary.request_count);
            summaries.push(summary);
            names.push(name);
            let done: Vec<(&LevelSummary, String)> =
                summaries.iter().zip(names.iter().cloned()).collect();
            let (rows, zone, _) = conclude(&done, &self.slas, None, self.headroom)?;
            write_sweep_summary(&dir, &doc, rows, &zone, None, RunState::Running)?;
            if cancelled {
                break;
            }
            if let (true, Some(bound)) = (queue.is_empty(), self.extend_to) {
                if let Some(next) =
                    next_extension(&zone, &ran, bound).filter(|_| extended.len() < MAX_EXTENSIONS)
                {
                    self.bench.observer.note(&format!(
                        "throughput still rising at concurrency {c} (no knee yet): extending the sweep to {} (the engine's bound is {bound})",
                        next.concurrency
                    ));
                    extended.push(next.concurrency);
                    queue.push_back(next);
                }
            }
        }
        let interrupted = cancel.is_cancelled();
        let done: Vec<(&LevelSummary, String)> =
            summaries.iter().zip(names.iter().cloned()).collect();
        let (rows, zone, fleet) = conclude(&done, &self.slas, self.peak, self.headroom)?;
        let state = if interrupted {
            RunState::Interrupted
        } else {
            RunState::Complete
        };
        let knee_explanation =
            write_sweep_summary(&dir, &doc, rows.clone(), &zone, fleet.as_ref(), state)?;
        let log = &self.bench.log;
        log.info(&format!(
            "sweep {}: {}; knee: {}",
            if interrupted { "interrupted" } else { "done" },
            zone.summary,
            zone.knee.reason
        ));
        if let Some(f) = &fleet {
            log.info(&format!("fleet: {}", f.explanation));
        }
        crate::rerender::render_quietly(&dir, self.bench.observer.as_ref());
        Ok(SweepReport {
            knee_explanation,
            rows,
            summaries,
            zone,
            fleet,
            artifact_dir: dir,
            sent,
            interrupted,
            request_rates: Vec::new(),
            extended,
        })
    }
}

/// The zone of an open-loop sweep: request rates have no knee.
pub(crate) fn open_loop_zone() -> OperatingZone {
    OperatingZone {
        knee: KneeEstimate {
            knee: None,
            reason: "open-loop levels are request rates; the knee is found over closed-loop concurrency levels".into(),
            steps: Vec::new(),
        },
        sla_breaking_point: None,
        error_breaking_point: None,
        ideal_balance: None,
        safe_max: None,
        summary: "open loop: compare latency from the intended start and the schedule lag across rates".into(),
    }
}
