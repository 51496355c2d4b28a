//! Repeated runs of a level: each run in `profile_runs/run_NNNN/`, the statistics across runs
//! in `aggregate/`, the pooled records and their summary in the level's own files, and the
//! convergence rule that may stop the repetition early.

use kneepoint_core::folder;
use std::io::Write as _;
use std::path::Path;

use kneepoint_metrics::export::{read_jsonl, write_aggregate, AggregateInfo, LevelInfo};
use kneepoint_metrics::{summary_values, Convergence, LevelSummary, RunAggregate};
use kneepoint_runner::CancelToken;
use serde_json::json;

use crate::{Bench, Error};

/// How a level's repetition ended.
#[derive(Debug, Clone)]
pub struct RunsOutcome {
    /// Runs completed (an interrupted run is not counted).
    pub completed: u32,
    /// Why the runs stopped.
    pub stop_reason: String,
    /// The statistics across the completed runs.
    pub aggregate: RunAggregate,
}

impl Bench {
    /// Waits until `at` (Unix ns; the settings' `start_at_unix_ns`) or the cancellation,
    /// saying so in the log; a start time already past is a warning with how late the shard is.
    pub(crate) async fn wait_for_start(&self, at: u64, cancel: &CancelToken) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        if now >= at {
            self.observer.warning(&format!(
                "the start time {} passed {:.3} s ago: starting now (this shard is late by that much)",
                kneepoint_metrics::export::rfc3339(at),
                (now - at) as f64 / 1e9
            ));
            return;
        }
        let wait = std::time::Duration::from_nanos(at - now);
        self.observer.note(&format!(
            "waiting {:.1} s for the start time {}",
            wait.as_secs_f64(),
            kneepoint_metrics::export::rfc3339(at)
        ));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.cancelled() => {}
        }
    }

    /// Empties the server's prefix cache before a run (`--reset-prefix-cache`) and notes the
    /// outcome in the level's `input_config.prefix_cache_reset`; the first reset failing stops
    /// the run (the server does not offer it), a later one is a warning.
    async fn reset_prefix_cache(&mut self, label: &str) -> Result<(), Error> {
        let Some(reset) = self.prefix_reset.clone() else {
            return Ok(());
        };
        let url = kneepoint_core::redact_url(reset.url());
        match reset.reset().await {
            Ok(status) => {
                self.prefix_resets += 1;
                self.reset_outcome = Some(serde_json::json!({"url": url, "status": status}));
                self.log.info(&format!(
                    "{label}: prefix cache reset (POST {url}: {status})"
                ));
            }
            Err(why) if self.prefix_resets == 0 => return Err(Error::invalid(reset.refused(&why))),
            Err(why) => {
                self.observer.warning(&format!(
                    "{label}: the prefix cache was not reset ({why}): this level may start warm"
                ));
                self.reset_outcome = Some(serde_json::json!({"url": url, "error": why}));
            }
        }
        Ok(())
    }

    /// Runs a level as many times as the settings say (once: exactly one run).
    /// Returns the level's summary (pooled over the runs), whether it was interrupted, and,
    /// with several runs, how the repetition ended.
    pub(crate) async fn run_level(
        &mut self,
        dir: &Path,
        concurrency: u32,
        request_count: u32,
        label: &str,
        cancel: &CancelToken,
    ) -> Result<(LevelSummary, bool, Option<RunsOutcome>), Error> {
        // Only the first level waits: the start time is taken once.
        if let Some(at) = self.settings.start_at_unix_ns.take() {
            self.wait_for_start(at, cancel).await;
        }
        let runs = self.settings.runs.clone();
        self.server.clear();
        if runs.num_runs <= 1 {
            self.reset_prefix_cache(label).await?;
            let (s, cancelled) = self
                .run_once(dir, concurrency, request_count, label, true, cancel)
                .await?;
            self.server.clear();
            return Ok((s, cancelled, None));
        }
        let mut done: Vec<(String, LevelSummary)> = Vec::new();
        let mut failed = Vec::new();
        let mut verdict = None;
        let mut stop_reason = format!("ran the requested {} runs", runs.num_runs);
        let mut cancelled = false;
        for k in 1..=runs.num_runs {
            let run = format!("run_{k:04}");
            let run_label = format!("{label} run {k}/{}", runs.num_runs);
            self.reset_prefix_cache(&run_label).await?;
            let (s, stopped) = self
                .run_once(
                    &dir.join(folder::RUNS_DIR).join(&run),
                    concurrency,
                    request_count,
                    &run_label,
                    k == 1,
                    cancel,
                )
                .await?;
            if stopped {
                cancelled = true;
                failed.push(run);
                stop_reason = format!("interrupted during run {k}");
                break;
            }
            done.push((run, s));
            if let Some(rule) = &runs.convergence {
                let values: Vec<f64> = done
                    .iter()
                    .filter_map(|(_, s)| summary_values(s).get(&rule.statistic).map(|v| v.0))
                    .collect();
                let v = rule.judge(&values);
                let (Convergence::Continue { reason } | Convergence::Converged { reason }) = &v;
                self.observer.note(&format!("{label}: run {k}: {reason}"));
                let converged = matches!(v, Convergence::Converged { .. });
                if let Convergence::Converged { reason } = &v {
                    stop_reason = format!("converged: {reason}");
                } else if k == runs.num_runs {
                    stop_reason = format!(
                        "reached the cap of {} runs without converging ({})",
                        runs.num_runs,
                        match &v {
                            Convergence::Continue { reason } => reason.as_str(),
                            Convergence::Converged { reason } => reason.as_str(),
                        }
                    );
                }
                verdict = Some(v);
                if converged {
                    break;
                }
            }
        }
        let pairs: Vec<(String, &LevelSummary)> =
            done.iter().map(|(l, s)| (l.clone(), s)).collect();
        let aggregate = RunAggregate::of(&pairs, runs.confidence);
        let info = AggregateInfo {
            num_runs_requested: runs.num_runs,
            failed_runs: failed.clone(),
            stop_reason: stop_reason.clone(),
            convergence: verdict,
        };
        write_aggregate(&dir.join(folder::AGGREGATE_DIR), &aggregate, &info)?;
        let all_runs: Vec<String> = done.iter().map(|(l, _)| l.clone()).chain(failed).collect();
        let summary = self.pool(
            dir,
            concurrency,
            request_count,
            &all_runs,
            &stop_reason,
            cancelled,
        )?;
        Ok((
            summary,
            cancelled,
            Some(RunsOutcome {
                completed: done.len() as u32,
                stop_reason,
                aggregate,
            }),
        ))
    }

    /// Concatenates the runs' records into the level's `profile_export.jsonl` and writes the
    /// pooled summary files (throughput over the runs' summed measured time).
    fn pool(
        &mut self,
        dir: &Path,
        concurrency: u32,
        request_count: u32,
        runs: &[String],
        stop_reason: &str,
        partial: bool,
    ) -> Result<LevelSummary, Error> {
        let pooled = dir.join(kneepoint_metrics::export::records_file_name(
            self.settings.compress_records,
        ));
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&pooled).map_err(|e| Error::io("create", &pooled, e))?,
        );
        let mut records = Vec::new();
        let mut client: Option<kneepoint_core::ClientHealth> = None;
        let mut steadiness: Option<kneepoint_metrics::Steadiness> = None;
        let (mut start, mut end) = (u64::MAX, 0u64);
        // Runs kept loaded: the pooled rates count over the sum of their loaded durations.
        let mut loaded: Option<f64> = Some(0.0);
        for run in runs {
            let run_dir = dir.join(folder::RUNS_DIR).join(run);
            // Concatenated zstd frames are one valid zstd stream.
            let path = kneepoint_metrics::export::records_path(&run_dir);
            // Streamed: a run's records file may be larger than the memory to hold it.
            let mut records_file =
                std::fs::File::open(&path).map_err(|e| Error::io("read", &path, e))?;
            std::io::copy(&mut records_file, &mut out)
                .map_err(|e| Error::io("copy the records in", &path, e))?;
            records.extend(read_jsonl(&path)?);
            let json_path = run_dir.join(folder::AIPERF_JSON);
            let bytes = kneepoint_core::read_capped(&json_path, kneepoint_core::MAX_DOCUMENT_BYTES)
                .map_err(|e| Error::io("read", &json_path, e))?;
            let doc: serde_json::Value =
                serde_json::from_slice(&bytes).map_err(|source| Error::Saved {
                    path: json_path.clone(),
                    what: "level summary",
                    source,
                })?;
            if let Some(i) = LevelInfo::from_aiperf_json(&doc) {
                start = start.min(i.start_unix_ns);
                end = end.max(i.end_unix_ns);
            }
            let d = doc
                .pointer("/input_config/level/kept_loaded/duration_s")
                .and_then(serde_json::Value::as_f64);
            loaded = loaded.zip(d).map(|(a, b)| a + b);
            // the pooled level is client-limited when any of its runs was (the first such
            // run's health is kept; otherwise the last run's)
            if let Some(h) = kneepoint_metrics::export::client_health_from_aiperf_json(&doc) {
                if client.as_ref().is_none_or(|c| c.client_limited.is_none()) {
                    client = Some(h);
                }
            }
            // likewise not steady when any run drifted (that run's verdict is kept)
            if let Some(t) = kneepoint_metrics::export::steadiness_from_aiperf_json(&doc) {
                if steadiness.as_ref().is_none_or(|s| s.steady != Some(false)) {
                    steadiness = Some(t);
                }
            }
        }
        out.flush().map_err(|e| Error::io("write", &pooled, e))?;
        let mut summary = LevelSummary::from_records(concurrency, &records, &self.settings.goodput);
        summary.client = client;
        if let Some(why) = steadiness.as_ref().and_then(|s| s.not_steady()) {
            summary
                .warnings
                .push(format!("{why} (in one of the level's runs)"));
        }
        summary.steadiness = steadiness;
        let loaded = loaded.filter(|d| *d > 0.0 && !runs.is_empty());
        if let Some(d) = loaded {
            summary.rescale_duration(d);
        }
        let server = self.server.pooled(self.observer.as_ref(), dir);
        crate::server::attach(&mut summary, server);
        let mut input_config = self.description.clone();
        if let Some(r) = &self.reset_outcome {
            input_config["prefix_cache_reset"] = r.clone();
        }
        input_config["level"] = json!({
            "concurrency": concurrency,
            "request_count": request_count,
            "runs": runs,
            "stop_reason": stop_reason,
        });
        if let Some(d) = loaded {
            input_config["level"]["kept_loaded"] = json!({ "duration_s": d });
        }
        let info = LevelInfo {
            start_unix_ns: if start == u64::MAX { 0 } else { start },
            end_unix_ns: end,
            input_config,
            partial,
        };
        kneepoint_metrics::export::write_level_summary(dir, &summary, &info)?;
        Ok(summary)
    }
}

