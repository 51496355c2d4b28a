//! The closed-loop runner against in-process fake transports with known behaviour.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream;
use kneepoint_core::{
    async_trait, Chunk, Error, ErrorKind, EventStream, Phase, RecordSink, Request, RequestRecord,
    ResponseEvent, TokenSource, Transport, Usage,
};
use kneepoint_runner::{run_level, LevelConfig};

/// Streams `tokens` chunks `gap` apart after `ttft`, counting requests in flight.
struct Paced {
    ttft: Duration,
    gap: Duration,
    tokens: u32,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
    fail_every: Option<u64>,
}

impl Paced {
    fn new(ttft_ms: u64, gap_ms: u64, tokens: u32) -> Self {
        Paced {
            ttft: Duration::from_millis(ttft_ms),
            gap: Duration::from_millis(gap_ms),
            tokens,
            in_flight: Arc::default(),
            max_in_flight: Arc::default(),
            fail_every: None,
        }
    }
}

struct InFlight(Arc<AtomicUsize>);
impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl Transport for Paced {
    async fn send(&self, request: &Request) -> Result<EventStream, Error> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let guard = InFlight(self.in_flight.clone());
        if self
            .fail_every
            .is_some_and(|n| request.id.is_multiple_of(n))
        {
            drop(guard);
            return Err(Error::status_code(503, "busy"));
        }
        let (ttft, gap, n) = (self.ttft, self.gap, self.tokens);
        let s = stream::unfold((0u32, guard), move |(i, guard)| async move {
            if i > n {
                return None;
            }
            if i == n {
                let ev = Ok(ResponseEvent::Usage(Usage::new(Some(3), Some(n))));
                return Some((ev, (i + 1, guard)));
            }
            tokio::time::sleep(if i == 0 { ttft } else { gap }).await;
            Some((
                Ok(ResponseEvent::Chunk(Chunk::content(" tok"))),
                (i + 1, guard),
            ))
        });
        Ok(Box::pin(s))
    }
}

