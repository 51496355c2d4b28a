//! Issue 48: the engine owns the default sweep, so a library sweep given no levels runs what
//! the CLI runs (64, 256, 1024, each kept loaded with its default counts), not an error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kneepoint_engine::BenchOptions;
use std::sync::Arc;

use kneepoint_engine::{default_level_counts, CancelToken, Sweep, DEFAULT_CONCURRENCY};
use kneepoint_testkit::{MockTransport, Model};
use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticWorkload};

fn workload() -> SyntheticWorkload {
    SyntheticWorkload::new(
        load_tokenizer("builtin").unwrap(),
        LengthDist::Fixed(8),
        LengthDist::Fixed(2),
        7,
    )
    .unwrap()
}

/// The counts each level sent of a sweep given no levels (`count`: the one request count
/// given, if any), against an instant model.
async fn default_sweep(count: Option<u32>) -> (Vec<u32>, Vec<usize>) {
    let tmp = tempfile::tempdir().unwrap();
    let (t, _) = MockTransport::new(Model::instant(2));
    let mut b = Sweep::builder(Arc::new(t)).workload(workload());
    if let Some(n) = count {
        b = b.request_count(n);
    }
    let report = b
        .artifacts(tmp.path())
        .build()
        .unwrap()
        .run(&CancelToken::new())
        .await
        .unwrap();
    (
        report.rows.iter().map(|r| r.concurrency).collect(),
        report.sent,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_given_no_levels_runs_the_default_sweep() {
    let (levels, sent) = default_sweep(None).await;
    assert_eq!(levels, DEFAULT_CONCURRENCY);
    let expected: Vec<usize> = DEFAULT_CONCURRENCY
        .iter()
        .map(|&c| default_level_counts(c).1 as usize)
        .collect();
    assert_eq!(sent, expected);
    // a count given applies to each default level (raised to its concurrency)
    let (levels, sent) = default_sweep(Some(128)).await;
    assert_eq!(levels, DEFAULT_CONCURRENCY);
    assert_eq!(sent, vec![128, 256, 1024]);
}
