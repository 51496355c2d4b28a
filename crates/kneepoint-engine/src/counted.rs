//! Count-bound closed-loop levels too large to prepare in full: a level of millions of
//! requests (`--request-count 4000000`, or the default four per slot at a concurrency of a
//! million) is drawn just ahead of the senders by the generator thread that timed levels use,
//! and its `inputs.json` entries stream out as requests are sent. Memory then holds the few
//! requests ahead of the senders, whatever the count. Smaller levels are still prepared before
//! the first request goes out, so that preparing prompts never competes with sending them.
//!
//! The workload is drawn exactly as a prepared level draws it (the warm-up requests, then the
//! level's; nothing past them), so the same seed gives the same prompts either way. One
//! difference: after a level stopped early (`--early-stop-width`, a full disk), the requests
//! a prepared level drew and never sent are gone, while a drawn level never made most of
//! them and puts the few it made back for the next level; the next level's prompts then
//! differ from a prepared run's (still the same for the same seed and settings).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use kneepoint_core::{RecordSink, Request};
use kneepoint_metrics::export::JsonlSink;
use kneepoint_metrics::LevelSummary;
use kneepoint_runner::{run_level_drawn, CancelToken};
use serde_json::json;

use crate::feed::{Feed, GENERATE_BATCH};
use crate::streamed::{Streamed, StreamedSink};
use crate::{Bench, Error};

/// Prompts made between two looks at the cancel token when a level is prepared in full (or
/// its undrawn requests are skipped).
pub(crate) const DRAW_BATCH: usize = 2048;

/// What a request costs in memory besides its prompt text (the struct, its strings' headers,
/// the record kept for it).
const REQUEST_OVERHEAD: usize = 512;

/// Whether a level of `total` requests that start like `first` is drawn as it goes: single
/// requests (a conversation keeps its history in a prepared level) whose prompts would not
/// fit in `budget` bytes ([`crate::LevelSettings::prepared_bytes`]).
pub(crate) fn draw_as_it_goes(first: &[Request], total: usize, budget: usize) -> bool {
    if first.is_empty() || first.iter().any(|r| r.turn.is_some()) {
        return false;
    }
    let text: usize = first.iter().map(|r| r.prompt.text().len()).sum();
    let each = text / first.len() + REQUEST_OVERHEAD;
    total.saturating_mul(each) > budget
}

impl Bench {
    /// The first requests of a level of `total` (what a timed level left, then up to a
    /// generator batch from the workload): enough to tell whether to draw it as it goes.
    pub(crate) fn peek(&mut self, total: usize) -> Result<Vec<Request>, Error> {
        let k = total.min(self.pending.len());
        let mut first: Vec<Request> = self.pending.drain(..k).collect();
        let more = (total - first.len()).min(GENERATE_BATCH);
        if more > 0 {
            first.extend(
                self.workload
                    .lock()
                    .map_err(|_| Error::invalid("the workload generator panicked earlier"))?
                    .requests(more)?,
            );
        }
        Ok(first)
    }

    /// Runs a closed-loop level of `warmup` + `count` (+ `fillers`, when kept loaded) requests
    /// drawn as it goes, starting with
    /// `first` (from [`Bench::peek`]). The generator fills its channel (at least the first
    /// wave) before the first request goes out, so that the level starts as a prepared one
    /// does; requests it drew and nobody sent (a level stopped early) go back to the front of
    /// the line for the next level.
    pub(crate) async fn run_drawn(
        &mut self,
        dir: &Path,
        (concurrency, label): (u32, &str),
        (warmup, count, fillers): (usize, usize, usize),
        first: Vec<Request>,
        cancel: &CancelToken,
    ) -> Result<(LevelSummary, bool), Error> {
        let total = warmup + count + fillers;
        let feed = Feed::start(self, dir, concurrency, (first, total))?;
        // The first wave ready before the level starts (or all there is, or a failure).
        feed.filled(feed.depth.min(total), || cancel.is_cancelled())
            .await;
        // Warm-up (or lead-in) requests and fillers are not listed.
        let mut taken = 0usize;
        let source = feed.source(move || {
            taken += 1;
            taken > warmup && taken <= warmup + count
        });
        let streamed = Arc::new(Mutex::new(Streamed::new(self.settings.goodput)));
        let mut sinks: Vec<Box<dyn RecordSink>> = vec![Box::new(JsonlSink::in_dir(
            dir,
            self.settings.compress_records,
        )?)];
        if count > self.settings.records_in_memory {
            sinks.push(Box::new(StreamedSink(streamed.clone())));
        }
        let mut config = self.level_config(concurrency, cancel);
        // Drawn as it goes, a level's fillers would come from the same feed as its measured
        // requests (after an early stop, the very ones it left): such a level keeps a warm-up
        // with a barrier and drains, and says so.
        if config.keep_loaded {
            config.keep_loaded = false;
            self.observer.note(&format!(
                "concurrency {concurrency}: prompts drawn as the level goes: its lead-in runs as a warm-up, with no fillers"
            ));
        }
        let scrape = self
            .server
            .begin(&self.observer, dir, label, count as u64, &mut config)
            .await;
        let run = run_level_drawn(
            self.transport.clone(),
            &config,
            source,
            (warmup, count),
            sinks,
            Some(self.record_observer()),
        )
        .await;
        feed.stop(&mut self.pending);
        let observer = self.observer.as_ref();
        let server = self
            .server
            .end(observer, label, scrape, dir, run.as_ref().ok())
            .await;
        let run = run?;
        if feed.flags.turns.load(Ordering::Relaxed) {
            return Err(Error::invalid(
                "the workload turned to multi-turn conversations after its first requests: a level drawn as it goes cannot keep their history (a library can raise LevelSettings::prepared_bytes)",
            ));
        }
        let failed = feed.flags.failed.lock().ok().and_then(|mut f| f.take());
        feed.finish(self.settings.seed)?;
        let level = json!({"concurrency": concurrency, "request_count": count});
        let finished = self.finish_level(dir, concurrency, level, &run, server, Some(&streamed))?;
        match failed {
            // The level's files are written; the run cannot go on without prompts.
            Some(why) => Err(Error::invalid(format!(
                "the workload failed after {} of the level's requests were sent (their records and summary are saved): {why}",
                run.records_seen
            ))),
            None => Ok(finished),
        }
    }
}
