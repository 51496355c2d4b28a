//! One level: closed loop (a fixed number of requests in flight) or open loop (requests
//! started on an arrival schedule).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kneepoint_core::{
    ApproxTokenCounter, Phase, RecordSink, Request, RequestRecord, TokenCounter, Transport,
};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::early_stop::{EarlyStop, Precision};
use crate::ramp::RampGate;
use crate::request::{run_one, Ctx};
use crate::CancelToken;
use crate::Error;

/// Called for every finished record, off the request path (e.g. to advance a progress bar).
pub type RecordObserver = Arc<dyn Fn(&RequestRecord) + Send + Sync>;

/// Awaited between a level's warm-up and its measured phase (only when there was a warm-up),
/// before the measured clock starts: e.g. a side channel taking a reading that separates the
/// two (the server-metrics scraper). It must be bounded; its time is not measured.
pub type PhaseHook =
    Arc<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

/// How to run one level.
#[derive(Clone)]
#[non_exhaustive]
pub struct LevelConfig {
    /// Requests kept in flight.
    pub concurrency: u32,
    /// Per-request deadlines.
    pub deadlines: Deadlines,
    /// Stops the level: in-flight requests end as `cancelled`, no new one is sent.
    pub cancel: CancelToken,
    /// Counts output tokens when the server reports no usage.
    pub token_counter: Arc<dyn TokenCounter>,
    /// Capacity of the queue between the request tasks and the sinks.
    pub sink_queue: usize,
    /// A response that ends without a `finish_reason` is a failure (`incomplete`): the server
    /// cut the generation short. Off by default for transports that never report one.
    pub require_finish_reason: bool,
    /// Take the server's `completion_tokens` as given, even when implausible (by default a
    /// count that the chunks and text cannot hold is set aside for the client's count).
    pub trust_server_usage: bool,
    /// Retries of failed requests; none by default (a benchmark must see errors).
    pub retry: RetryPolicy,
    /// Open-loop load: requests start on a schedule (`concurrency` is then unused).
    pub open_loop: Option<OpenLoop>,
    /// Stop sending once the key metrics are precise enough (measured phase only).
    pub early_stop: Option<EarlyStop>,
    /// Closed loop: spread each phase's first wave over this time (slot `k` of `n` sends its
    /// first request `k/n` of the way through). Without it every slot sends at the same
    /// instant, and requests of equal length then keep starting and streaming in lock-step,
    /// so the first wave's queueing in the client and the server shows in TTFT. Requests are
    /// timed from when they are sent, so the ramp itself adds no latency.
    pub ramp_up: Option<Duration>,
    /// Awaited after the warm-up, before the measured phase starts (none by default).
    pub after_warmup: Option<PhaseHook>,
    /// Measured requests in flight now (a relaxed atomic add and subtract around each), for a
    /// live view; none by default.
    pub in_flight: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Keep each response's generated text in its record (`response_text`,
    /// `reasoning_text`), for an export of the outputs; off by default (memory).
    pub keep_outputs: bool,
    /// Keep at most this many measured records in [`LevelRun::records`]; past it records
    /// still reach every sink and the observer as they finish, but the run keeps none
    /// ([`LevelRun::records_seen`] counts them), so a level of any length holds memory flat.
    /// `None` (the default) keeps every record.
    pub keep_records: Option<usize>,
}

/// Open-loop load: each request starts at its intended time, whatever the server is doing, so a
/// slow server faces a growing queue instead of a slower client (no coordinated omission).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenLoop {
    /// Intended start of each measured request, from the measured phase's origin.
    pub offsets: Vec<Duration>,
    /// Intended starts of the warm-up requests, from the warm-up's origin.
    pub warmup_offsets: Vec<Duration>,
    /// Cap on requests in flight (`None`: unbounded). A request waiting for a slot is sent
    /// late, and its lag counts against the server.
    pub max_in_flight: Option<u32>,
}

/// Retries of requests that failed before their first token with a transient error (connect,
/// connection lost, HTTP 429/502/503/504). The record's times span every attempt, so a retried
/// request shows its full latency; `attempts` says how many were made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Extra attempts after the first (0 = no retries).
    pub max_retries: u32,
    /// Wait before the first retry; doubled for each further one.
    pub backoff: Duration,
}

impl std::fmt::Debug for LevelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelConfig")
            .field("concurrency", &self.concurrency)
            .field("deadlines", &self.deadlines)
            .field("token_counter", &self.token_counter.name())
            .finish_non_exhaustive()
    }
}

