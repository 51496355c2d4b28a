//! A length sweep: one level per (input, output) length pair at one concurrency (or one
//! open-loop rate), each in `isl_<I>_osl_<O>/`, then TTFT and ITL against the prompt length and
//! the fitted prefill rate ([`kneepoint_planner::fit_prefill`]) in `length_sweep.json`.
//!
//! Each level gets a workload of its own, made from the same settings and seed by the function
//! given to [`LengthSweepBuilder::workloads`].

use std::sync::Arc;

use kneepoint_core::{Metric, Transport};
use kneepoint_metrics::{LevelSummary, RequestMetrics};
use kneepoint_planner::{fit_prefill, LengthPoint, LengthSample, PrefillFit};
use kneepoint_report::schema::{write_document, LengthRow, LengthSweepDoc, SCHEMA_VERSION};
use kneepoint_runner::CancelToken;
use kneepoint_workload::Workload;
use serde_json::json;

use crate::bench::BenchBuilder;
use crate::BenchOptions;
use crate::{Bench, Error};

/// Makes the workload of one length pair.
pub type LengthWorkloads =
    Box<dyn Fn(LengthPoint) -> Result<Box<dyn Workload>, Error> + Send + Sync>;

/// Builds a [`LengthSweep`]: the bench's methods and the sweep's lengths, concurrency and
/// workloads.
pub struct LengthSweepBuilder {
    bench: BenchBuilder,
    points: Vec<LengthPoint>,
    concurrency: u32,
    workloads: Option<LengthWorkloads>,
}

impl BenchOptions for LengthSweepBuilder {
    fn bench_mut(&mut self) -> &mut BenchBuilder {
        &mut self.bench
    }
}

impl LengthSweepBuilder {
    /// Measured requests per length.
    pub fn request_count(mut self, n: u32) -> Self {
        self.bench = self.bench.request_count(n);
        self
    }

    /// The length pairs, run in this order (see [`kneepoint_planner::length_points`]).
    pub fn points(mut self, points: Vec<LengthPoint>) -> Self {
        self.points = points;
        self
    }

    /// Requests in flight at every length (default 1); with open-loop settings, the cap on
    /// requests in flight comes from those instead.
    pub fn concurrency(mut self, c: u32) -> Self {
        self.concurrency = c;
        self
    }

    /// The workload of each length (required): called for every length when the sweep is
    /// built, so that a length whose prompts cannot be made is refused before any runs.
    pub fn workloads(
        mut self,
        make: impl Fn(LengthPoint) -> Result<Box<dyn Workload>, Error> + Send + Sync + 'static,
    ) -> Self {
        self.workloads = Some(Box::new(make));
        self
    }

    /// Validates everything and creates the artifact folder.
    pub fn build(self) -> Result<LengthSweep, Error> {
        let Some(workloads) = self.workloads else {
            return Err(Error::invalid(
                "a length sweep needs the workload of each length: call .workloads(...)",
            ));
        };
        if self.points.is_empty() {
            return Err(Error::invalid(
                "a length sweep needs at least one length pair",
            ));
        }
        if self.concurrency == 0 {
            return Err(Error::invalid("concurrency must be at least 1"));
        }
        let settings = self.bench.level_settings();
        if let Some(o) = &settings.open_loop {
            if o.rates.len() != 1 || o.replay_speedup.is_some() {
                return Err(Error::invalid(
                    "an open-loop length sweep runs every length at one request rate: give one rate (no trace replay)",
                ));
            }
        }
        // every length's prompts are made before anything runs: a length that cannot be made
        // is refused before the first is measured
        let mut made = self
            .points
            .iter()
            .map(|p| workloads(*p))
            .collect::<Result<std::collections::VecDeque<_>, Error>>()?;
        let Some(first) = made.pop_front() else {
            return Err(Error::invalid(
                "a length sweep needs at least one length pair",
            ));
        };
        let bench = self.bench.boxed_workload(first).build()?;
        Ok(LengthSweep {
            bench,
            points: self.points,
            concurrency: self.concurrency,
            workloads: made,
        })
    }
}

