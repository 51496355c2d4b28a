//! `kneepoint sweep` in-process against the built-in simulator: every artifact is written, and
//! every request sent has exactly one record.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use kneepoint_cli::{run_sweep, Cli, Command, SweepSettings};
use kneepoint_core::{Metric, Stat, TokenSource};

fn settings(extra: &[&str], dir: &std::path::Path) -> SweepSettings {
    settings_at("1", extra, dir)
}

/// [`settings`] with the simulator's time × `scale`.
fn settings_at(scale: &str, extra: &[&str], dir: &std::path::Path) -> SweepSettings {
    let mut args = vec![
        "kneepoint",
        "sweep",
        "--sim-profile",
        "fast",
        "--sim-time-scale",
        scale,
    ];
    args.extend_from_slice(extra);
    let dir = dir.to_str().unwrap().to_owned();
    args.extend_from_slice(&["--artifact-dir", &dir]);
    let cli = Cli::try_parse_from(args).unwrap();
    let Command::Sweep(a) = cli.command else {
        panic!("not a sweep")
    };
    SweepSettings::resolve(&a).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_writes_every_artifact_and_one_record_per_request() {
    let tmp = tempfile::tempdir().unwrap();
    let s = settings(
        &[
            "--concurrency",
            "1,4,16",
            "--request-count",
            "24",
            "--warmup-requests",
            "2",
            "--isl",
            "64",
            "--osl",
            "8",
        ],
        tmp.path(),
    );
    let out = run_sweep(&s, false).await.unwrap();
    assert_eq!(out.rows.len(), 3);
    for (i, c) in [1u32, 4, 16].iter().enumerate() {
        let dir = tmp.path().join(format!("concurrency_{c}"));
        for f in [
            "profile_export_aiperf.json",
            "profile_export_aiperf.csv",
            "profile_export.jsonl",
            "inputs.json",
            "benchmark_summary.txt",
        ] {
            assert!(dir.join(f).is_file(), "{c}: {f} missing");
        }
        // records == requests sent (successes + failures)
        let summary = &out.summaries[i];
        assert_eq!(out.sent[i], 24);
        assert_eq!(summary.request_count, 24);
        assert_eq!(summary.ok_count + summary.error_count, 24);
        assert_eq!(summary.error_count, 0, "{:?}", summary.error_summary);
        // ignore_eos makes the simulator generate exactly the requested output, and the
        // client's own count (same tokenizer) agrees with the server's usage
        assert_eq!(
            summary.value(Metric::OutputSequenceLength, Stat::Avg),
            Some(8.0)
        );
        assert_eq!(
            summary.value(Metric::InputSequenceLength, Stat::Max),
            Some(64.0)
        );
        assert_eq!(summary.osl_mismatches, 0);
        assert_eq!(summary.osl_source_disagreements, 0);
        assert_eq!(
            summary.osl_sources.get(&TokenSource::Usage.into()),
            Some(&24)
        );
        let jsonl = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
        let lines: Vec<serde_json::Value> = jsonl
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 24);
        for l in &lines {
            assert_eq!(l["metadata"]["benchmark_phase"], "profiling");
            assert_eq!(l["metrics"]["output_sequence_length"]["value"], 8.0);
            assert_eq!(l["metrics"]["input_sequence_length"]["value"], 64.0);
            assert!(l["error"].is_null());
        }
        let inputs: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("inputs.json")).unwrap()).unwrap();
        let data = inputs["data"].as_array().unwrap();
        assert_eq!(data.len(), 24);
        assert_eq!(data[0]["payloads"][0]["max_tokens"], 8);
        assert_eq!(data[0]["payloads"][0]["stream"], true);
        let agg: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("profile_export_aiperf.json")).unwrap())
                .unwrap();
        for key in [
            "unit", "avg", "min", "max", "p1", "p50", "p90", "p99", "std", "count",
        ] {
            assert!(agg["time_to_first_token"].get(key).is_some(), "{key}");
        }
        assert_eq!(agg["time_to_first_token"]["unit"], "ms");
        assert_eq!(agg["request_latency"]["count"], 24);
        assert_eq!(agg["output_token_throughput"]["unit"], "tokens/sec");
        assert_eq!(agg["kneepoint"]["concurrency"], *c);
        let csv = std::fs::read_to_string(dir.join("profile_export_aiperf.csv")).unwrap();
        assert!(csv.starts_with("Metric,avg,min,max,p1,"));
        assert!(csv.contains("Time To First Token (ms),"));
        assert!(csv.contains("Output Token Throughput (tokens/sec),"));
    }
    let sweep: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("sweep_summary.json")).unwrap())
            .unwrap();
    assert_eq!(sweep["complete"], true);
    assert_eq!(sweep["levels"].as_array().unwrap().len(), 3);
    assert!(sweep["knee"]["steps"].as_array().unwrap().len() == 2);
    // throughput grows with concurrency on the fast profile (64 sequences fit)
    assert!(out.rows[2].output_token_throughput > out.rows[0].output_token_throughput * 4.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_endpoint_fails_fast_with_a_clear_message() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let dir = tmp.path().to_str().unwrap().to_owned();
    let cli = Cli::try_parse_from([
        "kneepoint",
        "sweep",
        "--url",
        &url,
        "--model",
        "m",
        "--concurrency",
        "2",
        "--request-count",
        "5",
        "--artifact-dir",
        &dir,
    ])
    .unwrap();
    let Command::Sweep(a) = cli.command else {
        panic!()
    };
    let e = format!(
        "{:#}",
        run_sweep(&SweepSettings::resolve(&a).unwrap(), false)
            .await
            .unwrap_err()
    );
    assert!(e.contains("cannot reach") && e.contains(&url), "{e}");
    assert!(
        !tmp.path().join("concurrency_2").exists(),
        "no sweep of failures was run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_with_slas_reports_zone_and_fleet() {
    let tmp = tempfile::tempdir().unwrap();
    // Time ×4: p99 end-to-end is ~350, ~440 and ~880 ms at 16, 64 and 128 against 650 ms, so a
    // busy machine's pauses (tens of ms) are small beside the margins (~210 ms at 64; at 128 a
    // slow machine only adds latency).
    let s = settings_at(
        "4",
        &[
            "--concurrency",
            "16,64,128",
            "--request-count",
            "128",
            "--isl",
            "32",
            "--osl",
            "16",
            "--e2e-sla-ms",
            "650",
            "--peak-concurrency",
            "1000",
            "--headroom",
            "0.2",
        ],
        tmp.path(),
    );
    let out = run_sweep(&s, false).await.unwrap();
    let verdicts: Vec<Option<bool>> = out.rows.iter().map(|r| r.meets_slas).collect();
    assert_eq!(
        verdicts,
        vec![Some(true), Some(true), Some(false)],
        "{:?}",
        out.rows
    );
    assert_eq!(out.rows[2].first_breach.as_deref(), Some("e2e_sla_ms"));
    assert_eq!(out.zone.sla_breaking_point, Some(128));
    assert_eq!(out.zone.ideal_balance, Some(64));
    let fleet = out.fleet.as_ref().unwrap();
    assert_eq!(fleet.instances, 20, "ceil(1000 / (64 x 0.8))");
    let sweep: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("sweep_summary.json")).unwrap())
            .unwrap();
    assert_eq!(sweep["zone"]["ideal_balance"], 64);
    assert_eq!(sweep["fleet"]["instances"], 20);
    assert_eq!(sweep["peak"]["concurrency"], 1000.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_gives_byte_identical_inputs() {
    let run = |seed: &'static str| async move {
        let tmp = tempfile::tempdir().unwrap();
        let s = settings(
            &[
                "--concurrency",
                "2",
                "--request-count",
                "6",
                "--isl",
                "48",
                "--isl-stddev",
                "10",
                "--osl",
                "4",
                "--seed",
                seed,
                "--shared-prefix-tokens",
                "16",
            ],
            tmp.path(),
        );
        run_sweep(&s, false).await.unwrap();
        std::fs::read(tmp.path().join("concurrency_2/inputs.json")).unwrap()
    };
    let (a, b, c) = (run("7").await, run("7").await, run("8").await);
    assert_eq!(a, b, "same seed, same bytes");
    assert_ne!(a, c, "another seed, other prompts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_from_a_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d.jsonl");
    let lines: String = (0..5)
        .map(|i| {
            format!(
                "{{\"text\": \"Describe harbor number {i} in detail.\", \"output_length\": {}}}\n",
                4 + i
            )
        })
        .collect();
    std::fs::write(&data, lines).unwrap();
    let out_dir = tmp.path().join("out");
    let s = settings(
        &[
            "--concurrency",
            "2",
            "--request-count",
            "10",
            "--dataset",
            data.to_str().unwrap(),
            "--sampling",
            "sequential",
        ],
        &out_dir,
    );
    let out = run_sweep(&s, false).await.unwrap();
    let sum = &out.summaries[0];
    assert_eq!(sum.ok_count, 10);
    // output lengths 4..=8 twice each, generated exactly
    assert_eq!(sum.total_output_tokens, 2 * (4 + 5 + 6 + 7 + 8));
    assert_eq!(sum.osl_mismatches, 0);
    let inputs = std::fs::read_to_string(out_dir.join("concurrency_2/inputs.json")).unwrap();
    assert!(inputs.contains("Describe harbor number 3 in detail."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_with_injected_faults_counts_them() {
    let tmp = tempfile::tempdir().unwrap();
    let s = settings(
        &[
            "--concurrency",
            "4",
            "--request-count",
            "40",
            "--isl",
            "16",
            "--osl",
            "4",
            "--sim-fault-rate",
            "0.5",
            "--sim-faults",
            "http_503,done_without_finish",
        ],
        tmp.path(),
    );
    let out = run_sweep(&s, false).await.unwrap();
    let sum = &out.summaries[0];
    assert_eq!(sum.request_count, 40);
    assert!(
        sum.error_count > 5 && sum.error_count < 35,
        "{}",
        sum.error_count
    );
    assert_eq!(
        sum.errors_by_kind.values().sum::<usize>(),
        sum.error_count,
        "{:?}",
        sum.errors_by_kind
    );
    assert!(sum.errors_by_kind.keys().all(|k| matches!(
        k,
        kneepoint_core::ErrorKind::HttpStatus | kneepoint_core::ErrorKind::Incomplete
    )));
    let e = format!(
        "{:#}",
        SweepSettings::resolve(&{
            let Command::Sweep(a) = Cli::try_parse_from([
                "kneepoint",
                "sweep",
                "--sim-fault-rate",
                "0.1",
                "--sim-faults",
                "nope",
            ])
            .unwrap()
            .command
            else {
                panic!()
            };
            *a
        })
        .unwrap_err()
    );
    assert!(e.contains("unknown simulator fault"), "{e}");
}

/// The front recomputed by hand from the rows: a level is on it when no other level is at least
/// as fast per user and carries at least as much, one of them strictly.
fn front_by_hand(levels: &[serde_json::Value]) -> Vec<u64> {
    let xy: Vec<(u64, f64, f64, Option<f64>)> = levels
        .iter()
        .map(|l| {
            (
                l["concurrency"].as_u64().unwrap(),
                l["output_token_throughput_per_user"].as_f64().unwrap(),
                l["output_token_throughput"].as_f64().unwrap(),
                l["ttft_p50_ms"].as_f64(),
            )
        })
        .collect();
    let exact: Vec<_> = xy
        .iter()
        .filter(|(_, u, t, _)| {
            !xy.iter()
                .any(|(_, u2, t2, _)| u2 >= u && t2 >= t && (u2 > u || t2 > t))
        })
        .collect();
    // an edge under 3 % is none; between near-ties, a 25 % shorter TTFT p50 wins
    let near = |a: &(u64, f64, f64, Option<f64>), b: &(u64, f64, f64, Option<f64>)| {
        let waits_less = matches!((a.3, b.3), (Some(x), Some(y)) if x < 0.75 * y);
        a.1 >= 0.97 * b.1
            && a.2 >= 0.97 * b.2
            && (a.1 > 1.03 * b.1 || a.2 > 1.03 * b.2 || waits_less)
    };
    // kept shortest wait first (then the largest product), each unless a kept one beats it
    let mut order = exact.clone();
    order.sort_by(|a, b| {
        let w = |p: &&(u64, f64, f64, Option<f64>)| p.3.unwrap_or(f64::INFINITY);
        w(a).total_cmp(&w(b))
            .then((b.1 * b.2).total_cmp(&(a.1 * a.2)))
    });
    let mut kept: Vec<&(u64, f64, f64, Option<f64>)> = Vec::new();
    for p in order {
        if !kept.iter().any(|k| near(k, p)) {
            kept.push(p);
        }
    }
    // in the levels' order
    exact
        .iter()
        .filter(|p| kept.iter().any(|k| k.0 == p.0))
        .map(|p| p.0)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_s_pareto_front_is_the_one_computed_by_hand_and_is_plotted() {
    let tmp = tempfile::tempdir().unwrap();
    let s = settings(
        &[
            "--concurrency",
            "1,4,16,64",
            "--request-count",
            "48",
            "--isl",
            "32",
            "--osl",
            "16",
            "--tpot-sla-ms",
            "50",
        ],
        tmp.path(),
    );
    let out = run_sweep(&s, false).await.unwrap();
    let sweep: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("sweep_summary.json")).unwrap())
            .unwrap();
    let levels = sweep["levels"].as_array().unwrap();
    let points = sweep["pareto"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    assert_eq!(sweep["pareto"]["basis"], "instance");
    assert_eq!(sweep["pareto"]["per_user"], "per_request");
    let marked: Vec<u64> = points
        .iter()
        .filter(|p| p["on_front"] == true)
        .map(|p| p["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(marked, front_by_hand(levels));
    // concurrency 1 is the fastest per user, so it is on the front unless a level within
    // 3 % of its speed carries clearly more; the level that carries the most is on it
    let speed = |c: u64| {
        levels.iter().find(|l| l["concurrency"] == c).unwrap()["output_token_throughput_per_user"]
            .as_f64()
            .unwrap()
    };
    assert!(
        marked.contains(&1) || marked.iter().any(|&c| speed(c) >= 0.97 * speed(1)),
        "{marked:?}"
    );
    let most = levels
        .iter()
        .max_by(|a, b| {
            let t = |l: &serde_json::Value| l["output_token_throughput"].as_f64().unwrap();
            t(a).total_cmp(&t(b))
        })
        .unwrap()["concurrency"]
        .as_u64()
        .unwrap();
    assert!(marked.contains(&most), "{marked:?} lacks {most}");
    // every point carries its redraw share, and the outcome has the same front
    assert!(points.iter().all(|p| p["front_probability"].is_f64()));
    assert_eq!(out.pareto.as_ref().unwrap().front().len(), marked.len());
    let svg = std::fs::read_to_string(tmp.path().join("plots/pareto.svg")).unwrap();
    assert!(
        svg.contains("TPOT SLA: at least 20 tokens/s per user"),
        "no SLA line"
    );
    let html = std::fs::read_to_string(tmp.path().join("report.html")).unwrap();
    assert!(html.contains("Pareto front (output tokens/s per instance"));
}
