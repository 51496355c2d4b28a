//! Duration-bound closed-loop levels: requests are made just ahead of the senders by a
//! generator thread (off the timed path), each with its `inputs.json` entry already rendered;
//! the entries of sent requests stream to `inputs.json` up to the level's `inputs_limit`, and
//! records past `records_in_memory` are summarised as they finish: a level of any length
//! holds memory flat.

use kneepoint_core::folder;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use kneepoint_core::{RecordSink, Request, Transport};
use kneepoint_metrics::export::{render_input_entry, InputEntry, InputsWriter, JsonlSink};
use kneepoint_metrics::LevelSummary;
use kneepoint_runner::{run_level_for, CancelToken, RequestSource};
use serde_json::json;

use crate::streamed::{Streamed, StreamedSink};
use crate::{Bench, Error};

/// Requests made per lock of the workload.
pub(crate) const GENERATE_BATCH: usize = 64;

/// A prepared request and its `inputs.json` entry.
pub(crate) type Prepared = (Request, Vec<u8>);

/// What the generator shares with the level: when to stop drawing, whether `inputs.json`
/// still wants entries rendered, and whether a request was a conversation's turn.
#[derive(Default)]
pub(crate) struct Flags {
    pub(crate) stop: AtomicBool,
    pub(crate) render: AtomicBool,
    pub(crate) turns: AtomicBool,
    /// Requests handed to the channel so far.
    pub(crate) made: std::sync::atomic::AtomicUsize,
    /// Why the workload failed, when it did (the generator then ends).
    pub(crate) failed: Mutex<Option<String>>,
}

/// The next prepared request, for a sender running on the async runtime. When one is ready it
/// is taken at once; when the generator has fallen behind (or another sender holds the
/// channel), the wait happens in `block_in_place` on a multi-threaded runtime, so that the
/// other streams of this worker thread move to another thread instead of stalling with it
/// (their timestamps would carry the wait). `None` once the generator has ended and the
/// channel is empty.
pub(crate) fn next_prepared(rx: &Mutex<mpsc::Receiver<Prepared>>) -> Option<Prepared> {
    if let Ok(guard) = rx.try_lock() {
        match guard.try_recv() {
            Ok(p) => return Some(p),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) => {}
        }
    }
    let wait = || rx.lock().ok()?.recv().ok();
    let threaded = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if threaded {
        tokio::task::block_in_place(wait)
    } else {
        wait()
    }
}

/// The `inputs.json` entry of `request`.
pub(crate) fn render(transport: &dyn Transport, request: &Request) -> Vec<u8> {
    render_input_entry(&InputEntry {
        session_id: request.id.to_string(),
        payloads: crate::inputs::input_payload(transport, request)
            .into_iter()
            .collect(),
    })
}

/// Starts the generator: `first`, then requests from `workload` up to `limit` in all, each
/// with its `inputs.json` entry (while `flags.render`), into a channel holding `depth` of them.
/// Once `flags.stop` is set it sends the rest of the batch in hand and ends, so that the level
/// can take back every request drawn and not sent. It also ends when the workload fails or a
/// request is a conversation's turn (`flags.turns`: a timed level cannot keep history). The
/// thread's result is how many requests it drew (`first` included).
pub(crate) fn generator(
    workload: Arc<Mutex<Box<dyn kneepoint_workload::Workload>>>,
    transport: Arc<dyn Transport>,
    (depth, first, limit): (usize, Vec<Request>, usize),
    flags: Arc<Flags>,
) -> (mpsc::Receiver<Prepared>, std::thread::JoinHandle<usize>) {
    let (tx, rx) = mpsc::sync_channel::<Prepared>(depth);
    let handle = std::thread::spawn(move || {
        let mut drawn = first.len();
        let mut batch = first;
        loop {
            for request in batch {
                if request.turn.is_some() {
                    flags.turns.store(true, Ordering::Relaxed);
                    return drawn;
                }
                let rendered = if flags.render.load(Ordering::Relaxed) {
                    render(transport.as_ref(), &request)
                } else {
                    Vec::new()
                };
                if tx.send((request, rendered)).is_err() {
                    return drawn;
                }
                flags.made.fetch_add(1, Ordering::Relaxed);
            }
            if flags.stop.load(Ordering::Relaxed) || drawn >= limit {
                return drawn;
            }
            batch = match workload.lock() {
                Ok(mut w) => match w.requests(GENERATE_BATCH.min(limit - drawn)) {
                    Ok(b) if !b.is_empty() => {
                        drawn += b.len();
                        b
                    }
                    Ok(_) => return drawn,
                    Err(e) => {
                        if let Ok(mut failed) = flags.failed.lock() {
                            *failed = Some(e.to_string());
                        }
                        return drawn;
                    }
                },
                Err(_) => return drawn,
            };
        }
    });
    (rx, handle)
}

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
        let inputs = Arc::new(Mutex::new(InputsWriter::create(
            &dir.join(folder::INPUTS),
            self.settings.inputs_limit,
        )?));
        // Warm-up requests are not listed: the flag turns on when the measured phase starts.
        let measuring = Arc::new(AtomicBool::new(time.warmup.is_zero()));
        let flags = Arc::new(Flags::default());
        flags.render.store(true, Ordering::Relaxed);
        let depth = (concurrency as usize * 2).clamp(64, 4096);
        let first: Vec<Request> = self.pending.drain(..).collect();
        let (prepared, generating) = generator(
            self.workload.clone(),
            self.transport.clone(),
            (depth, first, usize::MAX),
            flags.clone(),
        );
        let prepared = Arc::new(Mutex::new(prepared));
        let source: RequestSource = {
            let (inputs, measuring, flags) = (inputs.clone(), measuring.clone(), flags.clone());
            let (prepared, transport) = (prepared.clone(), self.transport.clone());
            Box::new(move || {
                let (request, rendered) = next_prepared(&prepared)?;
                if measuring.load(Ordering::Relaxed) {
                    if let Ok(mut w) = inputs.lock() {
                        if w.is_full() {
                            w.skip(1);
                        } else if rendered.is_empty() {
                            w.push(&render(transport.as_ref(), &request));
                        } else {
                            w.push(&rendered);
                        }
                        // Past the limit the generator stops rendering entries.
                        flags.render.store(!w.is_full(), Ordering::Relaxed);
                    }
                }
                Some(request)
            })
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
        // Every request drawn and not sent goes back to the front of the line for the next
        // level: the generator sends what it holds and ends, closing the channel.
        flags.stop.store(true, Ordering::Relaxed);
        if let Ok(rx) = prepared.lock() {
            while let Ok((request, _)) = rx.recv() {
                self.pending.push_back(request);
            }
        }
        let _ = generating.join();
        let observer = self.observer.as_ref();
        let server = self
            .server
            .end(observer, label, scrape, dir, run.as_ref().ok())
            .await;
        let run = run?;
        if flags.turns.load(Ordering::Relaxed) {
            return Err(Error::invalid(
                "multi-turn conversations run in count-bound levels: a timed level cannot keep their history",
            ));
        }
        let inputs = Arc::try_unwrap(inputs)
            .ok()
            .and_then(|m| m.into_inner().ok())
            .ok_or_else(|| Error::invalid("inputs.json is still in use"))?;
        inputs.finish(self.settings.seed)?;
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
