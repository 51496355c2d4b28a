//! `kneepoint search` in-process against the built-in simulator: the answer meets the SLA, the
//! level above it does not, and every probe leaves its files and a line in search_history.json.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use kneepoint_cli::{run_search, Cli, Command, SearchSettings};
use kneepoint_planner::StopReason;

mod common;

/// The search's settings with the simulator's time × `scale`.
fn settings_at(scale: &str, extra: &[&str], dir: &std::path::Path) -> SearchSettings {
    let mut args = vec![
        "--isl",
        "32",
        "--osl",
        "16",
        "--request-count",
        "64",
        "--concurrency-min",
        "4",
        "--concurrency-max",
        "512",
    ];
    args.extend_from_slice(extra);
    common::fast_search_at(scale, &args, dir).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_the_boundary_and_writes_its_history() {
    // fast profile: 64 sequence slots, ~5 ms steps; 16 output tokens take ~90 ms, so p99
    // end-to-end latency passes 150 ms once requests queue beyond the 64 slots. Time ×4
    // (~360 ms against 600 ms) keeps a busy machine's pauses small beside the margins.
    let tmp = tempfile::tempdir().unwrap();
    let s = settings_at(
        "4",
        &["--e2e-sla-ms", "600", "--search-max-iterations", "12"],
        tmp.path(),
    );
    let out = run_search(&s, false).await.unwrap();
    let o = &out.outcome;
    eprintln!("{o:#?}");
    let answer = o.feasible_max.expect("an answer");
    let fail = o.infeasible_min.expect("a failing level");
    assert!(answer < fail);
    assert!((32..=160).contains(&answer), "{answer}");
    assert_eq!(o.first_breach.as_deref(), Some("e2e_sla_ms"));
    assert!(matches!(
        o.stop_reason,
        Some(StopReason::Converged | StopReason::MaxIterations)
    ));
    // The verdicts agree with the measured levels.
    for (r, s) in out.history.iter().zip(&out.summaries) {
        let p99 = s
            .value(
                kneepoint_core::Metric::RequestLatency,
                kneepoint_core::Stat::P99,
            )
            .unwrap();
        assert_eq!(
            r.pass,
            p99 <= 600.0,
            "probe {} p99 {p99}",
            r.probe.concurrency
        );
        assert_eq!(s.request_count as u32, r.probe.request_count);
    }
    let hist: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("search_history.json")).unwrap())
            .unwrap();
    assert_eq!(hist["complete"], true);
    assert_eq!(hist["recipe"], "max-concurrency-under-sla");
    let probes = hist["probes"].as_array().unwrap();
    assert_eq!(probes.len(), out.history.len());
    for p in probes {
        let dir = tmp.path().join(p["dir"].as_str().unwrap());
        assert!(dir.join("profile_export_aiperf.json").is_file());
        assert!(p["checks"][0]["margin"].is_number());
    }
    assert_eq!(hist["boundary"]["feasible_max"], answer);
    // the zone never says to operate above the answer, nor that the SLAs break below it
    let zone = &hist["zone"];
    if let Some(ideal) = zone["ideal_balance"].as_u64() {
        assert!(ideal <= u64::from(answer), "{zone}");
    }
    if let Some(b) = zone["sla_breaking_point"].as_u64() {
        assert!(b > u64::from(answer), "{zone}");
    }
    // what the search cost, beside doubling + bisection to the same boundary
    let cost = &hist["cost"];
    assert_eq!(cost["probes"], out.history.len());
    assert_eq!(cost["probes"], out.cost.probes);
    assert!(cost["endpoint_seconds"].as_f64().unwrap() > 0.0);
    let baseline = &cost["baseline"];
    assert_eq!(baseline["levels"][0], 4, "from concurrency_min");
    assert!(baseline["probes"].as_u64().unwrap() >= 2);
    assert!(baseline["endpoint_seconds"].as_f64().unwrap() > 0.0);
    let requests: u64 = out.summaries.iter().map(|s| s.request_count as u64).sum();
    assert_eq!(cost["requests"], requests);
    assert_eq!(hist["search_params"]["slas"][0]["name"], "e2e_sla_ms");
}