/// A length sweep ready to run.
pub struct LengthSweep {
    bench: Bench,
    points: Vec<LengthPoint>,
    concurrency: u32,
    /// The prompts of the lengths after the first (the bench holds the first's).
    workloads: std::collections::VecDeque<Box<dyn Workload>>,
}

impl std::fmt::Debug for LengthSweep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LengthSweep")
            .field("points", &self.points)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

/// What a length sweep measured.
#[derive(Debug, Clone)]
pub struct LengthReport {
    /// One row per length, in the order run.
    pub rows: Vec<LengthRow>,
    /// The prefill rate fitted to TTFT against the measured input lengths.
    pub prefill: Option<PrefillFit>,
    /// Each length's summary.
    pub summaries: Vec<LevelSummary>,
    /// Where the files are.
    pub artifact_dir: std::path::PathBuf,
    /// True when the sweep was interrupted.
    pub interrupted: bool,
}

/// A measured, successful request's TTFT, ms.
fn ttft_of(r: &kneepoint_core::RequestRecord) -> Option<f64> {
    (r.error.is_none() && r.phase == kneepoint_core::Phase::Profiling)
        .then(|| RequestMetrics::of(r).ttft_ms)
        .flatten()
}

/// One length's requests as the fit reads them: measured input tokens and TTFTs.
fn sample(summary: &LevelSummary, ttft_ms: Vec<f64>) -> LengthSample {
    LengthSample {
        input_tokens: summary
            .value(Metric::InputSequenceLength, kneepoint_core::Stat::Avg)
            .unwrap_or(f64::NAN),
        ttft_ms,
    }
}

impl LengthSweep {
    /// Starts a length sweep over `transport`.
    pub fn builder(transport: Arc<dyn Transport>) -> LengthSweepBuilder {
        LengthSweep::on(Bench::builder(transport))
    }

    /// Starts a length sweep on a bench already configured.
    pub fn on(bench: BenchBuilder) -> LengthSweepBuilder {
        LengthSweepBuilder {
            bench,
            points: Vec::new(),
            concurrency: 1,
            workloads: None,
        }
    }

    /// Runs every length and writes every artifact; stops after the current level when `cancel`
    /// fires (that level's files are marked partial).
    pub async fn run(self, cancel: &CancelToken) -> Result<LengthReport, Error> {
        let log = self.bench.log.clone();
        let run = self.run_lengths(cancel).await;
        if let Err(e) = &run {
            log.failed(e);
        }
        run
    }