impl LevelConfig {
    /// `concurrency` in flight, no timeout, approximate token counting.
    pub fn new(concurrency: u32) -> Self {
        LevelConfig {
            concurrency,
            deadlines: Deadlines::default(),
            cancel: CancelToken::new(),
            token_counter: Arc::new(ApproxTokenCounter),
            sink_queue: 4096,
            require_finish_reason: false,
            trust_server_usage: false,
            retry: RetryPolicy::default(),
            open_loop: None,
            early_stop: None,
            ramp_up: None,
            after_warmup: None,
            in_flight: None,
            keep_outputs: false,
            keep_records: None,
        }
    }
}

/// What a level produced.
#[derive(Debug)]
pub struct LevelRun {
    /// The measured records, in completion order (exactly one per measured request), unless
    /// there were more than [`LevelConfig::keep_records`]: then none.
    pub records: Vec<RequestRecord>,
    /// Measured records that finished, whether kept in `records` or not.
    pub records_seen: usize,
    /// Warm-up records (not sent to the sinks, not in `records`).
    pub warmup_records: Vec<RequestRecord>,
    /// Wall-clock time of the measured phase's start, Unix ns.
    pub start_unix_ns: u64,
    /// Wall-clock time when the last record arrived, Unix ns.
    pub end_unix_ns: u64,
    /// Sink failures (the run goes on; records stay in `records`).
    pub sink_errors: Vec<String>,
    /// True when the level was cancelled before every request was sent and finished.
    pub cancelled: bool,
    /// Prepared requests never sent: the level was cancelled or stopped early, or (multi-turn)
    /// an earlier turn of their conversation failed.
    pub unsent: usize,
    /// Why the level stopped before its last request, when its metrics were precise enough.
    pub early_stop: Option<String>,
    /// Multi-turn: every measured turn as it was sent (its prompt carrying the conversation
    /// so far), ordered by request id; empty for single-turn requests.
    pub sent_turns: Vec<Request>,
}

/// Per-request deadlines; `None` waits forever. Each expiry ends the request as a `timeout`
/// record that keeps what had arrived.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadlines {
    /// The whole request, from send to end of stream.
    pub request: Option<Duration>,
    /// Until the response headers arrive.
    pub response: Option<Duration>,
    /// Until the first token, from the request's start.
    pub first_token: Option<Duration>,
    /// The longest gap between two events of a response (the first one counted from the
    /// response headers).
    pub idle: Option<Duration>,
}