#[test]
fn search_settings_validate() {
    let tmp = tempfile::tempdir().unwrap();
    let parse = |extra: &[&str]| {
        let mut args = vec!["kneepoint", "search"];
        args.extend_from_slice(extra);
        let dir = tmp.path().to_str().unwrap().to_owned();
        args.extend_from_slice(&["--artifact-dir", &dir]);
        let Command::Search(a) = Cli::try_parse_from(args).unwrap().command else {
            panic!()
        };
        SearchSettings::resolve(&a).map_err(|e| format!("{e:#}"))
    };
    assert!(parse(&[]).unwrap_err().contains("at least one SLA"));
    assert!(parse(&[
        "--e2e-sla-ms",
        "1",
        "--concurrency-min",
        "9",
        "--concurrency-max",
        "8"
    ])
    .unwrap_err()
    .contains("greater than concurrency_max"));
    assert!(parse(&["--ttft-sla-ms", "1", "--streaming", "false"])
        .unwrap_err()
        .contains("needs streaming"));
    assert!(parse(&["--sla", "request_latency:p99:le"])
        .unwrap_err()
        .contains("metric:stat:op:threshold"));
    // A misspelt metric is refused with the closest name and every valid one.
    let e = parse(&["--sla", "request_latncy:p99:le:900"]).unwrap_err();
    assert!(e.contains("did you mean request_latency?"), "{e}");
    assert!(e.contains("time_to_first_token, "), "{e}");
    let ok = parse(&[
        "--sla",
        "request_latency:p90:le:900",
        "--error-rate-sla",
        "0.01",
    ])
    .unwrap();
    assert_eq!(ok.search.slas.len(), 2);
    // SageMaker's search_params in a config file
    let f = tmp.path().join("s.json");
    std::fs::write(
        &f,
        r#"{"search_params": {"search_recipe": "max-concurrency-under-sla", "e2e_sla_ms": 50000,
            "ttft_sla_ms": 1500, "concurrency_min": 16, "concurrency_max": 4096,
            "search_max_iterations": 10, "search_initial_points": 512, "request_count": 1024}}"#,
    )
    .unwrap();
    let s = parse(&["--config", f.to_str().unwrap()]).unwrap();
    assert_eq!(s.search.slas.len(), 2);
    assert_eq!(s.search.initial_points, Some(512));
    assert_eq!(s.search.request_count, 1024);
    std::fs::write(&f, r#"{"search_params": {"search_recipe": "min-cost"}}"#).unwrap();
    assert!(parse(&["--config", f.to_str().unwrap()])
        .unwrap_err()
        .contains("not known"));
}

/// With repeated probes and `--sla-by-confidence`, a probe passes only if the SLA holds at the
/// upper end of its interval across runs, so the answer is never above the plain search's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_by_confidence_judges_the_interval_and_keeps_each_run() {
    let tmp = tempfile::tempdir().unwrap();
    // Time ×4, as above: one slow run of three moves ci_high by ~1.8× its excess.
    let s = settings_at(
        "4",
        &[
            "--e2e-sla-ms",
            "600",
            "--search-max-iterations",
            "8",
            "--num-runs",
            "3",
            "--sla-by-confidence",
        ],
        tmp.path(),
    );
    assert!(s.sla_by_confidence);
    let out = run_search(&s, false).await.unwrap();
    let o = &out.outcome;
    let answer = o.feasible_max.expect("an answer");
    assert!((16..=160).contains(&answer), "{answer}");
    let hist: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("search_history.json")).unwrap())
            .unwrap();
    for (p, r) in hist["probes"].as_array().unwrap().iter().zip(&out.history) {
        let dir = tmp.path().join(p["dir"].as_str().unwrap());
        let agg: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join("aggregate/profile_export_aiperf_aggregate.json")).unwrap(),
        )
        .unwrap();
        let hi = agg["metrics"]["request_latency_p99"]["ci_high"]
            .as_f64()
            .unwrap();
        assert_eq!(
            r.pass,
            hi <= 600.0,
            "probe {}: ci_high {hi}",
            r.probe.concurrency
        );
        assert!(dir.join("profile_runs/run_0003").is_dir() || !r.pass);
    }
    // Without repeated runs the option is refused.
    let Command::Search(a) = Cli::try_parse_from([
        "kneepoint",
        "search",
        "--e2e-sla-ms",
        "150",
        "--sla-by-confidence",
    ])
    .unwrap()
    .command
    else {
        panic!()
    };
    let e = SearchSettings::resolve(&a).unwrap_err();
    assert!(format!("{e:#}").contains("num_runs to 2 or more"), "{e:#}");
}
