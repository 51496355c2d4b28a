//! `--ramp-up-s` through the CLI: a level's first wave is spread over the ramp.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use kneepoint_cli::run_sweep;
use kneepoint_metrics::export::read_jsonl;

#[test]
fn a_ramp_spreads_the_first_wave_of_a_level() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // 128-token answers take ~650 ms, longer than the 0.4 s ramp: the first 8 requests are
    // the 8 slots' first, one every 50 ms.
    let s = common::fast_sweep(
        "128",
        &[
            "--concurrency",
            "8",
            "--request-count",
            "16",
            "--ramp-up-s",
            "0.4",
        ],
        tmp.path(),
    )
    .unwrap();
    rt.block_on(run_sweep(&s, false)).unwrap();
    let records = read_jsonl(&tmp.path().join("concurrency_8/profile_export.jsonl")).unwrap();
    assert_eq!(records.len(), 16);
    assert!(records.iter().all(|r| r.error.is_none()));
    let mut starts: Vec<f64> = records.iter().map(|r| r.start_ns as f64 / 1e6).collect();
    starts.sort_by(f64::total_cmp);
    for (k, start) in starts.iter().take(8).enumerate() {
        let due = 50.0 * k as f64;
        assert!(
            // Never before its slot's time; after it by a busy machine's timer slack only.
            *start >= due - 1.0 && *start < due + 150.0,
            "slot {k} started at {start} ms"
        );
    }
    // The ramp is not latency: each request's TTFT is the simulator's, not its wait (which
    // would add 350 ms to the last slot's).
    for r in &records {
        let ttft_ms = (r.chunk_ns[0] - r.start_ns) as f64 / 1e6;
        assert!(ttft_ms < 200.0, "TTFT {ttft_ms} ms");
    }
}
