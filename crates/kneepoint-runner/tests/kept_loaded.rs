//! A level kept loaded (lead-in, measured requests, fillers) against a transport whose
//! requests take 20 to 32 ms. Tokio's paused time cannot drive a level (its sink thread holds
//! the clock still), so the checks leave wide margins for a busy machine: a slot is between
//! two requests for microseconds, and the margins allow milliseconds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream;
use kneepoint_core::{
    async_trait, Chunk, Error, EventStream, Phase, Request, ResponseEvent, Transport,
};
use kneepoint_runner::{run_level_loaded, LevelConfig};
use std::time::Instant;

/// Every request's (id, start µs, end µs) as the transport saw it.
type Log = Arc<Mutex<Vec<(u64, u64, Option<u64>)>>>;

/// Each request streams two chunks and takes `20 + (id * 7) % 13` virtual ms; every request's
/// (id, start, end) is logged, the end when its stream is dropped (finished or abandoned).
#[derive(Default)]
struct Timed {
    origin: Mutex<Option<Instant>>,
    log: Log,
}

struct Ends {
    at: usize,
    origin: Instant,
    log: Log,
}

impl Drop for Ends {
    fn drop(&mut self) {
        let t = self.origin.elapsed().as_micros() as u64;
        self.log.lock().unwrap()[self.at].2 = Some(t);
    }
}

#[async_trait]
impl Transport for Timed {
    async fn send(&self, request: &Request) -> Result<EventStream, Error> {
        let origin = *self.origin.lock().unwrap().get_or_insert_with(Instant::now);
        let at = {
            let mut log = self.log.lock().unwrap();
            log.push((request.id, origin.elapsed().as_micros() as u64, None));
            log.len() - 1
        };
        let ends = Ends {
            at,
            origin,
            log: self.log.clone(),
        };
        let half = Duration::from_millis(20 + (request.id * 7) % 13) / 2;
        let s = stream::unfold((0u32, ends), move |(i, ends)| async move {
            if i == 2 {
                return None;
            }
            tokio::time::sleep(half).await;
            Some((
                Ok(ResponseEvent::Chunk(Chunk::content(" t"))),
                (i + 1, ends),
            ))
        });
        Ok(Box::pin(s))
    }
}

fn ids(range: std::ops::Range<u64>) -> Vec<Request> {
    range.map(|i| Request::text(i, "a b c")).collect()
}

#[tokio::test]
async fn every_measured_request_runs_under_full_load_and_the_starts_give_the_rate() {
    let c = 8u64;
    let transport = Arc::new(Timed::default());
    // Lead-in ids 1000.., measured 0..40, fillers 2000..
    let work = (ids(1000..1000 + c), ids(0..40), ids(2000..2000 + c));
    let run = run_level_loaded(
        transport.clone(),
        &LevelConfig::new(c as u32),
        work,
        vec![],
        None,
    )
    .await
    .unwrap();
    assert_eq!(run.records.len(), 40);
    assert!(run
        .records
        .iter()
        .all(|r| r.phase == Phase::Profiling && r.error.is_none()));
    assert_eq!(run.warmup_records.len(), c as usize);
    assert_eq!(run.unsent, 0);
    assert_eq!(run.measured_starts_ns.len(), 40);

    let log = transport.log.lock().unwrap().clone();
    let measured: Vec<_> = log.iter().filter(|l| l.0 < 1000).collect();
    let first = measured.iter().map(|l| l.1).min().unwrap();
    let last = measured.iter().map(|l| l.2.unwrap()).max().unwrap();
    assert!(log.iter().any(|l| l.0 >= 2000), "fillers were sent");
    // Every request ended: the fillers still running were abandoned.
    assert!(log.iter().all(|l| l.2.is_some()));
    // The slots were busy from the first measured start to the last measured end, and so
    // over the last measured request's life (a level that drains would average about half).
    let busy = |from: u64, to: u64| {
        let overlap: u64 = log
            .iter()
            .map(|l| l.2.unwrap().min(to).saturating_sub(l.1.max(from)))
            .sum();
        overlap as f64 / (to - from) as f64
    };
    let last_start = measured.iter().map(|l| l.1).max().unwrap();
    let (whole, tail) = (busy(first, last), busy(last_start, last));
    assert!(whole > 0.9 * c as f64, "{whole:.2} slots busy on average");
    assert!(tail > 0.75 * c as f64, "{tail:.2} slots busy at the end");
    // The measured starts' rate is the completion rate: Little's law from the mean duration.
    let d = kneepoint_metrics::loaded_duration_s(&run.measured_starts_ns, c as u32).unwrap();
    let mean_s = measured
        .iter()
        .map(|l| (l.2.unwrap() - l.1) as f64)
        .sum::<f64>()
        / measured.len() as f64
        / 1e6;
    let little = c as f64 / mean_s;
    let rate = 40.0 / d;
    assert!((rate - little).abs() / little < 0.15, "{rate} vs {little}");
}

#[tokio::test]
async fn a_cancelled_level_kept_loaded_ends_and_keeps_its_records() {
    let transport = Arc::new(Timed::default());
    let config = LevelConfig::new(4);
    let cancel = config.cancel.clone();
    let work = (ids(1000..1004), ids(0..400), ids(2000..2004));
    let task = tokio::spawn({
        let config = config.clone();
        async move { run_level_loaded(transport, &config, work, vec![], None).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    cancel.cancel();
    let run = task.await.unwrap().unwrap();
    assert!(run.cancelled);
    assert!(run.records.len() < 400 && !run.records.is_empty());
    assert_eq!(run.records.len() + run.unsent, 400);
}

/// A transport that panics on one measured request.
struct PanicsOn(u64, Timed);

#[async_trait]
impl Transport for PanicsOn {
    async fn send(&self, request: &Request) -> Result<EventStream, Error> {
        if request.id == self.0 {
            panic!("the transport failed on request {}", self.0);
        }
        self.1.send(request).await
    }
}

/// A request task that panics still ends the fillers: the level ends with the worker's
/// failure instead of sending fillers forever.
#[tokio::test]
async fn a_panicking_request_ends_the_level_with_an_error() {
    let transport = Arc::new(PanicsOn(39, Timed::default()));
    let work = (ids(1000..1004), ids(0..40), ids(2000..2004));
    let config = LevelConfig::new(4);
    let level = run_level_loaded(transport, &config, work, vec![], None);
    let ended = tokio::time::timeout(Duration::from_secs(60), level).await;
    let err = ended.expect("the level ended").unwrap_err();
    assert!(err.to_string().contains("panic"), "{err}");
}