/// The measurement a search judges when SLAs must hold with confidence: each SLA's statistic
/// at the pessimistic end of its interval across runs (upper end for `<=`/`<`, lower end for
/// `>=`/`>`), the pooled values elsewhere.
pub fn pessimistic(
    pooled: kneepoint_planner::Measurement,
    aggregate: &RunAggregate,
    slas: &[kneepoint_planner::Sla],
) -> kneepoint_planner::Measurement {
    use kneepoint_planner::Op;
    let mut m = pooled;
    for sla in slas {
        let Some(key) = sla.key() else {
            continue;
        };
        let Some(s) = aggregate.metrics.get(&key.underscored()) else {
            continue;
        };
        let bound = match sla.op {
            Op::Le | Op::Lt => s.ci_high,
            Op::Ge | Op::Gt => s.ci_low,
        };
        m = m.with(key.metric(), key.stat(), bound.unwrap_or(s.mean));
        // the value is already the interval's pessimistic end: its spread is spent
        m.spread.remove(&key);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_metrics::RunStatistic;
    use kneepoint_planner::{check_all, Measurement, Metric, Sla, Stat};

    #[test]
    fn an_sla_met_by_the_mean_but_not_by_the_interval_fails() {
        let slas = vec![
            Sla::parse("time_to_first_token:p95:<=:110").unwrap(),
            Sla::parse("output_token_throughput:avg:>=:900").unwrap(),
        ];
        let mut aggregate = RunAggregate {
            confidence_level: 0.95,
            run_labels: vec!["run_0001".into(), "run_0002".into(), "run_0003".into()],
            metrics: Default::default(),
        };
        aggregate.metrics.insert(
            "time_to_first_token_p95".into(),
            RunStatistic::of(&[90.0, 100.0, 110.0], 0.95, "ms").unwrap(),
        );
        aggregate.metrics.insert(
            "output_token_throughput_avg".into(),
            RunStatistic::of(&[1000.0, 1001.0, 999.0], 0.95, "tokens/sec").unwrap(),
        );
        let pooled = Measurement::new(1000.0)
            .with(Metric::TimeToFirstToken, Stat::P95, 100.0)
            .with(Metric::OutputTokenThroughput, Stat::Avg, 1000.0);
        assert!(check_all(&slas, &pooled).iter().all(|c| c.holds));
        let strict = pessimistic(pooled, &aggregate, &slas);
        let checks = check_all(&slas, &strict);
        // TTFT: mean 100, interval up to ~124.8 > 110: fails. Throughput: tight, holds.
        assert!(!checks[0].holds, "{checks:?}");
        assert!(checks[1].holds, "{checks:?}");
        assert!(strict.value(Metric::TimeToFirstToken, Stat::P95).unwrap() > 120.0);
    }
}
