//! `--slice-s`: each level's time slices in AIPerf's shapes, a server that slows as it runs
//! flagged `not_steady`, and the same level on a steady server not flagged.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use kneepoint_cli::{run_sweep, Cli, Command, SweepSettings};
use serde_json::Value;

/// Concurrency 8, `requests` of 32/16 tokens on the fast profile at time x2 (10 ms steps, each
/// request ~200 ms): the steady level runs 800 in ~16 s, four 4 s slices of ~180 requests, so
/// a pause of the busy test machine (every request in flight waits it out) moves a slice's
/// mean by a few percent at most, well under the 10 % that counts.
async fn sweep(
    dir: &std::path::Path,
    degrade: &str,
    requests: &str,
    slice_s: &str,
) -> kneepoint_cli::SweepOutcome {
    let dir = dir.to_str().unwrap().to_owned();
    let args = [
        "kneepoint",
        "sweep",
        "--sim-profile",
        "fast",
        "--sim-time-scale",
        "2",
        "--sim-degrade",
        degrade,
        "--concurrency",
        "8",
        "--request-count",
        requests,
        "--isl",
        "32",
        "--osl",
        "16",
        "--slice-s",
        slice_s,
        "--artifact-dir",
        &dir,
    ];
    let Command::Sweep(a) = Cli::try_parse_from(args).unwrap().command else {
        panic!("not a sweep")
    };
    run_sweep(&SweepSettings::resolve(&a).unwrap(), false)
        .await
        .unwrap()
}

fn read(path: std::path::PathBuf) -> Value {
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degrading_server_is_flagged_not_steady_and_a_steady_one_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let steady = sweep(&tmp.path().join("steady"), "0", "800", "4").await;
    // each busy model second adds 25 % to every step: 400 requests in 2 s slices, the first
    // two full ones already ~20 % apart (measured: +22 %, z ≈ 8)
    let drifting = sweep(&tmp.path().join("drifting"), "0.25", "400", "2").await;

    let level = |root: &str| tmp.path().join(root).join("concurrency_8");
    let doc = read(level("steady").join("profile_export_aiperf_timeslices.json"));
    let slices = doc["timeslices"].as_array().unwrap();
    assert!(slices.len() >= 3, "{}", slices.len());
    for (i, s) in slices.iter().enumerate() {
        assert_eq!(s["timeslice_index"], i);
        assert_eq!(s["time_to_first_token"]["unit"], "ms");
        assert!(s["request_latency"]["p99"].is_f64());
        assert!(s["output_token_throughput"]["avg"].as_f64().unwrap() > 0.0);
        assert!(s["end_ns"].as_u64().unwrap() > s["start_ns"].as_u64().unwrap());
    }
    // every measured request lands in exactly one slice
    let counted: u64 = slices
        .iter()
        .map(|s| s["request_count"]["avg"].as_f64().unwrap() as u64)
        .sum();
    assert_eq!(counted, 800);
    let csv = std::fs::read_to_string(level("steady").join("profile_export_aiperf_timeslices.csv"))
        .unwrap();
    assert!(csv.starts_with("Timeslice,Metric,Unit,Stat,Value\n0,Time To First Token,ms,avg,"));

    assert_eq!(doc["steadiness"]["steady"], true, "{}", doc["steadiness"]);
    assert!(steady.rows[0].not_steady.is_none());
    let d = read(level("drifting").join("profile_export_aiperf_timeslices.json"));
    assert_eq!(d["steadiness"]["steady"], false, "{}", d["steadiness"]);
    let why = drifting.rows[0].not_steady.as_deref().unwrap();
    assert!(why.contains("request latency rose"), "{why}");
    // the verdict is in the level's aggregates and its row, and the report draws the slices
    let agg = read(level("drifting").join("profile_export_aiperf.json"));
    assert_eq!(agg["steadiness"]["steady"], false);
    let sweep = read(tmp.path().join("drifting/sweep_summary.json"));
    assert!(sweep["levels"][0]["not_steady"].is_string());
    assert!(tmp
        .path()
        .join("drifting/plots/slices_concurrency_8.svg")
        .is_file());
}
