//! The end of a level: its summary (from the records kept, or the streamed one), the client's
//! health, time slices, and the summary files beside the records.

use std::path::Path;
use std::sync::Mutex;

use kneepoint_core::folder;
use kneepoint_metrics::export::LevelInfo;
use kneepoint_metrics::LevelSummary;
use kneepoint_runner::LevelRun;
use serde_json::Value;

use crate::streamed::Streamed;
use crate::{Bench, Error};

impl Bench {
    /// Summarises a finished run and writes its summary files (the records and inputs are
    /// already written).
    pub(crate) fn finish_level(
        &self,
        dir: &Path,
        concurrency: u32,
        level: Value,
        run: &LevelRun,
        server: Option<kneepoint_core::ServerSummary>,
        streamed: Option<&Mutex<Streamed>>,
    ) -> Result<(LevelSummary, bool), Error> {
        for e in &run.sink_errors {
            self.observer
                .warning(&format!("concurrency {concurrency}: {e}"));
        }
        let finished = self.write_level(dir, concurrency, level, run, server, streamed);
        match (finished, run.sink_errors.first()) {
            (Err(e), Some(first)) => Err(Error::Unsaved {
                dir: dir.to_owned(),
                records: first.clone(),
                source: Box::new(e),
            }),
            (finished, _) => finished,
        }
    }

    /// The level's time slices (`--slice-s`), with a warning where they cannot be made.
    fn slices(
        &self,
        concurrency: u32,
        run: &LevelRun,
        streamed: bool,
    ) -> Option<kneepoint_metrics::TimeSlices> {
        match self.settings.slice_s {
            Some(s) if !streamed => {
                let t = kneepoint_metrics::time_slices(concurrency, &run.records, s);
                if t.is_none() && run.records.len() > 1 {
                    self.observer.warning(&format!(
                    "concurrency {concurrency}: no time slices of {s} s (more than {} slices; use longer ones)",
                    kneepoint_metrics::MAX_SLICES
                ));
                }
                t
            }
            Some(_) => {
                self.observer.warning(&format!(
                "concurrency {concurrency}: no time slices (the level was summarised in bounded memory)"
            ));
                None
            }
            None => None,
        }
    }

