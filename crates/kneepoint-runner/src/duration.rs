//! Duration-bound closed-loop levels: requests are drawn from a source while the level's time
//! lasts; requests still in flight at the end get a grace period, after which they are
//! cancelled and recorded as `cancelled`. No request is dropped without a record.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kneepoint_core::{Phase, RecordSink, RequestRecord, Transport};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::config::{LevelConfig, RecordObserver};
use crate::request::{run_one, Ctx};
use crate::work::{collect_records, joined, unix_ns, LevelRun, SinkThread};
use crate::{CancelToken, Error};

pub use crate::config::RequestSource;

/// How long a level runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelDuration {
    /// Warm-up time at the level's own load, excluded from metrics.
    pub warmup: Duration,
    /// Measured time: no request starts after it.
    pub measure: Duration,
    /// After the measured time, how long requests in flight may finish before they are
    /// cancelled (and recorded as cancelled).
    pub grace: Duration,
}

/// Runs a closed-loop level for a duration: `config.concurrency` workers draw requests from
/// `source` until the warm-up and then the measured time are over. Measured records go to every
/// sink and to `observer` as they finish; a Ctrl-C (`config.cancel`) cancels at once.
pub async fn run_level_for(
    transport: Arc<dyn Transport>,
    config: &LevelConfig,
    time: LevelDuration,
    source: RequestSource,
    sinks: Vec<Box<dyn RecordSink>>,
    observer: Option<RecordObserver>,
) -> Result<LevelRun, Error> {
    if config.concurrency == 0 {
        return Err(Error::ZeroConcurrency);
    }
    if time.measure.is_zero() {
        return Err(Error::NoRequests);
    }
    let source = Arc::new(Mutex::new(source));
    let warmup_records = if time.warmup.is_zero() {
        Vec::new()
    } else {
        let (tx, collect) = collect_records(config);
        timed_loop(
            &transport,
            config,
            (Phase::Warmup, None),
            (time.warmup, time.grace),
            source.clone(),
            tx,
            &CancelToken::new(),
        )
        .await?;
        let records = joined(collect).await?;
        if let Some(hook) = &config.after_warmup {
            hook().await;
        }
        records
    };
    let (sink, tx) = SinkThread::start(config, sinks, observer);
    let stop_sending = sink.stop_sending.clone();
    let start_unix_ns = unix_ns();
    let watch = crate::health::Watch::start();
    let result = timed_loop(
        &transport,
        config,
        (Phase::Profiling, Some(watch.probe())),
        (time.measure, time.grace),
        source,
        tx,
        &stop_sending,
    )
    .await;
    let health = watch.finish().await;
    let (records, records_seen, sink_errors, early_stop) = sink.finish().await?;
    result?;
    Ok(LevelRun {
        health: Some(health),
        early_stop,
        records_seen,
        unsent: 0,
        cancelled: config.cancel.is_cancelled(),
        records,
        warmup_records,
        start_unix_ns,
        end_unix_ns: unix_ns(),
        sink_errors,
        sent_turns: Vec::new(),
        measured_starts_ns: Vec::new(),
    })
}

/// One phase: workers send while `length` lasts; in-flight requests are cancelled `grace` after
/// it (or at once on `config.cancel`).
async fn timed_loop(
    transport: &Arc<dyn Transport>,
    config: &LevelConfig,
    (phase, health): (Phase, Option<Arc<crate::health::HealthProbe>>),
    (length, grace): (Duration, Duration),
    source: Arc<Mutex<RequestSource>>,
    tx: mpsc::Sender<RequestRecord>,
    stop_sending: &CancelToken,
) -> Result<(), Error> {
    let in_flight = CancelToken::new();
    let origin = std::time::Instant::now();
    let ctx = Arc::new(
        Ctx::new(
            transport.clone(),
            config,
            phase,
            (origin, unix_ns()),
            in_flight.clone(),
        )
        .watched(health),
    );
    let stop_at = Instant::from_std(origin) + length;
    // Cancels what is in flight at the end of the grace period, or at once on Ctrl-C.
    let watcher = {
        let (user, in_flight) = (config.cancel.clone(), in_flight.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = user.cancelled() => {}
                _ = tokio::time::sleep_until(stop_at + grace) => {}
            }
            in_flight.cancel();
        })
    };
    let gate = crate::ramp::RampGate::start(config.ramp_up, config.concurrency).map(Arc::new);
    let mut set = JoinSet::new();
    for worker in 0..config.concurrency {
        let (ctx, source, tx) = (ctx.clone(), source.clone(), tx.clone());
        let (stop, gate) = (stop_sending.clone(), gate.clone());
        set.spawn(async move {
            if !crate::ramp::admit(gate.as_deref(), &ctx.cancel, &stop).await {
                return;
            }
            while Instant::now() < stop_at && !ctx.cancel.is_cancelled() && !stop.is_cancelled() {
                let next = match source.lock() {
                    Ok(mut next) => next(),
                    Err(_) => None,
                };
                let Some(request) = next else { break };
                let record = run_one(&ctx, &request, worker).await;
                if tx.send(record).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut failure = None;
    crate::work::join_workers(&mut set, &mut failure).await;
    watcher.abort();
    failure.map_or(Ok(()), Err)
}