    async fn run_lengths(mut self, cancel: &CancelToken) -> Result<LengthReport, Error> {
        let dir = self.bench.artifact_dir.clone();
        let open = self.bench.settings.open_loop.clone();
        let (concurrency, rate) = match &open {
            Some(o) => (o.max_in_flight.unwrap_or(0), o.rates.first().copied()),
            None => (self.concurrency, None),
        };
        self.bench.set_rate(rate);
        let request_count = self.bench.settings.request_count;
        let settings = self.bench.description.clone();
        let (mut rows, mut summaries, mut samples) = (Vec::new(), Vec::new(), Vec::new());
        let mut prefill: Option<PrefillFit> = None;
        for (i, p) in self.points.iter().enumerate() {
            if i > 0 {
                let Some(next) = self.workloads.pop_front() else {
                    return Err(Error::invalid("a length has no workload"));
                };
                match self.bench.workload.lock() {
                    Ok(mut w) => *w = next,
                    Err(_) => return Err(Error::invalid("the workload lock was poisoned")),
                }
                // drawn ahead for the previous length: not this one's prompts
                self.bench.pending.clear();
            }
            // the level's own lengths (and, as the settings list them, the seed its prompts
            // were drawn with) in its input_config
            let own = settings
                .pointer("/workload/lengths")
                .and_then(serde_json::Value::as_array)
                .and_then(|l| l.iter().find(|e| e["isl"] == p.isl && e["osl"] == p.osl))
                .cloned()
                .unwrap_or_else(|| json!({"isl": p.isl, "osl": p.osl}));
            self.bench.description = settings.clone();
            self.bench.description["length"] = own;
            let name = p.dir();
            let label = format!("ISL {} / OSL {}", p.isl, p.osl);
            let (summary, cancelled, _) = self
                .bench
                .run_level(&dir.join(&name), concurrency, request_count, &label, cancel)
                .await?;
            // the TTFTs from the level's file, record by record (a long level keeps no records)
            let mut ttft = Vec::new();
            kneepoint_metrics::export::read_jsonl_each(
                &kneepoint_metrics::export::records_path(&dir.join(&name)),
                |r| ttft.extend(ttft_of(&r)),
            )?;
            samples.push(sample(&summary, ttft));
            rows.push(LengthRow::new(&summary, *p, name));
            summaries.push(summary);
            prefill = fit_prefill(&samples);
            write(
                &self.bench,
                &settings,
                concurrency,
                &rows,
                prefill.as_ref(),
                false,
                cancelled,
            )?;
            if cancelled || cancel.is_cancelled() {
                break;
            }
        }
        // the fit of every measured length, as written after the last one
        let interrupted = cancel.is_cancelled();
        write(
            &self.bench,
            &settings,
            concurrency,
            &rows,
            prefill.as_ref(),
            !interrupted,
            interrupted,
        )?;
        self.bench.log.info(&format!(
            "length sweep {} over {} lengths; prefill: {}",
            if interrupted { "interrupted" } else { "done" },
            rows.len(),
            prefill
                .as_ref()
                .and_then(|f| f.rate_tokens_per_s)
                .map_or("not measured".into(), |r| format!("{r:.0} tokens/s"))
        ));
        crate::render::render_quietly(&dir, self.bench.observer.as_ref());
        Ok(LengthReport {
            rows,
            prefill,
            summaries,
            artifact_dir: dir,
            interrupted,
        })
    }
}

/// Writes `length_sweep.json` (after each level, and at the end).
fn write(
    bench: &Bench,
    settings: &serde_json::Value,
    concurrency: u32,
    rows: &[LengthRow],
    prefill: Option<&PrefillFit>,
    complete: bool,
    interrupted: bool,
) -> Result<(), Error> {
    let doc = LengthSweepDoc {
        schema_version: SCHEMA_VERSION,
        kneepoint_version: env!("CARGO_PKG_VERSION").to_owned(),
        recipe: "length-sweep".into(),
        complete,
        interrupted,
        settings: settings.clone(),
        concurrency,
        request_rate: bench.rate,
        rows: rows.to_vec(),
        prefill: prefill.cloned(),
    };
    let path = bench
        .artifact_dir
        .join(kneepoint_core::folder::LENGTH_SWEEP);
    Ok(write_document(&path, &doc)?)
}

/// Writes `length_sweep.json` again from a saved folder's levels: each row and the fit from the
/// level's records (as `kneepoint report` re-summarises them), the settings and state as saved.
pub(crate) fn resummarise(a: &kneepoint_report::Artifact) -> Result<std::path::PathBuf, Error> {
    let path = a.root.join(kneepoint_core::folder::LENGTH_SWEEP);
    let mut doc: LengthSweepDoc =
        serde_json::from_value(a.doc.clone()).map_err(|source| Error::Saved {
            path: path.clone(),
            what: "length sweep",
            source,
        })?;
    let (mut rows, mut samples) = (Vec::new(), Vec::new());
    for l in &a.levels {
        let Some(saved) = doc.rows.iter().find(|r| r.dir == l.dir) else {
            continue;
        };
        let point = LengthPoint {
            isl: saved.isl,
            osl: saved.osl,
        };
        rows.push(LengthRow::new(&l.summary, point, l.dir.clone()));
        // every record of the level, as the run fitted them (a long level's loaded records are
        // a sample)
        let mut ttft = Vec::new();
        kneepoint_metrics::export::read_jsonl_each(
            &kneepoint_metrics::export::records_path(&a.root.join(&l.dir)),
            |r| ttft.extend(ttft_of(&r)),
        )?;
        samples.push(sample(&l.summary, ttft));
    }
    doc.rows = rows;
    doc.prefill = fit_prefill(&samples);
    write_document(&path, &doc)?;
    Ok(path)
}
