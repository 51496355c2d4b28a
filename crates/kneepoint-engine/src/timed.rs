//! Duration-bound closed-loop levels: requests are made just ahead of the senders by the
//! [`Feed`](crate::feed::Feed)'s generator thread (off the timed path); records past
//! `records_in_memory` are summarised as they finish: a level of any length holds memory flat.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kneepoint_core::RecordSink;
use kneepoint_metrics::export::JsonlSink;
use kneepoint_metrics::LevelSummary;
use kneepoint_runner::{run_level_for, CancelToken};
use serde_json::json;

use crate::feed::Feed;
use crate::streamed::{Streamed, StreamedSink};
use crate::{Bench, Error};

impl Bench {
    /// Runs one timed level into `dir` (the settings' duration; warm-up time only when
    /// `warmup`). Requests in flight after the grace period are recorded as cancelled.
    pub(crate) async fn run_timed(
        &mut self,
        dir: &Path,
        concurrency: u32,
        label: &str,
        warmup: bool,
        cancel: &CancelToken,
    ) -> Result<(LevelSummary, bool), Error> {
        let Some(mut time) = self.settings.duration else {
            return Err(Error::invalid("a timed level needs a duration"));
        };
        if !warmup {
            time.warmup = std::time::Duration::ZERO;
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        // Warm-up requests are not listed: the flag turns on when the measured phase starts.
        let measuring = Arc::new(AtomicBool::new(time.warmup.is_zero()));
        let first = self.pending.drain(..).collect();
        let feed = Feed::start(self, dir, concurrency, (first, usize::MAX))?;
        let source = {
            let measuring = measuring.clone();
            feed.source(move || measuring.load(Ordering::Relaxed))
        };
        let streamed = Arc::new(Mutex::new(Streamed::new(self.settings.goodput)));
        let sinks: Vec<Box<dyn RecordSink>> = vec![
            Box::new(JsonlSink::in_dir(dir, self.settings.compress_records)?),
            Box::new(StreamedSink(streamed.clone())),
        ];
        let mut config = self.level_config(concurrency, cancel);
        let scrape = self
            .server
            .begin(&self.observer, dir, label, 0, &mut config)
            .await;
        let before = config.after_warmup.take();
        let flag = measuring.clone();
        config.after_warmup = Some(Arc::new(move || {
            flag.store(true, Ordering::Relaxed);
            let before = before.clone();
            Box::pin(async move {
                if let Some(hook) = before {
                    hook().await;
                }
            })
        }));
        let run = run_level_for(
            self.transport.clone(),
            &config,
            time,
            source,
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
                "multi-turn conversations run in count-bound levels: a timed level cannot keep their history",
            ));
        }
        feed.finish(self.settings.seed)?;
        let level = json!({
            "concurrency": concurrency,
            "duration_s": time.measure.as_secs_f64(),
            "grace_s": time.grace.as_secs_f64(),
            "warmup_duration_s": time.warmup.as_secs_f64(),
            "requests_sent": run.records_seen,
        });
        self.finish_level(dir, concurrency, level, &run, server, Some(&streamed))
    }
}