pub(crate) fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Runs `warmup` and then `requests` with `config.concurrency` in flight. Measured records go to
/// every sink and to `observer` as they finish.
pub async fn run_level(
    transport: Arc<dyn Transport>,
    config: &LevelConfig,
    requests: Vec<Request>,
    warmup: Vec<Request>,
    sinks: Vec<Box<dyn RecordSink>>,
    observer: Option<RecordObserver>,
) -> Result<LevelRun, Error> {
    if config.concurrency == 0 && config.open_loop.is_none() {
        return Err(Error::ZeroConcurrency);
    }
    if let Some(o) = &config.open_loop {
        if o.offsets.len() < requests.len() || o.warmup_offsets.len() < warmup.len() {
            return Err(Error::InvalidArrival {
                reason: "the schedule has fewer start times than requests".into(),
            });
        }
        if o.max_in_flight == Some(0) {
            return Err(Error::ZeroConcurrency);
        }
    }
    if requests.is_empty() {
        return Err(Error::NoRequests);
    }
    let multi_turn = requests.iter().chain(&warmup).any(|r| r.turn.is_some());
    if multi_turn && config.open_loop.is_some() {
        return Err(Error::InvalidArrival {
            reason: "multi-turn conversations run in a closed loop (concurrency counts conversations); give a concurrency, not a request rate".into(),
        });
    }
    let ctx = |phase, origin, origin_unix_ns| {
        let cancel = config.cancel.clone();
        Ctx::new(
            transport.clone(),
            config,
            phase,
            (origin, origin_unix_ns),
            cancel,
        )
    };
    let warmup_records = if warmup.is_empty() {
        Vec::new()
    } else {
        let (tx, mut rx) = mpsc::channel(config.sink_queue.max(1));
        let origin = Instant::now();
        let origin_unix = unix_ns();
        let collect = tokio::spawn(async move {
            let mut v = Vec::new();
            while let Some(r) = rx.recv().await {
                v.push(r);
            }
            v
        });
        let ctx = ctx(Phase::Warmup, origin, origin_unix);
        let never = CancelToken::new();
        match &config.open_loop {
            Some(o) => {
                open_loop(ctx, &o.warmup_offsets, o.max_in_flight, warmup, tx, &never).await?
            }
            None if multi_turn => {
                let slots = (config.concurrency, config.ramp_up);
                crate::sessions::session_loop(ctx, slots, warmup, tx, &never)
                    .await?
                    .0
            }
            None => {
                let slots = (config.concurrency, config.ramp_up);
                closed_loop(ctx, slots, warmup, tx, &never).await?
            }
        };
        let records = collect.await.map_err(|e| Error::Worker {
            message: e.to_string(),
        })?;
        if let Some(hook) = &config.after_warmup {
            hook().await;
        }
        records
    };

    let total = requests.len();
    let (tx, rx) = mpsc::channel(config.sink_queue.max(1));
    let stop_sending = CancelToken::new();
    let (early, stop, keep) = (config.early_stop, stop_sending.clone(), config.keep_records);
    let sink_task =
        tokio::task::spawn_blocking(move || drain(rx, sinks, observer, (early, keep), stop));
    let origin = Instant::now();
    let start_unix_ns = unix_ns();
    let ctx = ctx(Phase::Profiling, origin, start_unix_ns);
    let mut sent_turns = Vec::new();
    let result = match &config.open_loop {
        Some(o) => {
            open_loop(
                ctx,
                &o.offsets,
                o.max_in_flight,
                requests,
                tx,
                &stop_sending,
            )
            .await
        }
        None if multi_turn => {
            let slots = (config.concurrency, config.ramp_up);
            crate::sessions::session_loop(ctx, slots, requests, tx, &stop_sending)
                .await
                .map(|(n, mut sent)| {
                    sent.sort_by_key(|r| r.id);
                    sent_turns = sent;
                    n
                })
        }
        None => {
            let slots = (config.concurrency, config.ramp_up);
            closed_loop(ctx, slots, requests, tx, &stop_sending).await
        }
    };
    let (records, records_seen, sink_errors, early_stop) =
        sink_task.await.map_err(|e| Error::Worker {
            message: e.to_string(),
        })?;
    let sent = result?;
    Ok(LevelRun {
        early_stop,
        records_seen,
        unsent: total - sent,
        cancelled: config.cancel.is_cancelled(),
        records,
        warmup_records,
        start_unix_ns,
        end_unix_ns: unix_ns(),
        sink_errors,
        sent_turns,
    })
}