mod support;
use support::{one_request, requests};

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<RequestRecord>>>);
impl RecordSink for Shared {
    fn record(&mut self, r: &RequestRecord) -> Result<(), Error> {
        self.0.lock().unwrap().push(r.clone());
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keeps_exactly_n_in_flight_and_records_every_request() {
    let t = Paced::new(5, 2, 4);
    let max = t.max_in_flight.clone();
    let sink = Shared::default();
    let seen = Arc::new(AtomicUsize::new(0));
    let observer = {
        let seen = seen.clone();
        Arc::new(move |_: &RequestRecord| {
            seen.fetch_add(1, Ordering::SeqCst);
        })
    };
    let run = run_level(
        Arc::new(t),
        &LevelConfig::new(8),
        requests(100),
        requests(4),
        vec![Box::new(sink.clone())],
        Some(observer),
    )
    .await
    .unwrap();
    assert_eq!(max.load(Ordering::SeqCst), 8);
    assert_eq!(run.records.len(), 100);
    assert_eq!(run.warmup_records.len(), 4);
    assert!(run.warmup_records.iter().all(|r| r.phase == Phase::Warmup));
    assert_eq!(sink.0.lock().unwrap().len(), 100);
    assert_eq!(seen.load(Ordering::SeqCst), 100);
    let mut ids: Vec<u64> = run.records.iter().map(|r| r.request_id).collect();
    ids.sort();
    assert_eq!(ids, (0..100).collect::<Vec<_>>());
    for r in &run.records {
        assert!(r.is_ok());
        assert_eq!(r.chunk_ns.len(), 4);
        assert_eq!(r.output_tokens, Some(4));
        assert_eq!(r.output_tokens_source, Some(TokenSource::Usage));
        assert_eq!(r.client_output_tokens, Some(4));
        assert_eq!(r.server_input_tokens, Some(3));
        let ttft = (r.chunk_ns[0] - r.start_ns) as f64 / 1e6;
        assert!(ttft >= 5.0, "ttft {ttft}");
        assert!(r.chunk_ns.windows(2).all(|w| w[1] >= w[0] + 2_000_000));
    }
}

#[tokio::test]
async fn concurrency_above_request_count_sends_each_once() {
    let t = Paced::new(1, 1, 2);
    let max = t.max_in_flight.clone();
    let run = run_level(
        Arc::new(t),
        &LevelConfig::new(64),
        requests(10),
        vec![],
        vec![],
        None,
    )
    .await
    .unwrap();
    assert_eq!(run.records.len(), 10);
    assert_eq!(max.load(Ordering::SeqCst), 10);
}

#[tokio::test]
async fn failures_are_classified_and_counted() {
    let mut t = Paced::new(1, 1, 2);
    t.fail_every = Some(3);
    let run = run_level(
        Arc::new(t),
        &LevelConfig::new(4),
        requests(30),
        vec![],
        vec![],
        None,
    )
    .await
    .unwrap();
    let failed: Vec<_> = run.records.iter().filter(|r| !r.is_ok()).collect();
    assert_eq!(run.records.len(), 30);
    assert_eq!(failed.len(), 10);
    for f in failed {
        let e = f.error.as_ref().unwrap();
        assert_eq!(e.kind, ErrorKind::HttpStatus);
        assert_eq!(e.code, Some(503));
        assert_eq!(f.request_id % 3, 0);
    }
}

#[tokio::test]
async fn timeout_keeps_the_chunks_that_arrived() {
    let t = Paced::new(5, 50, 10);
    let mut cfg = LevelConfig::new(2);
    cfg.deadlines.request = Some(Duration::from_millis(80));
    let run = run_level(Arc::new(t), &cfg, requests(2), vec![], vec![], None)
        .await
        .unwrap();
    for r in &run.records {
        let e = r.error.as_ref().unwrap();
        assert_eq!(e.kind, ErrorKind::Timeout);
        assert!(
            !r.chunk_ns.is_empty() && r.chunk_ns.len() < 10,
            "{}",
            r.chunk_ns.len()
        );
        assert!(r.end_ns - r.start_ns >= 80_000_000);
    }
}

struct Empty;
#[async_trait]
impl Transport for Empty {
    async fn send(&self, _: &Request) -> Result<EventStream, Error> {
        Ok(Box::pin(stream::iter(vec![Ok(ResponseEvent::Finish {
            reason: Some("stop".into()),
        })])))
    }
}

#[tokio::test]
async fn a_response_without_tokens_is_a_failure() {
    let run = one_request(Empty).await;
    assert_eq!(
        run.records[0].error.as_ref().unwrap().kind,
        ErrorKind::MalformedResponse
    );
}

struct FailingSink;
impl RecordSink for FailingSink {
    fn record(&mut self, _: &RequestRecord) -> Result<(), Error> {
        Err(Error::Sink {
            sink: "disk".into(),
            source: "full".into(),
        })
    }
}

/// Issue 20, item 10: when the disk filled, the level kept sending all its requests after the
/// sink failed. Now it stops sending; every request sent has its record in memory.
#[tokio::test]
async fn a_failing_sink_stops_the_level_and_loses_no_records() {
    let run = run_level(
        Arc::new(Paced::new(1, 1, 2)),
        &LevelConfig::new(2),
        requests(200),
        vec![],
        vec![Box::new(FailingSink)],
        None,
    )
    .await
    .unwrap();
    assert_eq!(run.sink_errors.len(), 1);
    assert!(run
        .early_stop
        .as_deref()
        .unwrap_or("")
        .contains("record sink failed"));
    // The first record fails the sink; the two slots' requests in flight (and at most a
    // queue's worth already handed over) finish; nothing near the 200 is sent.
    assert!(run.records.len() < 50, "{} records", run.records.len());
    assert_eq!(run.records.len() + run.unsent, 200);
}

#[tokio::test]
async fn invalid_levels_are_errors() {
    let t: Arc<dyn Transport> = Arc::new(Empty);
    assert!(run_level(
        t.clone(),
        &LevelConfig::new(0),
        requests(1),
        vec![],
        vec![],
        None
    )
    .await
    .is_err());
    assert!(
        run_level(t, &LevelConfig::new(1), vec![], vec![], vec![], None)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn first_token_and_idle_deadlines() {
    // 10 s to the first token: a 30 ms first-token deadline fails it, keeping no chunk (the
    // token is far enough out that no timer slack lets it win the race)
    let mut cfg = LevelConfig::new(1);
    cfg.deadlines.first_token = Some(Duration::from_millis(30));
    let run = run_level(
        Arc::new(Paced::new(10_000, 1, 3)),
        &cfg,
        requests(1),
        vec![],
        vec![],
        None,
    )
    .await
    .unwrap();
    let r = &run.records[0];
    assert!(r.chunk_ns.is_empty());
    assert!(r.error.as_ref().unwrap().message.contains("first_token"));
    // 10 s gaps after the first token: a 20 ms idle deadline fails after one chunk
    let mut cfg = LevelConfig::new(1);
    cfg.deadlines.idle = Some(Duration::from_millis(20));
    cfg.deadlines.first_token = Some(Duration::from_millis(5_000));
    let run = run_level(
        Arc::new(Paced::new(5, 10_000, 3)),
        &cfg,
        requests(1),
        vec![],
        vec![],
        None,
    )
    .await
    .unwrap();
    let r = &run.records[0];
    assert_eq!(r.chunk_ns.len(), 1);
    assert_eq!(r.error.as_ref().unwrap().kind, ErrorKind::Timeout);
    assert!(r.error.as_ref().unwrap().message.contains("idle"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_level_records_every_sent_request() {
    let cfg = LevelConfig::new(4);
    let cancel = cfg.cancel.clone();
    let t = Paced::new(5, 10, 20); // ~200 ms per request
    let handle = tokio::spawn(async move {
        run_level(Arc::new(t), &cfg, requests(100), vec![], vec![], None).await
    });
    tokio::time::sleep(Duration::from_millis(450)).await;
    cancel.cancel();
    let run = handle.await.unwrap().unwrap();
    assert!(run.cancelled);
    let sent = 100 - run.unsent;
    assert_eq!(
        run.records.len(),
        sent,
        "every sent request has exactly one record"
    );
    assert!((8..=16).contains(&sent), "{sent}");
    let cancelled = run
        .records
        .iter()
        .filter(|r| {
            r.error
                .as_ref()
                .is_some_and(|e| e.kind == ErrorKind::Cancelled)
        })
        .count();
    assert_eq!(cancelled, 4, "the four in flight");
    assert!(run.records.iter().filter(|r| r.is_ok()).count() >= 4);
}

/// A ramp spreads each slot's first request over the ramp; latency is timed from the send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ramp_spreads_the_first_wave() {
    let mut cfg = LevelConfig::new(4);
    cfg.ramp_up = Some(Duration::from_millis(2_000));
    let run = run_level(
        // Each request outlasts the ramp, so every slot sends exactly one.
        Arc::new(Paced::new(5, 600, 5)),
        &cfg,
        requests(4),
        vec![],
        vec![],
        None,
    )
    .await
    .unwrap();
    let mut by_worker: Vec<(u32, f64, f64)> = run
        .records
        .iter()
        .map(|r| {
            let ms = |ns: u64| ns as f64 / 1e6;
            (r.worker, ms(r.start_ns), ms(r.chunk_ns[0] - r.start_ns))
        })
        .collect();
    by_worker.sort_by(|a, b| a.1.total_cmp(&b.1));
    for (k, (_, start, ttft)) in by_worker.iter().enumerate() {
        let due = 500.0 * k as f64;
        assert!(
            *start >= due && *start < due + 250.0,
            "slot {k} at {start} ms"
        );
        assert!(*ttft < 250.0, "ttft {ttft} ms counts the ramp");
    }
}

#[tokio::test]
async fn the_after_warmup_hook_runs_once_between_the_phases() {
    // The hook records the unix time it ran; every warm-up record ends before it and every
    // measured one starts after it, and the measured clock starts after it returns.
    let at = Arc::new(Mutex::new(Vec::new()));
    let mut config = LevelConfig::new(4);
    let hook_at = at.clone();
    config.after_warmup = Some(Arc::new(move || {
        let hook_at = hook_at.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            hook_at.lock().unwrap().push(now);
        })
    }));
    let run = run_level(
        Arc::new(Paced::new(2, 1, 3)),
        &config,
        requests(8),
        requests(4),
        vec![],
        None,
    )
    .await
    .unwrap();
    let at = at.lock().unwrap().clone();
    assert_eq!(at.len(), 1);
    assert!(run.start_unix_ns >= at[0]);
    for r in &run.warmup_records {
        assert!(r.origin_unix_ns + r.end_ns <= at[0]);
    }
    // Without a warm-up there is no boundary, and the hook is not called.
    let again = Arc::new(AtomicUsize::new(0));
    let counter = again.clone();
    config.after_warmup = Some(Arc::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {})
    }));
    run_level(
        Arc::new(Paced::new(2, 1, 3)),
        &config,
        requests(8),
        vec![],
        vec![],
        None,
    )
    .await
    .unwrap();
    assert_eq!(again.load(Ordering::SeqCst), 0);
}

/// Reads the in-flight gauge as each request is sent (the request itself already counted).
struct Gauged {
    inner: Paced,
    gauge: Arc<std::sync::atomic::AtomicU64>,
    seen: Mutex<Vec<(u64, u64)>>,
}

#[async_trait]
impl Transport for Gauged {
    async fn send(&self, request: &Request) -> Result<EventStream, Error> {
        let now = self.gauge.load(Ordering::Relaxed);
        self.seen.lock().unwrap().push((request.id, now));
        self.inner.send(request).await
    }
}

#[tokio::test]
async fn the_in_flight_gauge_counts_measured_requests_only_and_ends_at_zero() {
    let in_flight = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut config = LevelConfig::new(4);
    config.in_flight = Some(in_flight.clone());
    let transport = Arc::new(Gauged {
        inner: Paced::new(2, 1, 3),
        gauge: in_flight.clone(),
        seen: Mutex::default(),
    });
    // Warm-up requests get ids from 1000, measured ones 0..40.
    let warmup: Vec<Request> = requests(4)
        .into_iter()
        .map(|mut r| {
            r.id += 1000;
            r
        })
        .collect();
    run_level(
        transport.clone(),
        &config,
        requests(40),
        warmup,
        vec![],
        None,
    )
    .await
    .unwrap();
    let seen = transport.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 44);
    for (id, n) in seen {
        if id >= 1000 {
            assert_eq!(n, 0, "warm-up request {id} was counted");
        } else {
            assert!(
                (1..=4).contains(&n),
                "measured request {id} saw {n} in flight"
            );
        }
    }
    assert_eq!(in_flight.load(Ordering::Relaxed), 0);
}
