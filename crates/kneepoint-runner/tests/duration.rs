//! Duration-bound levels against a fake transport: every request drawn gets one record, those
//! still running after the grace period are recorded as cancelled, and the warm-up is apart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream;
use kneepoint_core::{
    async_trait, Chunk, Error, ErrorKind, EventStream, Phase, Request, ResponseEvent, Transport,
    Usage,
};
use kneepoint_runner::{run_level_for, LevelConfig, LevelDuration};

/// Four tokens 10 ms apart; every seventh request is slow (a token per 400 ms).
struct Steady;

#[async_trait]
impl Transport for Steady {
    async fn send(&self, request: &Request) -> Result<EventStream, Error> {
        let gap = Duration::from_millis(if request.id % 7 == 3 { 400 } else { 10 });
        let s = stream::unfold(0u32, move |i| async move {
            match i {
                0..=3 => {
                    tokio::time::sleep(gap).await;
                    Some((Ok(ResponseEvent::Chunk(Chunk::content(" tok"))), i + 1))
                }
                4 => Some((Ok(ResponseEvent::Usage(Usage::new(Some(3), Some(4)))), 5)),
                _ => None,
            }
        });
        Ok(Box::pin(s))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_of_a_timed_level_ends_completed_or_cancelled() {
    let drawn = Arc::new(AtomicU64::new(0));
    let source = {
        let drawn = drawn.clone();
        Box::new(move || {
            let id = drawn.fetch_add(1, Ordering::SeqCst);
            Some(Request::text(id, "hello"))
        })
    };
    let time = LevelDuration {
        warmup: Duration::from_millis(150),
        measure: Duration::from_millis(400),
        grace: Duration::from_millis(100),
    };
    let run = run_level_for(
        Arc::new(Steady),
        &LevelConfig::new(4),
        time,
        source,
        Vec::new(),
        None,
    )
    .await
    .unwrap();
    let drawn = drawn.load(Ordering::SeqCst) as usize;
    assert_eq!(drawn, run.warmup_records.len() + run.records.len());
    assert!(run.warmup_records.iter().all(|r| r.phase == Phase::Warmup));
    assert!(run.records.iter().all(|r| r.phase == Phase::Profiling));
    assert!(!run.cancelled);
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut completed = 0;
    let mut cancelled = 0;
    for r in &run.records {
        assert!(ms(r.start_ns) < 400.0, "started at {} ms", ms(r.start_ns));
        match &r.error {
            None => completed += 1,
            Some(e) if e.kind == ErrorKind::Cancelled => {
                cancelled += 1;
                // Cut at the end of the grace period (400 + 100 ms), not before.
                assert!((495.0..700.0).contains(&ms(r.end_ns)), "{}", ms(r.end_ns));
            }
            Some(e) => panic!("unexpected failure {e:?}"),
        }
    }
    assert!(completed > 8, "{completed}");
    assert!(
        cancelled >= 1,
        "slow requests in flight at the end are cancelled"
    );
    println!(
        "drawn {drawn}: warm-up {}, completed {completed}, cancelled {cancelled}",
        run.warmup_records.len()
    );
}

#[tokio::test]
async fn an_exhausted_source_ends_the_level_and_bad_settings_are_errors() {
    let mut left = 5u64;
    let source = Box::new(move || {
        left = left.checked_sub(1)?;
        Some(Request::text(left, "x"))
    });
    let time = LevelDuration {
        warmup: Duration::ZERO,
        measure: Duration::from_secs(30),
        grace: Duration::from_secs(1),
    };
    let started = std::time::Instant::now();
    let run = run_level_for(
        Arc::new(Steady),
        &LevelConfig::new(2),
        time,
        source,
        Vec::new(),
        None,
    )
    .await
    .unwrap();
    assert_eq!(run.records.len(), 5);
    assert!(started.elapsed() < Duration::from_secs(10));
    let none = || Box::new(|| None::<Request>) as kneepoint_runner::RequestSource;
    let zero = LevelDuration {
        measure: Duration::ZERO,
        ..time
    };
    assert!(run_level_for(
        Arc::new(Steady),
        &LevelConfig::new(2),
        zero,
        none(),
        vec![],
        None
    )
    .await
    .is_err());
    assert!(run_level_for(
        Arc::new(Steady),
        &LevelConfig::new(0),
        time,
        none(),
        vec![],
        None
    )
    .await
    .is_err());
}