/// Keeps `concurrency` workers busy until every request has a record.
async fn closed_loop(
    ctx: Ctx,
    (concurrency, ramp): (u32, Option<Duration>),
    requests: Vec<Request>,
    tx: mpsc::Sender<RequestRecord>,
    stop_sending: &CancelToken,
) -> Result<usize, Error> {
    let ctx = Arc::new(ctx);
    let requests = Arc::new(requests);
    let next = Arc::new(AtomicUsize::new(0));
    let taken = Arc::new(AtomicUsize::new(0));
    let workers = (concurrency as usize).min(requests.len());
    let gate = RampGate::start(ramp, workers as u32).map(Arc::new);
    let mut set = JoinSet::new();
    for worker in 0..workers {
        let (ctx, requests, next, tx) = (ctx.clone(), requests.clone(), next.clone(), tx.clone());
        let (taken, stop, gate) = (taken.clone(), stop_sending.clone(), gate.clone());
        set.spawn(async move {
            if !crate::ramp::admit(gate.as_deref(), &ctx.cancel, &stop).await {
                return;
            }
            loop {
                if ctx.cancel.is_cancelled() || stop.is_cancelled() {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(request) = requests.get(i) else {
                    break;
                };
                taken.fetch_add(1, Ordering::Relaxed);
                let record = run_one(&ctx, request, worker as u32).await;
                if tx.send(record).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut failure = None;
    join_workers(&mut set, &mut failure).await;
    failure.map_or(Ok(taken.load(Ordering::Relaxed)), Err)
}

/// Waits for every task of `set`, keeping the first task failure (a panic) in `failure`.
pub(crate) async fn join_workers(set: &mut JoinSet<()>, failure: &mut Option<Error>) {
    while let Some(joined) = set.join_next().await {
        if let Err(e) = joined {
            failure.get_or_insert(Error::Worker {
                message: e.to_string(),
            });
        }
    }
}

/// Sends each request at its intended time (waiting for a slot under `max_in_flight`), each in
/// its own task; records carry the intended start. Returns how many were sent.
async fn open_loop(
    ctx: Ctx,
    offsets: &[Duration],
    max_in_flight: Option<u32>,
    requests: Vec<Request>,
    tx: mpsc::Sender<RequestRecord>,
    stop_sending: &CancelToken,
) -> Result<usize, Error> {
    let ctx = Arc::new(ctx);
    let slots = max_in_flight.map(|n| Arc::new(Semaphore::new(n as usize)));
    let mut set = JoinSet::new();
    let mut failure = None;
    let mut sent = 0usize;
    for (i, (request, offset)) in requests.into_iter().zip(offsets).enumerate() {
        let due = tokio::time::Instant::from_std(ctx.origin + *offset);
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => break,
            _ = stop_sending.cancelled() => break,
            _ = tokio::time::sleep_until(due) => {}
        }
        let permit = match &slots {
            Some(s) => tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => break,
                p = s.clone().acquire_owned() => match p {
                    Ok(p) => Some(p),
                    Err(_) => break,
                },
            },
            None => None,
        };
        sent += 1;
        let (ctx, tx) = (ctx.clone(), tx.clone());
        let intended = offset.as_nanos() as u64;
        set.spawn(async move {
            let mut record = run_one(&ctx, &request, i as u32).await;
            drop(permit);
            record.intended_start_ns = Some(intended);
            let _ = tx.send(record).await;
        });
        // Reap finished tasks as we go, so a long level does not hold every handle.
        while let Some(joined) = set.try_join_next() {
            if let Err(e) = joined {
                failure.get_or_insert(Error::Worker {
                    message: e.to_string(),
                });
            }
        }
    }
    drop(tx);
    join_workers(&mut set, &mut failure).await;
    failure.map_or(Ok(sent), Err)
}

/// The sink thread: every record goes to each sink, the observer and the returned list.
/// What [`drain`] hands back: the records kept, how many were seen, sink errors, and why
/// sending stopped early.
pub(crate) type Drained = (Vec<RequestRecord>, usize, Vec<String>, Option<String>);

pub(crate) fn drain(
    mut rx: mpsc::Receiver<RequestRecord>,
    mut sinks: Vec<Box<dyn RecordSink>>,
    observer: Option<RecordObserver>,
    (early, keep): (Option<EarlyStop>, Option<usize>),
    stop: CancelToken,
) -> Drained {
    let mut precision = Precision::default();
    let mut stopped = None;
    let mut records = Vec::new();
    let (mut seen, mut keeping) = (0usize, true);
    let mut errors: Vec<String> = Vec::new();
    let mut failed = vec![false; sinks.len()];
    while let Some(record) = rx.blocking_recv() {
        for (i, sink) in sinks.iter_mut().enumerate() {
            if failed[i] {
                continue;
            }
            if let Err(e) = sink.record(&record) {
                tracing::error!("record sink failed: {e}");
                let why = format!("{e}: {}", source_text(&e));
                // A record that cannot be stored makes further requests pointless (a full
                // disk): stop sending; the requests in flight finish and stay in memory.
                if stopped.is_none() {
                    stop.cancel();
                    stopped = Some(format!(
                        "stopped sending: the record sink failed ({why}); the records in memory are kept"
                    ));
                }
                errors.push(why);
                failed[i] = true;
            }
        }
        if let Some(o) = &observer {
            o(&record);
        }
        if let (Some(rule), None) = (&early, &stopped) {
            if let Some(why) = precision.add(&record, rule) {
                stop.cancel();
                stopped = Some(why);
            }
        }
        seen += 1;
        if keeping && keep.is_some_and(|k| seen > k) {
            // Past the cap: the sinks have every record; memory keeps none.
            keeping = false;
            records = Vec::new();
        }
        if keeping {
            records.push(record);
        }
    }
    for (i, sink) in sinks.iter_mut().enumerate() {
        if !failed[i] {
            if let Err(e) = sink.flush() {
                errors.push(e.to_string());
            }
        }
    }
    (records, seen, errors, stopped)
}

fn source_text(e: &kneepoint_core::Error) -> String {
    std::error::Error::source(e)
        .map(|s| s.to_string())
        .unwrap_or_default()
}
