//! One run of one level: closed loop, open loop on an arrival schedule, or a trace replay; its
//! `inputs.json`, `profile_export.jsonl` and summaries in the level's folder.

use kneepoint_core::folder;
use std::path::Path;
use std::sync::{Arc, Mutex};

use kneepoint_core::RecordSink;
use kneepoint_metrics::export::{
    render_input_entry, write_inputs_json, InputEntry, InputsWriter, JsonlSink,
};
use kneepoint_metrics::LevelSummary;
use kneepoint_runner::{run_level, schedule, CancelToken, OpenLoop};
use serde_json::json;

use crate::counted::DRAW_BATCH;
use crate::feed::unlisted;
use crate::inputs::input_payload;
use crate::streamed::{Streamed, StreamedSink};
use crate::{Bench, Error};

/// The seed of the `n`th level's arrival schedule.
fn level_seed(seed: u64, n: u64) -> u64 {
    seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl Bench {
    /// Draws `n` requests from the workload in batches, yielding between them, so that an
    /// interrupt during a long preparation (a million prompts) is seen at once: `None` then.
    async fn draw(
        &mut self,
        n: usize,
        cancel: &CancelToken,
    ) -> Result<Option<Vec<kneepoint_core::Request>>, Error> {
        let mut out = Vec::with_capacity(n.min(1 << 20));
        // What an earlier level drew and did not send (or what was looked at before this
        // one) comes first, in whole conversations: a turn that continues one is never left
        // for the next level.
        let mut k = n.min(self.pending.len());
        while self
            .pending
            .get(k)
            .is_some_and(|r| r.turn.as_ref().is_some_and(|t| t.turn_index > 0))
        {
            k += 1;
        }
        out.extend(self.pending.drain(..k));
        while out.len() < n {
            if cancel.is_cancelled() {
                return Ok(None);
            }
            let k = (n - out.len()).min(DRAW_BATCH);
            let batch = self
                .workload
                .lock()
                .map_err(|_| Error::invalid("the workload generator panicked earlier"))?
                .requests(k)?;
            out.extend(batch);
            tokio::task::yield_now().await;
        }
        Ok(Some(out))
    }

    /// `inputs.json` entries of a multi-turn level: one per conversation (in order of its
    /// first turn), its payloads the turns as sent.
    fn conversation_inputs(&self, run: &kneepoint_runner::LevelRun) -> Vec<InputEntry> {
        let mut out: Vec<InputEntry> = Vec::new();
        let mut index: std::collections::HashMap<String, usize> = Default::default();
        for r in &run.sent_turns {
            let id = r
                .turn
                .as_ref()
                .map_or_else(|| r.id.to_string(), |t| t.conversation_id.clone());
            let i = *index.entry(id.clone()).or_insert_with(|| {
                out.push(InputEntry {
                    session_id: id,
                    payloads: Vec::new(),
                });
                out.len() - 1
            });
            out[i]
                .payloads
                .extend(input_payload(self.transport.as_ref(), r));
        }
        out
    }

    /// The files of a level interrupted before its first request: no records, marked partial.
    fn interrupted_before_sending(
        &self,
        dir: &Path,
        concurrency: u32,
        request_count: u32,
    ) -> Result<(LevelSummary, bool), Error> {
        write_inputs_json(&dir.join(folder::INPUTS), &[])?;
        JsonlSink::in_dir(dir, self.settings.compress_records)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let run = kneepoint_runner::LevelRun {
            records: Vec::new(),
            records_seen: 0,
            warmup_records: Vec::new(),
            start_unix_ns: now,
            end_unix_ns: now,
            sink_errors: Vec::new(),
            cancelled: true,
            unsent: request_count as usize,
            early_stop: None,
            sent_turns: Vec::new(),
            health: None,
            measured_starts_ns: Vec::new(),
        };
        let level = json!({"concurrency": concurrency, "request_count": request_count});
        self.finish_level(dir, concurrency, level, &run, None, None)
    }

    /// Runs one level once into `dir` (created), writing every per-level file, and summarises
    /// it; `warmup` sends the warm-up requests first. When `cancel` fires, in-flight requests
    /// are recorded as cancelled and the level's files are written and marked partial; the
    /// returned flag says so.
    pub(crate) async fn run_once(
        &mut self,
        dir: &Path,
        concurrency: u32,
        request_count: u32,
        label: &str,
        warmup: bool,
        cancel: &CancelToken,
    ) -> Result<(LevelSummary, bool), Error> {
        if self.settings.duration.is_some() && self.settings.open_loop.is_none() {
            return self
                .run_timed(dir, concurrency, label, warmup, cancel)
                .await;
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        let loaded = self.keeps_loaded();
        let (warmup_count, request_count, filler_count) =
            self.counts(concurrency, request_count, warmup)?;
        if self.settings.open_loop.is_none() && self.replay.is_none() {
            let total = warmup_count + request_count as usize + filler_count;
            let first = self.peek(total)?;
            let budget = self.settings.prepared_bytes;
            if crate::counted::draw_as_it_goes(&first, total, budget) {
                // No fillers: a level drawn as it goes is not kept loaded (`run_drawn`).
                let counts = (warmup_count, request_count as usize, 0);
                return self
                    .run_drawn(dir, (concurrency, label), counts, first, cancel)
                    .await;
            }
            // Prepared in full: what was peeked goes first.
            for r in first.into_iter().rev() {
                self.pending.push_front(r);
            }
        }
        let drawn = match self.draw(warmup_count, cancel).await? {
            Some(w) => self
                .draw(request_count as usize, cancel)
                .await?
                .map(|r| (w, r)),
            None => None,
        };
        let fillers = match drawn {
            Some(_) => self.draw(filler_count, cancel).await?,
            None => None,
        };
        let (Some((warmup, requests)), Some(fillers)) = (drawn, fillers) else {
            // Interrupted while the prompts were being made: nothing was sent.
            return self.interrupted_before_sending(dir, concurrency, request_count);
        };
        let (mut inputs, listed) = self.write_inputs(dir, &requests)?;
        let streamed = Arc::new(Mutex::new(Streamed::new(self.settings.goodput)));
        let mut sinks: Vec<Box<dyn RecordSink>> = vec![Box::new(JsonlSink::in_dir(
            dir,
            self.settings.compress_records,
        )?)];
        if requests.len() > self.settings.records_in_memory {
            sinks.push(Box::new(StreamedSink(streamed.clone())));
        }
        let mut config = self.level_config(concurrency, cancel);
        self.schedule_level(&mut config, warmup.len(), requests.len())?;
        let total = requests.len() as u64;
        let scrape = self
            .server
            .begin(&self.observer, dir, label, total, &mut config)
            .await;
        let observe = Some(self.record_observer());
        let transport = self.transport.clone();
        let run = if loaded {
            let work = (warmup, requests, fillers);
            kneepoint_runner::run_level_loaded(transport, &config, work, sinks, observe).await
        } else {
            run_level(transport, &config, requests, warmup, sinks, observe).await
        };
        let observer = self.observer.as_ref();
        let server = self
            .server
            .end(observer, label, scrape, dir, run.as_ref().ok())
            .await;
        // inputs.json is closed whatever became of the level. One stopped early or
        // interrupted lists only the requests that went out (the first ones, in order).
        let unsent = run.as_ref().map_or(0, |r| r.unsent);
        let sent = (request_count as usize).saturating_sub(unsent);
        if unsent > 0 {
            inputs.keep_first(sent.min(listed), sent);
        }
        let closed = inputs.finish(self.settings.seed);
        let run = run?;
        match (closed, run.sink_errors.first()) {
            // The records failed first (a full disk): that is the cause to report.
            (Err(e), Some(first)) => {
                return Err(Error::Unsaved {
                    dir: dir.to_owned(),
                    records: first.clone(),
                    source: Box::new(Error::from(e)),
                })
            }
            (closed, _) => closed?,
        }
        if loaded && run.measured_starts_ns.is_empty() && !run.sent_turns.is_empty() {
            self.observer.note(&format!(
                "concurrency {concurrency}: multi-turn conversations run in sessions, not kept loaded: the lead-in ran as a warm-up and the last wave drained (give --request-count for more requests per slot)"
            ));
        }
        if !run.sent_turns.is_empty() {
            // Conversations: each turn as it was sent, the conversation so far included,
            // grouped by conversation in AIPerf's shape.
            write_inputs_json(&dir.join(folder::INPUTS), &self.conversation_inputs(&run))?;
        }
        let level = json!({"concurrency": concurrency, "request_count": request_count});
        self.finish_level(dir, concurrency, level, &run, server, Some(&streamed))
    }

    /// How many warm-up, measured and filler requests a level of `concurrency` sends: a
    /// lead-in and a last wave of fillers when kept loaded, else `warmup`'s warm-up; the
    /// measured count bounded by what a trace has left, or, for an open loop run for a
    /// duration, the requests whose intended start falls inside it.
    fn counts(
        &self,
        concurrency: u32,
        request_count: u32,
        warmup: bool,
    ) -> Result<(usize, u32, usize), Error> {
        // Kept loaded: a lead-in for every run, and a wave of fillers at the end.
        let loaded = self.keeps_loaded();
        let (warmup_count, filler_count) = match self.settings.lead_in {
            Some(min) if loaded => (min.max(concurrency) as usize, concurrency as usize),
            _ if warmup => (self.settings.warmup_requests as usize, 0),
            _ => (0, 0),
        };
        let request_count = match &self.replay {
            Some((times, next)) => {
                let left = times.len().saturating_sub(*next);
                if left <= warmup_count {
                    return Err(Error::invalid(format!(
                        "the trace has {} records and {next} were sent: none left to replay",
                        times.len()
                    )));
                }
                (request_count as usize).min(left - warmup_count) as u32
            }
            None => request_count,
        };
        let request_count = match (&self.settings.open_loop, self.rate, self.settings.duration) {
            // An open loop for a duration: the requests whose intended start falls inside it.
            (Some(o), Some(rate), Some(d)) => {
                let secs = d.measure.as_secs_f64();
                let n = (rate * secs * 1.25).ceil() as usize + 16;
                let seed = level_seed(self.settings.seed, self.levels_run + 1);
                let within = schedule(o.arrival, rate, n, seed)?
                    .iter()
                    .take_while(|t| **t < d.measure)
                    .count();
                within.max(1) as u32
            }
            _ => request_count,
        };
        Ok((warmup_count, request_count, filler_count))
    }

    /// Opens the level's `inputs.json` and writes the listed requests' payloads into it,
    /// returning the writer (closed once the level says which went out) and how many it lists.
    fn write_inputs(
        &self,
        dir: &Path,
        requests: &[kneepoint_core::Request],
    ) -> Result<(InputsWriter, usize), Error> {
        // Only the listed requests' payloads are made (a seed reproduces the rest), each
        // rendered and written before the level, one at a time: none is held in memory, and
        // none is made while the level is measured (its CPU would count as the level's).
        let listed = requests.len().min(self.settings.inputs_limit);
        let mut inputs =
            InputsWriter::create(&dir.join(folder::INPUTS), self.settings.inputs_limit)?
                .with_seed(self.settings.seed);
        for r in &requests[..listed] {
            inputs.push(&render_input_entry(&InputEntry {
                session_id: r.id.to_string(),
                payloads: input_payload(self.transport.as_ref(), r)
                    .into_iter()
                    .collect(),
            }));
        }
        for r in &requests[listed..] {
            inputs.push_unlisted(unlisted(r));
        }
        // A full disk stops the level before it sends anything, as it always did.
        inputs.flush()?;
        Ok((inputs, listed))
    }

    /// Puts the level's arrival offsets in `config`: a trace's own times (sped up), or an
    /// open loop's schedule at the rate; nothing for a closed loop.
    fn schedule_level(
        &mut self,
        config: &mut kneepoint_runner::LevelConfig,
        warmup: usize,
        requests: usize,
    ) -> Result<(), Error> {
        if let (Some(o), Some((times, next))) = (&self.settings.open_loop, &mut self.replay) {
            let speedup = o.replay_speedup.unwrap_or(1.0);
            let offsets = |ts: &[u64]| -> Vec<std::time::Duration> {
                let t0 = ts.first().copied().unwrap_or(0);
                ts.iter()
                    .map(|t| {
                        std::time::Duration::from_secs_f64(
                            t.saturating_sub(t0) as f64 / 1000.0 / speedup,
                        )
                    })
                    .collect()
            };
            let (w, n) = (warmup, requests);
            config.open_loop = Some(OpenLoop {
                warmup_offsets: offsets(&times[*next..*next + w]),
                offsets: offsets(&times[*next + w..*next + w + n]),
                max_in_flight: o.max_in_flight,
            });
            *next += w + n;
        } else if let (Some(o), Some(rate)) = (&self.settings.open_loop, self.rate) {
            self.levels_run += 1;
            let seed = level_seed(self.settings.seed, self.levels_run);
            config.open_loop = Some(OpenLoop {
                offsets: schedule(o.arrival, rate, requests, seed)?,
                warmup_offsets: schedule(o.arrival, rate, warmup, !seed)?,
                max_in_flight: o.max_in_flight,
            });
        }
        Ok(())
    }
}
