//! One level: closed loop (a fixed number of requests in flight) or open loop (requests
//! started on an arrival schedule).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kneepoint_core::{Phase, RecordSink, Request, RequestRecord, Transport};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::config::{LevelConfig, RecordObserver, RequestSource};
use crate::ramp::RampGate;
use crate::request::{run_one, Ctx};
use crate::work::{collect_records, join_workers, joined, unix_ns, LevelRun, SinkThread, Work};
use crate::{CancelToken, Error};

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
    // Fillers: the first wave's requests again (one per slot covers the tail).
    let fillers = config.keep_loaded.then(|| {
        let wave = requests.iter().take(config.concurrency as usize);
        Work::Prepared(wave.cloned().collect())
    });
    let (requests, warmup) = (Work::Prepared(requests), Work::Prepared(warmup));
    run_work(
        transport,
        config,
        (requests, warmup, fillers),
        sinks,
        observer,
    )
    .await
}

/// A closed-loop level kept loaded from its first measured request to its last (as
/// [`LevelConfig::keep_loaded`], which this sets): `lead_in` first, then `measured`, then
/// `fillers` (reused round-robin if more are needed) until the last measured request ends.
/// Fresh fillers keep a server's prefix cache from seeing them as repeats of measured prompts.
pub async fn run_level_loaded(
    transport: Arc<dyn Transport>,
    config: &LevelConfig,
    (lead_in, measured, fillers): (Vec<Request>, Vec<Request>, Vec<Request>),
    sinks: Vec<Box<dyn RecordSink>>,
    observer: Option<RecordObserver>,
) -> Result<LevelRun, Error> {
    let mut config = config.clone();
    config.keep_loaded = true;
    let work = (
        Work::Prepared(measured),
        Work::Prepared(lead_in),
        Some(Work::Prepared(fillers)),
    );
    run_work(transport, &config, work, sinks, observer).await
}

/// A closed-loop level whose requests are drawn from `source` as the senders free up: the
/// first `warmup` requests drawn warm the server up, the next `count` are measured. Nothing
/// is prepared ahead beyond what `source` holds, so memory does not grow with the count. A
/// source that runs dry ends the level early: the requests not drawn count as unsent.
pub async fn run_level_drawn(
    transport: Arc<dyn Transport>,
    config: &LevelConfig,
    source: RequestSource,
    (warmup, count): (usize, usize),
    sinks: Vec<Box<dyn RecordSink>>,
    observer: Option<RecordObserver>,
) -> Result<LevelRun, Error> {
    if config.open_loop.is_some() {
        return Err(Error::InvalidArrival {
            reason: "requests drawn as the level goes run in a closed loop".into(),
        });
    }
    let source = Arc::new(Mutex::new(source));
    let work = (
        Work::Drawn(source.clone(), count),
        Work::Drawn(source.clone(), warmup),
        config.keep_loaded.then(|| Work::Drawn(source, usize::MAX)),
    );
    run_work(transport, config, work, sinks, observer).await
}

async fn run_work(
    transport: Arc<dyn Transport>,
    config: &LevelConfig,
    (requests, warmup, fillers): (Work, Work, Option<Work>),
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
    if requests.len() == 0 {
        return Err(Error::NoRequests);
    }
    let multi_turn = is_multi_turn(&requests, &warmup);
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
    let fillers = match fillers {
        Some(f) if config.open_loop.is_none() && !multi_turn => f,
        _ => return run_phases(config, (requests, warmup), sinks, observer, &ctx).await,
    };
    crate::loaded::run(config, (warmup, requests, fillers), sinks, observer, &ctx).await
}

/// A level whose warm-up, if any, ends before its measured phase starts.
async fn run_phases(
    config: &LevelConfig,
    (requests, warmup): (Work, Work),
    sinks: Vec<Box<dyn RecordSink>>,
    observer: Option<RecordObserver>,
    ctx: &impl Fn(Phase, Instant, u64) -> Ctx,
) -> Result<LevelRun, Error> {
    let multi_turn = is_multi_turn(&requests, &warmup);
    let warmup_records = if warmup.len() == 0 {
        Vec::new()
    } else {
        let (tx, collect) = collect_records(config);
        let origin = Instant::now();
        let origin_unix = unix_ns();
        let ctx = ctx(Phase::Warmup, origin, origin_unix);
        let never = CancelToken::new();
        let slots = (config.concurrency, config.ramp_up);
        match (&config.open_loop, warmup) {
            (Some(o), Work::Prepared(warmup)) => {
                open_loop(ctx, &o.warmup_offsets, o.max_in_flight, warmup, tx, &never).await?
            }
            (None, Work::Prepared(warmup)) if multi_turn => {
                crate::sessions::session_loop(ctx, slots, warmup, tx, &never)
                    .await?
                    .0
            }
            (_, warmup) => closed_loop(ctx, slots, warmup, tx, &never).await?,
        };
        let records = joined(collect).await?;
        if let Some(hook) = &config.after_warmup {
            hook().await;
        }
        records
    };

    let total = requests.len();
    let (sink, tx) = SinkThread::start(config, sinks, observer);
    let stop_sending = sink.stop_sending.clone();
    let origin = Instant::now();
    let start_unix_ns = unix_ns();
    let watch = crate::health::Watch::start();
    let ctx = ctx(Phase::Profiling, origin, start_unix_ns).watched(Some(watch.probe()));
    let mut sent_turns = Vec::new();
    let slots = (config.concurrency, config.ramp_up);
    let result = match (&config.open_loop, requests) {
        (Some(o), Work::Prepared(requests)) => {
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
        (None, Work::Prepared(requests)) if multi_turn => {
            crate::sessions::session_loop(ctx, slots, requests, tx, &stop_sending)
                .await
                .map(|(n, mut sent)| {
                    sent.sort_by_key(|r| r.id);
                    sent_turns = sent;
                    n
                })
        }
        (_, requests) => closed_loop(ctx, slots, requests, tx, &stop_sending).await,
    };
    let health = watch.finish().await;
    let (records, records_seen, sink_errors, early_stop) = sink.finish().await?;
    let sent = result?;
    Ok(LevelRun {
        health: Some(health),
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
        measured_starts_ns: Vec::new(),
    })
}

fn is_multi_turn(requests: &Work, warmup: &Work) -> bool {
    let turns = |w: &Work| match w {
        Work::Prepared(v) => v.iter().any(|r| r.turn.is_some()),
        Work::Drawn(..) => false,
    };
    turns(requests) || turns(warmup)
}

/// Keeps `concurrency` workers busy until every request has a record.
async fn closed_loop(
    ctx: Ctx,
    (concurrency, ramp): (u32, Option<Duration>),
    requests: Work,
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
                let drawn;
                let request = match requests.as_ref() {
                    Work::Prepared(v) => v.get(i),
                    Work::Drawn(source, count) => {
                        drawn = (i < *count)
                            .then(|| source.lock().ok().and_then(|mut next| next()))
                            .flatten();
                        drawn.as_ref()
                    }
                };
                let Some(request) = request else {
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
