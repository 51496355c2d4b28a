//! Duration-bound levels through the CLI: closed loop draws requests while the time lasts and
//! records every one as completed or cancelled; an open loop's schedule covers the duration.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use kneepoint_cli::{run_sweep, SweepSettings};
use kneepoint_core::ErrorKind;
use kneepoint_metrics::export::read_jsonl;

fn sweep(extra: &[&str], dir: &Path) -> anyhow::Result<SweepSettings> {
    common::fast_sweep("32", extra, dir)
}

#[test]
fn a_timed_level_records_every_request_as_completed_or_cancelled() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // 32-token answers take ~170 ms; a 0.1 s ramp spreads the 8 slots' finishing times over
    // 100 ms, so the 10 ms grace after 0.9 s is unlikely to see all 8 end (in step, without the
    // ramp, a round ending inside the grace would leave nothing to cancel). About 40 complete.
    let s = sweep(
        &[
            "--concurrency",
            "8",
            "--duration-s",
            "0.9",
            "--grace-s",
            "0.01",
            "--ramp-up-s",
            "0.1",
            "--warmup-duration-s",
            "0.3",
        ],
        tmp.path(),
    )
    .unwrap();
    let out = rt.block_on(run_sweep(&s, false)).unwrap();
    let level = tmp.path().join("concurrency_8");
    let records = read_jsonl(&level.join("profile_export.jsonl")).unwrap();
    let summary = &out.summaries[0];
    assert_eq!(records.len(), summary.request_count);
    let cancelled = records
        .iter()
        .filter(|r| {
            r.error
                .as_ref()
                .is_some_and(|e| e.kind == ErrorKind::Cancelled)
        })
        .count();
    let completed = records.iter().filter(|r| r.error.is_none()).count();
    assert_eq!(
        completed + cancelled,
        records.len(),
        "only completed or cancelled"
    );
    assert!(
        cancelled >= 1 && completed >= 8,
        "{completed} completed, {cancelled} cancelled"
    );
    // Sending stops at 0.9 s. A sender that decided to send just before may wait for its
    // prompt from the generator thread on a starved machine (seen under the full suite on two
    // cores), so its start is stamped late: bound it by the level's end plus a wide margin.
    assert!(records.iter().all(|r| r.start_ns < 1_500_000_000));
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(level.join("inputs.json")).unwrap()).unwrap();
    assert_eq!(inputs["data"].as_array().unwrap().len(), records.len());
    assert!(!out.interrupted);
    println!("0.9 s level: {completed} completed, {cancelled} cancelled at the grace period");
}

#[test]
fn an_open_loop_for_a_duration_schedules_inside_it_and_bad_times_are_errors() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let s = sweep(
        &[
            "--request-rate",
            "50",
            "--duration-s",
            "1",
            "--arrival",
            "constant",
        ],
        tmp.path(),
    )
    .unwrap();
    let out = rt.block_on(run_sweep(&s, false)).unwrap();
    // Constant 50/s over 1 s: starts at 0, 20, ..., 980 ms.
    assert_eq!(out.summaries[0].request_count, 50);
    for (args, want) in [
        (&["--duration-s", "0"][..], "duration_s must be a positive"),
        (&["--grace-s", "3"][..], "need duration_s"),
        (
            &["--duration-s", "2", "--grace-s=-1"][..],
            "grace_s must be",
        ),
    ] {
        let e = sweep(args, tmp.path()).unwrap_err();
        assert!(format!("{e:#}").contains(want), "{args:?}: {e:#}");
    }
}

/// A level stops before its request count once its intervals are tight, and says why.
#[test]
fn a_precise_level_stops_early_and_says_why() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let s = sweep(
        &[
            "--concurrency",
            "8",
            "--request-count",
            "3000",
            "--early-stop-width",
            "0.2",
            "--early-stop-min-requests",
            "100",
        ],
        tmp.path(),
    )
    .unwrap();
    let out = rt.block_on(run_sweep(&s, false)).unwrap();
    let level = tmp.path().join("concurrency_8");
    let n = out.summaries[0].request_count;
    assert!((100..3000).contains(&n), "{n}");
    assert_eq!(
        read_jsonl(&level.join("profile_export.jsonl"))
            .unwrap()
            .len(),
        n
    );
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(level.join("inputs.json")).unwrap()).unwrap();
    assert_eq!(inputs["data"].as_array().unwrap().len(), n);
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(level.join("profile_export_aiperf.json")).unwrap())
            .unwrap();
    let why = doc["input_config"]["level"]["stopped_early"]
        .as_str()
        .unwrap();
    assert!(why.starts_with("stopped early after"), "{why}");
    println!("{why}");
    let e = sweep(&["--early-stop-min-requests", "5"], tmp.path()).unwrap_err();
    assert!(format!("{e:#}").contains("needs early_stop_width"));
}

/// `--target-precision`: a level ends once its chosen statistic's interval is within the
/// target (the request count is the cap), and says so; a looser target stops sooner.
#[test]
fn a_level_stops_at_its_target_precision() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let run = |target: &str| {
        let tmp = tempfile::tempdir().unwrap();
        let s = sweep(
            &[
                "--concurrency",
                "8",
                "--request-count",
                "4000",
                "--target-precision",
                target,
                "--precision-statistic",
                "request_latency:p90",
            ],
            tmp.path(),
        )
        .unwrap();
        let out = rt.block_on(run_sweep(&s, false)).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(
            &std::fs::read(tmp.path().join("concurrency_8/profile_export_aiperf.json")).unwrap(),
        )
        .unwrap();
        let why = doc["input_config"]["level"]["stopped_early"]
            .as_str()
            .map(str::to_owned);
        (out.summaries[0].request_count, why)
    };
    let (n, why) = run("0.2");
    let why = why.expect("stopped at the target");
    println!("{why}");
    assert!((200..4000).contains(&n), "{n}");
    assert!(
        why.starts_with("stopped at the target precision after"),
        "{why}"
    );
    assert!(why.contains("request_latency p90"), "{why}");
    // refusals
    let tmp = tempfile::tempdir().unwrap();
    for (args, want) in [
        (
            &[
                "--target-precision",
                "0.05",
                "--precision-statistic",
                "error_rate:avg",
            ][..],
            "precision_statistic watches",
        ),
        (
            &[
                "--target-precision",
                "0.05",
                "--precision-statistic",
                "request_latency:max",
            ][..],
            "avg or a percentile",
        ),
        (&["--target-precision", "2"][..], "target_precision must be"),
    ] {
        let e = sweep(args, tmp.path()).unwrap_err();
        assert!(format!("{e:#}").contains(want), "{args:?}: {e:#}");
    }
}
