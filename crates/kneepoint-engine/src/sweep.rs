//! A sweep: levels run one after another, each in its own folder, then the knee, the operating
//! zone and (given a peak) the fleet size, in `sweep_summary.json`.

use std::sync::Arc;

use kneepoint_core::Transport;
use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{OperatingZone, PeakTraffic, Sla, SweepLevel, SweepPlan};
use kneepoint_runner::CancelToken;
use serde_json::Value;

use crate::bench::BenchBuilder;
use crate::sweep_doc::{conclude, write_sweep_summary, RunState, SweepDoc, SweepReport};
use crate::BenchOptions;
use crate::{Bench, Error};

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

impl BenchOptions for SweepBuilder {
    fn bench_mut(&mut self) -> &mut BenchBuilder {
        &mut self.bench
    }
}

impl SweepBuilder {
    /// Measured requests per level.
    pub fn request_count(mut self, n: u32) -> Self {
        self.bench = self.bench.request_count(n);
        self
    }

    /// The concurrency levels, each sending the settings' request count (none given: the
    /// default sweep's, [`crate::DEFAULT_CONCURRENCY`], kept loaded with
    /// [`crate::default_level_counts`] when no request count was given either).
    pub fn levels(mut self, levels: impl IntoIterator<Item = u32>) -> Self {
        self.levels = levels.into_iter().collect();
        self
    }

    /// A plan with a request count per level (refused together with other
    /// [`SweepBuilder::levels`] or with [`SweepBuilder::request_count`]).
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
    pub fn build(mut self) -> Result<Sweep, Error> {
        if !(0.0..1.0).contains(&self.headroom) {
            return Err(Error::invalid("headroom must be at least 0 and below 1"));
        }
        // Everything is checked before the artifact folder is made.
        let settings = self.bench.level_settings();
        let count = settings.request_count.max(1);
        let plan = match self.plan {
            Some(p)
                if !self.levels.is_empty()
                    && !self
                        .levels
                        .iter()
                        .copied()
                        .eq(p.levels().iter().map(|l| l.concurrency)) =>
            {
                return Err(Error::invalid(
                    "a sweep was given .levels([...]) and a .plan(...) with other levels, not both: the plan's levels would replace the others",
                ))
            }
            Some(_) if self.bench.request_count_called().is_some() => {
                return Err(Error::invalid(
                    "a plan carries each level's request count: .request_count(n) would be ignored; build the plan with n instead (SweepPlan::uniform)",
                ))
            }
            Some(p) => p,
            None if settings.open_loop.is_some() && self.levels.is_empty() => {
                SweepPlan::uniform(&[1], count)?
            }
            // No levels: the default sweep's, as the CLI runs it (64, 256, 1024), each with the
            // given count, or kept loaded with its default counts.
            None if self.levels.is_empty() => match self.bench.explicit_request_count() {
                Some(n) => SweepPlan::uniform(&crate::DEFAULT_CONCURRENCY, n)?,
                None => {
                    self.bench.default_lead_in();
                    SweepPlan::new(
                        crate::DEFAULT_CONCURRENCY
                            .iter()
                            .map(|&c| kneepoint_planner::SweepLevel {
                                concurrency: c,
                                request_count: crate::default_level_counts(c).1,
                            })
                            .collect(),
                    )?
                }
            },
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
    pub async fn run(self, cancel: &CancelToken) -> Result<SweepReport, Error> {
        let log = self.bench.log.clone();
        let run = self.run_levels(cancel).await;
        if let Err(e) = &run {
            log.failed(e);
        }
        run
    }

    async fn run_levels(mut self, cancel: &CancelToken) -> Result<SweepReport, Error> {
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
        let mut single = Vec::new();
        let mut sent = Vec::new();
        let mut queue: std::collections::VecDeque<SweepLevel> =
            self.plan.levels().iter().copied().collect();
        let mut ran: Vec<SweepLevel> = Vec::new();
        let mut extended = Vec::new();
        while let Some(level) = queue.pop_front() {
            ran.push(level);
            let c = level.concurrency;
            let name = kneepoint_core::folder::concurrency_dir(c);
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
            single.push(runs.is_none());
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
        let (knee_explanation, pareto) =
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
        // A level of one run hands its summary to the page; a pooled level of several runs
        // is summarised again from its files.
        let known: Vec<(&str, &LevelSummary)> = names
            .iter()
            .zip(&summaries)
            .zip(&single)
            .filter(|(_, one)| **one)
            .map(|((n, s), _)| (n.as_str(), s))
            .collect();
        crate::render::render_known_quietly(&dir, &known, self.bench.observer.as_ref());
        Ok(SweepReport {
            knee_explanation,
            pareto,
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
