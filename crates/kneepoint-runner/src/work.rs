//! What a level's phases share: the requests of a phase, the record drain, and what a level
//! produced.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use kneepoint_core::{RecordSink, Request, RequestRecord};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::config::{RecordObserver, RequestSource};
use crate::early_stop::{EarlyStop, Precision};
use crate::{CancelToken, Error};

/// What a level produced.
#[derive(Debug)]
pub struct LevelRun {
    /// The measured records, in completion order (exactly one per measured request), unless
    /// there were more than [`LevelConfig::keep_records`](crate::LevelConfig::keep_records): then none.
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
    /// How the client fared during the measured phase (not yet judged against the level's
    /// latencies: [`ClientHealth::judge`](kneepoint_core::ClientHealth::judge)).
    pub health: Option<kneepoint_core::ClientHealth>,
    /// A level kept loaded ([`LevelConfig::keep_loaded`](crate::LevelConfig::keep_loaded)): each measured request's start, ns
    /// from the records' origin, in order; empty for any other level. In a saturated closed
    /// loop every start follows one completion, so these give the level's completion rate
    /// while every measured request ran (`kneepoint_metrics::loaded_duration_s`).
    pub measured_starts_ns: Vec<u64>,
}

pub(crate) fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The requests of one phase: prepared in full, or drawn from a source as the senders free up
/// (a level of millions of requests then holds only the few ahead of the senders).
pub(crate) enum Work {
    Prepared(Vec<Request>),
    Drawn(Arc<Mutex<RequestSource>>, usize),
}

impl Work {
    pub(crate) fn len(&self) -> usize {
        match self {
            Work::Prepared(v) => v.len(),
            Work::Drawn(_, n) => *n,
        }
    }
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

/// Joins one of a level's own tasks; a panic in it becomes [`Error::Worker`].
pub(crate) async fn joined<T>(task: tokio::task::JoinHandle<T>) -> Result<T, Error> {
    task.await.map_err(|e| Error::Worker {
        message: e.to_string(),
    })
}

/// Gathers a warm-up's (or a lead-in's) records in memory: the sender for the request tasks
/// and the task that holds them until every sender is gone.
pub(crate) fn collect_records(
    config: &crate::LevelConfig,
) -> (
    mpsc::Sender<RequestRecord>,
    tokio::task::JoinHandle<Vec<RequestRecord>>,
) {
    let (tx, mut rx) = mpsc::channel(config.sink_queue.max(1));
    let task = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some(r) = rx.recv().await {
            v.push(r);
        }
        v
    });
    (tx, task)
}

/// A measured phase's sink thread ([`drain`]) and the token that stops the sending (cancelled
/// by an early stop or a failing sink).
pub(crate) struct SinkThread {
    pub stop_sending: CancelToken,
    task: tokio::task::JoinHandle<Drained>,
}

impl SinkThread {
    /// Starts the thread that hands each measured record of a level run with `config` to
    /// `sinks` and `observer`, and returns it with the sender for the request tasks (the
    /// thread ends when every sender is gone).
    pub(crate) fn start(
        config: &crate::LevelConfig,
        sinks: Vec<Box<dyn RecordSink>>,
        observer: Option<RecordObserver>,
    ) -> (SinkThread, mpsc::Sender<RequestRecord>) {
        let (tx, rx) = mpsc::channel(config.sink_queue.max(1));
        let stop_sending = CancelToken::new();
        let (early, stop, keep) = (config.early_stop, stop_sending.clone(), config.keep_records);
        let task =
            tokio::task::spawn_blocking(move || drain(rx, sinks, observer, (early, keep), stop));
        (SinkThread { stop_sending, task }, tx)
    }

    /// Waits until every sender is gone and the sinks are flushed.
    pub(crate) async fn finish(self) -> Result<Drained, Error> {
        joined(self.task).await
    }
}

/// The sink thread: every record goes to each sink, the observer and the returned list.
/// What [`drain`] hands back: the records kept, how many were seen, sink errors, and why
/// sending stopped early.
pub(crate) type Drained = (Vec<RequestRecord>, usize, Vec<String>, Option<String>);

/// How long the sink thread naps after emptying its queue before it looks again (see
/// [`drain`]).
const SINK_NAP: std::time::Duration = std::time::Duration::from_millis(1);

fn drain(
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
    // Records taken since the thread last woke from a blocking receive.
    let mut batch = 0usize;
    loop {
        // Under load the thread takes what has queued up, naps, and takes the next batch: a
        // blocked receive would be woken once per record, a context switch each (on two cores
        // that cost more than the record). When a wake-up finds a single record (a slow
        // level), it blocks again at once. Senders do not wait on the nap: the queue holds
        // `sink_queue` records (4,096 by default, a quarter of a second at the fastest rate
        // seen).
        let record = match rx.try_recv() {
            Ok(r) => r,
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) if batch > 1 => {
                batch = 1;
                std::thread::sleep(SINK_NAP);
                continue;
            }
            Err(mpsc::error::TryRecvError::Empty) => match rx.blocking_recv() {
                Some(r) => {
                    batch = 0;
                    r
                }
                None => break,
            },
        };
        batch += 1;
        for (i, sink) in sinks.iter_mut().enumerate() {
            if failed[i] {
                continue;
            }
            if let Err(e) = sink.record(&record) {
                let why = format!("{e}: {}", source_text(&e));
                tracing::error!("{why}");
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