    /// [`Bench::finish_level`]'s files and summary.
    fn write_level(
        &self,
        dir: &Path,
        concurrency: u32,
        level: Value,
        run: &LevelRun,
        server: Option<kneepoint_core::ServerSummary>,
        streamed: Option<&Mutex<Streamed>>,
    ) -> Result<(LevelSummary, bool), Error> {
        // Past `records_in_memory` the run kept no record: the summary is the streamed one.
        let streamed = streamed
            .filter(|_| run.records_seen > run.records.len())
            .map(|s| {
                s.lock()
                    .map_err(|_| Error::invalid("the level's summary sink panicked"))
            })
            .transpose()?;
        let exact = self.settings.exact_percentiles;
        let mut summary = match &streamed {
            Some(s) => s.summary(concurrency, exact, dir)?,
            None => LevelSummary::from_records(concurrency, &run.records, &self.settings.goodput),
        };
        crate::server::attach(&mut summary, server);
        // judged against the level's smallest median latency (TTFT when streaming)
        let median = [
            kneepoint_core::Metric::TimeToFirstToken,
            kneepoint_core::Metric::RequestLatency,
        ]
        .iter()
        .filter_map(|m| summary.value(*m, kneepoint_core::Stat::P50))
        .reduce(f64::min);
        summary.client = run.health.clone().map(|h| h.judge(median));
        if let Some(why) = summary
            .client
            .as_ref()
            .and_then(|c| c.client_limited.as_ref())
        {
            self.observer.warning(&format!(
                "concurrency {concurrency}: client-limited ({why}); the level is left out of the knee and the zone, and a search or ranking resting on it is marked"
            ));
        }
        let mut input_config = self.description.clone();
        // what the prefix-cache reset before this run did (the run's settings stay as given)
        if let Some(r) = &self.reset_outcome {
            input_config["prefix_cache_reset"] = r.clone();
        }
        input_config["level"] = level;
        if !run.measured_starts_ns.is_empty() {
            input_config["level"]["kept_loaded"] = kept_loaded(run, concurrency, &mut summary);
        }
        if streamed.is_some() {
            input_config["level"]["summary"] = crate::streamed::note(run.records_seen, exact);
        }
        if let Some(why) = &run.early_stop {
            input_config["level"]["stopped_early"] = Value::String(why.clone());
            self.observer
                .note(&format!("concurrency {concurrency}: {why}"));
        }
        let slices = self.slices(concurrency, run, streamed.is_some());
        if let Some(t) = &slices {
            if let Some(why) = t.steadiness.not_steady() {
                summary
                    .warnings
                    .push(format!("{why} (time slices of {} s)", t.slice_s));
            }
            summary.steadiness = Some(t.steadiness.clone());
        }
        // Records that could not be stored (a full disk) stopped the sending: the level is
        // partial, its summary resting on the records held in memory.
        if let Some(first) = run.sink_errors.first() {
            summary.warnings.push(format!(
                "records not stored ({first}): sending stopped and the summary rests on the {} records held in memory",
                run.records_seen
            ));
        }
        let partial = run.cancelled || !run.sink_errors.is_empty();
        let info = LevelInfo {
            start_unix_ns: run.start_unix_ns,
            end_unix_ns: run.end_unix_ns,
            input_config,
            partial,
        };
        if let Some(t) = &slices {
            kneepoint_metrics::export::write_timeslices(dir, t, &info.input_config)?;
        }
        self.log.level(dir, &summary, partial);
        kneepoint_metrics::export::write_level_summary(dir, &summary, &info)?;
        if self.settings.export_outputs {
            kneepoint_metrics::export::write_outputs_json(
                &dir.join(folder::OUTPUTS),
                &run.records,
                &run.warmup_records,
            )?;
        }
        let routes = match &streamed {
            Some(s) => s.routes(concurrency),
            None => kneepoint_metrics::export::route_summaries(concurrency, &run.records),
        };
        if !routes.is_empty() {
            kneepoint_metrics::export::write_route_summary(
                &dir.join(folder::ROUTE_SUMMARY),
                &routes,
            )?;
        }
        let turns = kneepoint_metrics::export::turn_summaries(concurrency, &run.records);
        if !turns.is_empty() {
            kneepoint_metrics::export::write_turn_summary(&dir.join(folder::TURN_SUMMARY), &turns)?;
        }
        Ok((summary, run.cancelled))
    }
}

/// A level kept loaded: its rates counted over the time the measured requests' load took,
/// from the rate of their starts (the records' span also holds the lead-in's last wave); the
/// note of how, for the level's `input_config`.
fn kept_loaded(run: &LevelRun, concurrency: u32, summary: &mut LevelSummary) -> Value {
    let span = summary.benchmark_duration_s;
    let starts = kneepoint_metrics::loaded_duration_s(&run.measured_starts_ns, concurrency);
    // No more measured requests than slots: Little's law instead (every slot busy,
    // each request holding one for its end-to-end latency).
    let little = || {
        use kneepoint_core::{Metric, Stat};
        let mean_s = summary.value(Metric::RequestLatency, Stat::Avg)? / 1000.0;
        let n = run.measured_starts_ns.len() as f64;
        let d = n * mean_s / f64::from(concurrency.max(1));
        (d.is_finite() && d > 0.0).then_some(d)
    };
    let (duration, from) = match starts {
        Some(d) => (Some(d), "measured starts"),
        None => (little(), "Little's law"),
    };
    if let Some(d) = duration {
        summary.rescale_duration(d);
    }
    serde_json::json!({
        "lead_in": run.warmup_records.len(),
        "duration_s": duration,
        "duration_from": from,
        "records_span_s": span,
    })
}
