//! Repeated runs of a level: per-run folders, the aggregate with Student-t intervals, the pooled
//! level files, and adaptive convergence that stops sooner on a quiet server than on a noisy
//! one and says why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::sync::Mutex;

use kneepoint_cli::{run_sweep, SweepSettings};
use serde_json::Value;

/// Timing-sensitive: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn sweep_args(extra: &[&str], dir: &Path) -> anyhow::Result<SweepSettings> {
    sweep_at("1", extra, dir)
}

fn sweep_at(scale: &str, extra: &[&str], dir: &Path) -> anyhow::Result<SweepSettings> {
    let mut args = vec!["--concurrency", "8", "--request-count", "32"];
    args.extend_from_slice(extra);
    common::fast_sweep_at(scale, "16", &args, dir)
}

fn aggregate(dir: &Path) -> Value {
    let p = dir.join("concurrency_8/aggregate/profile_export_aiperf_aggregate.json");
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn runs_are_kept_aggregated_and_pooled() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let s = sweep_args(&["--num-runs", "3", "--warmup-requests", "4"], tmp.path()).unwrap();
    let out = rt.block_on(run_sweep(&s, false)).unwrap();
    let level = tmp.path().join("concurrency_8");
    let mut per_run = Vec::new();
    for k in 1..=3 {
        let run = level.join(format!("profile_runs/run_000{k}"));
        for f in [
            "profile_export_aiperf.json",
            "profile_export_aiperf.csv",
            "profile_export.jsonl",
            "inputs.json",
        ] {
            assert!(run.join(f).is_file(), "{k}/{f}");
        }
        let doc: Value =
            serde_json::from_slice(&std::fs::read(run.join("profile_export_aiperf.json")).unwrap())
                .unwrap();
        per_run.push(doc["output_token_throughput"]["avg"].as_f64().unwrap());
    }
    // The level's own files pool the runs: every record once, throughput over summed time.
    let lines = std::fs::read_to_string(level.join("profile_export.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 96);
    let pooled = &out.summaries[0];
    assert_eq!(pooled.request_count, 96);
    // Tokens over summed time is a time-weighted mean of the runs' rates: never outside them,
    // however unevenly a busy machine slowed them.
    let least = per_run.iter().copied().fold(f64::INFINITY, f64::min);
    let most = per_run.iter().copied().fold(0.0, f64::max);
    let pooled_rate = pooled.output_token_throughput;
    assert!(
        pooled_rate >= least * (1.0 - 1e-9) && pooled_rate <= most * (1.0 + 1e-9),
        "pooled {pooled_rate} vs runs {per_run:?}"
    );
    let mean = per_run.iter().sum::<f64>() / 3.0;
    let agg = aggregate(tmp.path());
    assert_eq!(agg["metadata"]["num_successful_runs"], 3);
    assert_eq!(agg["metadata"]["stop_reason"], "ran the requested 3 runs");
    let m = &agg["metrics"]["output_token_throughput_avg"];
    let (lo, hi, mu) = (
        m["ci_low"].as_f64().unwrap(),
        m["ci_high"].as_f64().unwrap(),
        m["mean"].as_f64().unwrap(),
    );
    assert!((mu - mean).abs() < 1e-6 * mean, "{mu} vs {mean}");
    assert!(lo <= mu && mu <= hi);
    assert!((m["t_critical"].as_f64().unwrap() - 4.3027).abs() < 1e-3);
    let csv = std::fs::read_to_string(level.join("aggregate/profile_export_aiperf_aggregate.csv"))
        .unwrap();
    assert!(csv.starts_with("Metric,Unit,Mean,Std,Min,Max,CV,SE,CI Low,CI High,t Critical,Runs"));
    assert!(csv.contains("\ntime_to_first_token_p99,ms,"));

    // `kneepoint report` re-renders the pooled level files byte for byte.
    let json_path = level.join("profile_export_aiperf.json");
    let before = std::fs::read(&json_path).unwrap();
    let mut doc: Value = serde_json::from_slice(&before).unwrap();
    doc["output_token_throughput"]["avg"] = Value::from(0.0);
    doc["time_to_first_token"]["p99"] = Value::from(0.0);
    std::fs::write(&json_path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    assert_ne!(std::fs::read(&json_path).unwrap(), before);
    kneepoint_cli::run_report(tmp.path(), false).unwrap();
    assert_eq!(std::fs::read(&json_path).unwrap(), before);
}

#[test]
fn convergence_stops_sooner_on_a_quiet_server_and_says_why() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut outcomes = Vec::new();
    for jitter in ["0", "0.8"] {
        let tmp = tempfile::tempdir().unwrap();
        // Time ×3 (~270 ms latencies): a busy machine's pauses stay well under the quiet
        // server's 3 % CV.
        let s = sweep_at(
            "3",
            &[
                "--sim-jitter",
                jitter,
                "--num-runs",
                "8",
                "--converge-on",
                "request_latency_avg",
                "--converge-criterion",
                "cv",
                "--converge-threshold",
                "0.03",
                "--min-runs",
                "3",
            ],
            tmp.path(),
        )
        .unwrap();
        rt.block_on(run_sweep(&s, false)).unwrap();
        let meta = aggregate(tmp.path())["metadata"].clone();
        println!(
            "jitter {jitter}: {} runs; {}",
            meta["num_successful_runs"], meta["stop_reason"]
        );
        outcomes.push(meta);
    }
    let (quiet, noisy) = (&outcomes[0], &outcomes[1]);
    let runs = |m: &Value| m["num_successful_runs"].as_u64().unwrap();
    assert!(runs(quiet) < runs(noisy), "{quiet} vs {noisy}");
    let reason = quiet["stop_reason"].as_str().unwrap();
    assert!(
        reason.starts_with("converged: CV of request_latency_avg"),
        "{reason}"
    );
    assert_eq!(quiet["convergence"]["decision"], "converged");
    let reason = noisy["stop_reason"].as_str().unwrap();
    assert!(reason.contains("CV of request_latency_avg"), "{reason}");
}

#[test]
fn bad_run_settings_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    for (args, want) in [
        (&["--num-runs", "0"][..], "num_runs must be at least 1"),
        (
            &["--confidence-level", "1"][..],
            "confidence_level must be between 0 and 1",
        ),
        (&["--converge-threshold", "0.1"][..], "need converge_on"),
        (
            &["--num-runs", "5", "--converge-on", "ttft_p99"][..],
            "is not a statistic",
        ),
        (
            &[
                "--num-runs",
                "5",
                "--converge-on",
                "time_to_first_token_p99",
                "--min-runs",
                "1",
            ][..],
            "min_runs must be at least 2",
        ),
        (
            &[
                "--num-runs",
                "2",
                "--converge-on",
                "time_to_first_token_p99",
            ][..],
            "must be at least min_runs",
        ),
        (
            &[
                "--num-runs",
                "4",
                "--converge-on",
                "time_to_first_token_p99",
                "--converge-criterion",
                "t",
            ][..],
            "possible values: ci-width, ci_width, cv",
        ),
    ] {
        let e = sweep_args(args, tmp.path()).unwrap_err();
        assert!(format!("{e:#}").contains(want), "{args:?}: {e:#}");
    }
}
