//! A closed loop kept loaded from its first measured request to its last: a lead-in, the
//! measured requests and fillers, sent by the same slots with no pause between them.
//!
//! A warm-up that ends with a barrier starts the measured phase with every slot sending at
//! once, and the measured phase ends with its last wave draining: the first measured wave is a
//! burst of prefills that dominates the TTFT tail of a short level, and the last measured
//! requests see a lighter load than the rest. Here each slot goes straight from the lead-in
//! to measured requests as its previous request ends; once every measured request has been
//! taken, slots that come free send fillers until the last measured request ends, and fillers
//! still running then are abandoned. Every measured request thus runs under the level's full
//! load. The lead-in's and the fillers' records are not measured (the lead-in's are kept as
//! warm-up records, the fillers' are dropped).
//!
//! The measured records' span is longer than the time their load took (the lead-in and the
//! fillers overlap it), so a level's rates are counted from its measured starts instead: in a
//! saturated closed loop each start follows one completion
//! ([`LevelRun::measured_starts_ns`](crate::LevelRun::measured_starts_ns)).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use kneepoint_core::{Request, RequestRecord};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::config::PhaseHook;
use crate::request::{run_one, Ctx};
use crate::work::{collect_records, join_workers, joined, unix_ns, SinkThread, Work};
use crate::{CancelToken, Error};

/// What the loaded loop hands back.
pub(crate) struct Loaded {
    /// Measured requests sent.
    pub sent: usize,
    /// Each measured request's start, ns from the loop's origin, in the order they started.
    pub starts_ns: Vec<u64>,
    /// When the first measured request was sent, Unix ns (`None`: none was).
    pub first_measured_unix_ns: Option<u64>,
}

/// Counts the measured requests in flight and says when the last one has ended (after every
/// one was taken): the fillers then stop.
struct Measured {
    open: AtomicUsize,
    taken_all: AtomicBool,
    ended: CancelToken,
}

impl Measured {
    /// Called before a slot looks for a measured request, so the count never reads 0 while
    /// one is being taken.
    fn open(&self) {
        self.open.fetch_add(1, Ordering::SeqCst);
    }

    fn close(&self) {
        if self.open.fetch_sub(1, Ordering::SeqCst) == 1 && self.taken_all.load(Ordering::SeqCst) {
            self.ended.cancel();
        }
    }

    /// No measured request is left to take (or sending stopped).
    fn all_taken(&self) {
        self.taken_all.store(true, Ordering::SeqCst);
        if self.open.load(Ordering::SeqCst) == 0 {
            self.ended.cancel();
        }
    }
}

/// Closes one [`Measured::open`] when dropped: a request task that panics still lets the
/// fillers stop.
struct Opened<'a>(&'a Measured);

impl Drop for Opened<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The request at `i` of `work`, drawn from its source when it is drawn as it goes.
fn take(work: &Work, i: usize) -> Option<std::borrow::Cow<'_, Request>> {
    match work {
        Work::Prepared(v) => v.get(i).map(std::borrow::Cow::Borrowed),
        Work::Drawn(source, count) => (i < *count)
            .then(|| source.lock().ok().and_then(|mut next| next()))
            .flatten()
            .map(std::borrow::Cow::Owned),
    }
}

/// Filler `k`: prepared fillers are reused round-robin when there are fewer than needed.
fn filler(work: &Work, k: usize) -> Option<std::borrow::Cow<'_, Request>> {
    match work {
        Work::Prepared(v) if v.is_empty() => None,
        Work::Prepared(v) => Some(std::borrow::Cow::Borrowed(&v[k % v.len()])),
        drawn => take(drawn, k),
    }
}

/// The shared state of the slots.
struct Slots {
    lead_in: Work,
    measured: Work,
    fillers: Work,
    next: [AtomicUsize; 3],
    state: Measured,
    starts: Mutex<Vec<u64>>,
    first: OnceLock<u64>,
    hook: Option<PhaseHook>,
}

impl Slots {
    /// The three queues, none taken yet.
    fn new((lead_in, measured, fillers): (Work, Work, Work), hook: Option<PhaseHook>) -> Self {
        Slots {
            lead_in,
            measured,
            fillers,
            next: Default::default(),
            state: Measured {
                open: AtomicUsize::new(0),
                taken_all: AtomicBool::new(false),
                ended: CancelToken::new(),
            },
            starts: Mutex::new(Vec::new()),
            first: OnceLock::new(),
            hook,
        }
    }
}

