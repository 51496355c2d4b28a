//! The feed of a level drawn as it goes (timed levels, and counted levels too large to prepare
//! in full): a generator thread makes requests just ahead of the senders (off the timed path),
//! each with its `inputs.json` entry already rendered; the entries of the requests sent stream
//! to `inputs.json` up to the level's `inputs_limit`; what was drawn and not sent goes back to
//! the front of the line for the next level.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use kneepoint_core::{folder, Request, Transport};
use kneepoint_metrics::export::{render_input_entry, InputEntry, InputsWriter, Unlisted};
use kneepoint_runner::RequestSource;

use crate::{Bench, Error};

/// Requests made per lock of the workload.
pub(crate) const GENERATE_BATCH: usize = 64;

/// A prepared request and its `inputs.json` entry.
type Prepared = (Request, Vec<u8>);

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
fn next_prepared(rx: &Mutex<mpsc::Receiver<Prepared>>) -> Option<Prepared> {
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
fn render(transport: &dyn Transport, request: &Request) -> Vec<u8> {
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
fn generator(
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

/// A running generator, its channel and the level's `inputs.json`.
pub(crate) struct Feed {
    prepared: Arc<Mutex<mpsc::Receiver<Prepared>>>,
    generating: std::thread::JoinHandle<usize>,
    /// What the generator shares with the level.
    pub(crate) flags: Arc<Flags>,
    inputs: Arc<Mutex<InputsWriter>>,
    transport: Arc<dyn Transport>,
    /// The channel's size: requests the generator may hold ready.
    pub(crate) depth: usize,
}

impl Feed {
    /// Starts the generator for a level in `dir` of `concurrency` senders: `first`, then the
    /// workload's requests up to `limit` in all, into a channel of 2 x concurrency (64 to
    /// 4,096).
    pub(crate) fn start(
        bench: &Bench,
        dir: &Path,
        concurrency: u32,
        (first, limit): (Vec<Request>, usize),
    ) -> Result<Feed, Error> {
        let inputs = Arc::new(Mutex::new(InputsWriter::create(
            &dir.join(folder::INPUTS),
            bench.settings.inputs_limit,
        )?));
        let flags = Arc::new(Flags::default());
        flags.render.store(true, Ordering::Relaxed);
        let depth = (concurrency as usize * 2).clamp(64, 4096);
        let (rx, generating) = generator(
            bench.workload.clone(),
            bench.transport.clone(),
            (depth, first, limit),
            flags.clone(),
        );
        Ok(Feed {
            prepared: Arc::new(Mutex::new(rx)),
            generating,
            flags,
            inputs,
            transport: bench.transport.clone(),
            depth,
        })
    }

    /// Waits (without holding the runtime) until `n` requests are ready, the generator has
    /// ended, or `stop` says so.
    pub(crate) async fn filled(&self, n: usize, stop: impl Fn() -> bool) {
        while self.flags.made.load(Ordering::Relaxed) < n
            && !self.generating.is_finished()
            && !stop()
        {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// The senders' source: each request taken is listed in `inputs.json` when `listed()`
    /// says so (warm-up requests are not).
    pub(crate) fn source(
        &self,
        mut listed: impl FnMut() -> bool + Send + 'static,
    ) -> RequestSource {
        let (prepared, flags) = (self.prepared.clone(), self.flags.clone());
        let (inputs, transport) = (self.inputs.clone(), self.transport.clone());
        Box::new(move || {
            let (request, rendered) = next_prepared(&prepared)?;
            if listed() {
                if let Ok(mut w) = inputs.lock() {
                    if w.is_full() {
                        w.push_unlisted(unlisted(&request));
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
    }

    /// Stops the generator after the level: every request drawn and not sent goes to the
    /// back of `pending` (the generator sends what it holds and ends, closing the channel).
    pub(crate) fn stop(&self, pending: &mut VecDeque<Request>) {
        self.flags.stop.store(true, Ordering::Relaxed);
        if let Ok(rx) = self.prepared.lock() {
            while let Ok((request, _)) = rx.recv() {
                pending.push_back(request);
            }
        }
    }

    /// Ends the feed (after [`Feed::stop`] and once the senders' source is gone) and writes
    /// `inputs.json`.
    pub(crate) fn finish(self, seed: u64) -> Result<(), Error> {
        let _ = self.generating.join();
        drop(self.prepared);
        let inputs = Arc::try_unwrap(self.inputs)
            .ok()
            .and_then(|m| m.into_inner().ok())
            .ok_or_else(|| Error::invalid("inputs.json is still in use"))?;
        Ok(inputs.finish(seed)?)
    }
}

/// `request` as an unlisted entry of `inputs.json`: its id and lengths.
pub(crate) fn unlisted(request: &Request) -> Unlisted {
    Unlisted {
        id: request.id,
        input_tokens: request.input_tokens,
        max_output_tokens: request.max_output_tokens,
    }
}
