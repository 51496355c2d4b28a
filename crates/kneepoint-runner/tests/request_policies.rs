//! Per-request policies of the runner: retries of transient failures, and chunks stamped with
//! their receive time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream;
use kneepoint_core::{
    async_trait, Chunk, Error, EventStream, Request, RequestRecord, ResponseEvent, Transport,
};
use kneepoint_runner::{run_level, LevelConfig};

mod support;
use support::{one_request, requests};

/// Fails with `status` (and a `Retry-After`, when set) on the first `fail_first` sends, then
/// streams two tokens.
struct Flaky {
    status: u16,
    fail_first: usize,
    sends: Arc<AtomicUsize>,
    retry_after: Option<&'static str>,
}

#[async_trait]
impl Transport for Flaky {
    async fn send(&self, _: &Request) -> Result<EventStream, Error> {
        if self.sends.fetch_add(1, Ordering::SeqCst) < self.fail_first {
            return Err(Error::Status {
                status: self.status,
                body_excerpt: "busy".into(),
                headers: self
                    .retry_after
                    .map(|v| ("retry-after".to_owned(), v.to_owned()))
                    .into_iter()
                    .collect(),
            });
        }
        Ok(Box::pin(stream::iter(vec![
            Ok(ResponseEvent::Chunk(Chunk::content(" a"))),
            Ok(ResponseEvent::Chunk(Chunk::content(" b"))),
            Ok(ResponseEvent::Finish {
                reason: Some("length".into()),
            }),
        ])))
    }
}

/// Runs one request through `t` under `cfg` and returns its record.
async fn one(t: Flaky, cfg: &LevelConfig) -> RequestRecord {
    let run = run_level(Arc::new(t), cfg, requests(1), vec![], vec![], None)
        .await
        .unwrap();
    run.records.into_iter().next().unwrap()
}

#[tokio::test]
async fn retries_are_off_by_default_and_bounded_when_on() {
    let flaky = |status, fail_first| Flaky {
        status,
        fail_first,
        sends: Arc::default(),
        retry_after: None,
    };
    let mut cfg = LevelConfig::new(1);
    cfg.require_finish_reason = true;
    // off: the 503 is recorded
    let r = one(flaky(503, 2), &cfg).await;
    assert_eq!(r.attempts, 1);
    assert_eq!(r.error.as_ref().unwrap().code, Some(503));
    // two retries: the third attempt succeeds, and the record says so
    cfg.retry = kneepoint_runner::RetryPolicy {
        max_retries: 2,
        backoff: Duration::from_millis(5),
    };
    let r = one(flaky(503, 2), &cfg).await;
    assert!(r.is_ok(), "{:?}", r.error);
    assert_eq!(r.attempts, 3);
    assert!(
        r.chunk_ns[0] - r.start_ns >= 15_000_000,
        "the backoff (5 + 10 ms) is in the latency"
    );
    // one retry is not enough
    cfg.retry.max_retries = 1;
    let r = one(flaky(429, 2), &cfg).await;
    assert_eq!(r.attempts, 2);
    assert!(!r.is_ok());
    // a 500 is not transient: no retry
    cfg.retry.max_retries = 3;
    assert_eq!(one(flaky(500, 1), &cfg).await.attempts, 1);
}

/// Issue 34: a 429 with `Retry-After: 1` was retried after the 50 ms backoff. The server's
/// wait is honoured when it is longer than the backoff (sleeps never end early, so the bound
/// holds on a busy machine).
#[tokio::test]
async fn a_retry_waits_as_long_as_the_server_asks() {
    let mut cfg = LevelConfig::new(1);
    cfg.retry = kneepoint_runner::RetryPolicy {
        max_retries: 1,
        backoff: Duration::from_millis(5),
    };
    let flaky = Flaky {
        status: 429,
        fail_first: 1,
        sends: Arc::default(),
        retry_after: Some("1"),
    };
    let r = one(flaky, &cfg).await;
    assert!(r.is_ok(), "{:?}", r.error);
    assert_eq!(r.attempts, 2);
    assert!(
        r.chunk_ns[0] - r.start_ns >= 1_000_000_000,
        "waited the second asked for"
    );
    // a date in the past asks for nothing: the backoff stands
    let flaky = Flaky {
        status: 503,
        fail_first: 1,
        sends: Arc::default(),
        retry_after: Some("Sun, 06 Nov 1994 08:49:37 GMT"),
    };
    let r = one(flaky, &cfg).await;
    assert!(r.is_ok() && r.attempts == 2, "{:?}", r.error);
}

/// Yields its chunks 30 ms after the request, saying they were received earlier (or at
/// impossible times).
struct Received;
#[async_trait]
impl Transport for Received {
    async fn send(&self, _: &Request) -> Result<EventStream, Error> {
        let sent = std::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let chunk = |received| {
            Ok(ResponseEvent::Chunk(
                Chunk::content(" tok").received_at(received),
            ))
        };
        Ok(Box::pin(stream::iter(vec![
            // Received 10 ms after the request was sent.
            chunk(Some(sent + Duration::from_millis(10))),
            // Before the request started: no earlier than the previous chunk.
            chunk(Some(sent - Duration::from_secs(1))),
            // In the future: no later than the moment it is yielded.
            chunk(Some(sent + Duration::from_secs(10))),
            // No receive time: stamped when yielded.
            chunk(None),
        ])))
    }
}

#[tokio::test]
async fn chunks_are_stamped_with_their_receive_time_within_bounds() {
    let run = one_request(Received).await;
    let r = &run.records[0];
    assert!(r.error.is_none(), "{:?}", r.error);
    let ms = |ns: u64| ns as f64 / 1e6;
    let since_start: Vec<f64> = r.chunk_ns.iter().map(|&c| ms(c - r.start_ns)).collect();
    assert!(
        since_start[0] >= 10.0 && since_start[0] < 25.0,
        "{since_start:?}"
    );
    assert_eq!(r.chunk_ns[1], r.chunk_ns[0]);
    assert!(since_start[2] >= 30.0 && r.chunk_ns[2] <= r.end_ns);
    assert!(r.chunk_ns[3] >= r.chunk_ns[2] && r.chunk_ns[3] <= r.end_ns);
    assert_eq!(r.first_content_ns, Some(r.chunk_ns[0]));
    // The headers cannot come after the first token.
    assert!(r.response_ns.unwrap() <= r.chunk_ns[0]);
}