/// Runs the lead-in (under `lead_ctx`), the measured requests (under `ctx`) and the fillers
/// with `concurrency` slots. Lead-in records go to `lead_tx`, measured ones to `tx`.
pub(crate) async fn loaded_loop(
    (lead_ctx, ctx): (Ctx, Ctx),
    (concurrency, ramp): (u32, Option<std::time::Duration>),
    (lead_in, measured, fillers): (Work, Work, Work),
    (lead_tx, tx): (mpsc::Sender<RequestRecord>, mpsc::Sender<RequestRecord>),
    stop_sending: &CancelToken,
    hook: Option<PhaseHook>,
) -> Result<Loaded, Error> {
    let (lead_ctx, ctx) = (Arc::new(lead_ctx), Arc::new(ctx));
    let workers = (concurrency as usize).min(lead_in.len() + measured.len());
    let slots = Arc::new(Slots::new((lead_in, measured, fillers), hook));
    let taken = Arc::new(AtomicUsize::new(0));
    // The ramp spreads the first wave: the lead-in's.
    let gate = crate::ramp::RampGate::start(ramp, workers as u32).map(Arc::new);
    let mut set = JoinSet::new();
    for worker in 0..workers {
        let (lead_ctx, ctx, slots) = (lead_ctx.clone(), ctx.clone(), slots.clone());
        let gate = gate.clone();
        let (lead_tx, tx, taken, stop) = (
            lead_tx.clone(),
            tx.clone(),
            taken.clone(),
            stop_sending.clone(),
        );
        set.spawn(async move {
            let w = worker as u32;
            if !crate::ramp::admit(gate.as_deref(), &ctx.cancel, &CancelToken::new()).await {
                return;
            }
            // The lead-in.
            while !ctx.cancel.is_cancelled() {
                let i = slots.next[0].fetch_add(1, Ordering::Relaxed);
                let Some(request) = take(&slots.lead_in, i) else {
                    break;
                };
                let record = run_one(&lead_ctx, &request, w).await;
                let _ = lead_tx.send(record).await;
            }
            drop(lead_tx);
            // The measured requests.
            loop {
                // Opened before the checks, so that no slot can see every measured request
                // taken and end the fillers while this one is about to take another.
                slots.state.open();
                let opened = Opened(&slots.state);
                if ctx.cancel.is_cancelled() || stop.is_cancelled() {
                    break;
                }
                let i = slots.next[1].fetch_add(1, Ordering::SeqCst);
                let Some(request) = take(&slots.measured, i) else {
                    slots.state.all_taken();
                    break;
                };
                // The clock is read once, not before every measured send.
                if slots.first.get().is_none() && slots.first.set(unix_ns()).is_ok() {
                    if let Some(hook) = &slots.hook {
                        tokio::spawn(hook());
                    }
                }
                taken.fetch_add(1, Ordering::Relaxed);
                let record = run_one(&ctx, &request, w).await;
                if let Ok(mut starts) = slots.starts.lock() {
                    starts.push(record.start_ns);
                }
                let gone = tx.send(record).await.is_err();
                drop(opened);
                if gone {
                    break;
                }
            }
            drop(tx);
            slots.state.all_taken();
            // Fillers, until the last measured request ends.
            let ended = slots.state.ended.clone();
            while !ctx.cancel.is_cancelled() && !ended.is_cancelled() {
                // A transport that answers without ever waiting (an in-process model, a
                // cache) would otherwise keep this loop on its thread forever, and the last
                // measured requests, whose end stops it, would never run again.
                tokio::task::yield_now().await;
                let k = slots.next[2].fetch_add(1, Ordering::Relaxed);
                let Some(request) = filler(&slots.fillers, k) else {
                    break;
                };
                tokio::select! {
                    biased;
                    _ = ended.cancelled() => break,
                    _ = run_one(&lead_ctx, &request, w) => {}
                }
            }
        });
    }
    drop((lead_tx, tx));
    let mut failure = None;
    join_workers(&mut set, &mut failure).await;
    if let Some(e) = failure {
        return Err(e);
    }
    let mut starts_ns = slots
        .starts
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default();
    starts_ns.sort_unstable();
    Ok(Loaded {
        sent: taken.load(Ordering::Relaxed),
        starts_ns,
        first_measured_unix_ns: slots.first.get().copied(),
    })
}

/// A level kept loaded: [`loaded_loop`] with the sinks, the warm-up collector and the client's
/// health watch around it.
pub(crate) async fn run(
    config: &crate::LevelConfig,
    (lead_in, measured, fillers): (Work, Work, Work),
    sinks: Vec<Box<dyn kneepoint_core::RecordSink>>,
    observer: Option<crate::RecordObserver>,
    ctx: &impl Fn(kneepoint_core::Phase, std::time::Instant, u64) -> Ctx,
) -> Result<crate::LevelRun, Error> {
    use kneepoint_core::Phase;
    let total = measured.len();
    let (lead_tx, collect) = collect_records(config);
    let (sink, tx) = SinkThread::start(config, sinks, observer);
    let stop_sending = sink.stop_sending.clone();
    // One origin for the lead-in, the measured requests and the fillers: they share the loop.
    let origin = std::time::Instant::now();
    let origin_unix_ns = unix_ns();
    let watch = crate::health::Watch::start();
    let measured_ctx = ctx(Phase::Profiling, origin, origin_unix_ns).watched(Some(watch.probe()));
    let result = loaded_loop(
        (ctx(Phase::Warmup, origin, origin_unix_ns), measured_ctx),
        (config.concurrency, config.ramp_up),
        (lead_in, measured, fillers),
        (lead_tx, tx),
        &stop_sending,
        config.after_warmup.clone(),
    )
    .await;
    let health = watch.finish().await;
    let (records, records_seen, sink_errors, early_stop) = sink.finish().await?;
    let warmup_records = joined(collect).await?;
    let loaded = result?;
    Ok(crate::LevelRun {
        health: Some(health),
        early_stop,
        records_seen,
        unsent: total - loaded.sent,
        cancelled: config.cancel.is_cancelled(),
        records,
        warmup_records,
        start_unix_ns: loaded.first_measured_unix_ns.unwrap_or(origin_unix_ns),
        end_unix_ns: unix_ns(),
        sink_errors,
        sent_turns: Vec::new(),
        measured_starts_ns: loaded.starts_ns,
    })
}
