//! Goodput (issue 31): `--goodput` SLOs judged per request in every level's files, and
//! `search --objective goodput` finding the highest concurrency whose share of requests meeting
//! them reaches the attainment, checked against each probe's own records.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use clap::Parser;
use kneepoint_cli::{run_search, run_sweep, Cli, Command, SearchSettings};
use serde_json::Value;

mod common;

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The share of a level's measured requests that failed or took longer than `limit_ms`, from
/// its `profile_export.jsonl`: the truth the summaries and verdicts must agree with.
fn missed_share(level_dir: &Path, limit_ms: f64) -> f64 {
    let text = std::fs::read_to_string(level_dir.join("profile_export.jsonl")).unwrap();
    let (mut n, mut missed) = (0usize, 0usize);
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["metadata"]["benchmark_phase"] == "warmup" {
            continue;
        }
        n += 1;
        let latency = v["metrics"]["request_latency"]["value"].as_f64();
        if !v["error"].is_null() || latency.is_none_or(|l| l > limit_ms) {
            missed += 1;
        }
    }
    assert!(n > 0, "{}", level_dir.display());
    missed as f64 / n as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_goodput_search_answers_where_the_records_meet_the_attainment() {
    // fast profile at time x4: 64 slots, 16 output tokens take ~360 ms; past 64 in flight
    // requests queue and their latency passes 600 ms. 95 % of requests within 600 ms.
    let tmp = tempfile::tempdir().unwrap();
    let args = [
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
        "--search-max-iterations",
        "12",
        "--goodput",
        "request_latency:600",
        "--objective",
        "goodput",
        "--attainment",
        "0.95",
    ];
    let s = common::fast_search_at("4", &args, tmp.path()).unwrap();
    let out = run_search(&s, false).await.unwrap();
    let o = &out.outcome;
    let answer = o.feasible_max.expect("an answer");
    let fail = o.infeasible_min.expect("a failing level");
    assert!(answer < fail && (4..=256).contains(&answer), "{o:#?}");
    assert_eq!(o.first_breach.as_deref(), Some("slo_attainment_0.95"));
    let hist = read(&tmp.path().join("search_history.json"));
    assert_eq!(hist["recipe"], "max-goodput-under-slo");
    let probes = hist["probes"].as_array().unwrap();
    // every verdict is the records' own: at most 5 % missed 600 ms (or failed)
    for ((r, summary), p) in out.history.iter().zip(&out.summaries).zip(probes) {
        let dir = tmp.path().join(p["dir"].as_str().unwrap());
        let truth = missed_share(&dir, 600.0);
        let c = r.probe.concurrency;
        assert!(
            (summary.slo_miss_rate.unwrap() - truth).abs() < 1e-12,
            "{c}"
        );
        assert_eq!(
            r.pass,
            truth <= 0.05 + 1e-12,
            "concurrency {c}: missed {truth}"
        );
        let aiperf = read(&dir.join("profile_export_aiperf.json"));
        assert!((aiperf["slo_miss_rate"]["avg"].as_f64().unwrap() - truth).abs() < 1e-12);
        assert_eq!(aiperf["goodput"]["unit"], "requests/sec");
        assert_eq!(
            aiperf["kneepoint"]["goodput_slo"]["request_latency_ms"],
            600.0
        );
        // goodput counts the requests that met the SLO over the level's time
        let met = (1.0 - truth) * summary.request_count as f64;
        let rate = met / summary.benchmark_duration_s;
        assert!(
            (summary.goodput.unwrap() - rate).abs() <= 1e-9 * rate.max(1.0),
            "{c}"
        );
    }
    // the answer's level met the attainment and the failing one did not (their last probes)
    let last = |c: u32| {
        out.history
            .iter()
            .rposition(|r| r.probe.concurrency == c)
            .unwrap()
    };
    assert!(out.history[last(answer)].pass && !out.history[last(fail)].pass);
    // the same folder renders, titled for goodput
    kneepoint_cli::run_report(tmp.path(), false).unwrap();
    let html = std::fs::read_to_string(tmp.path().join("report.html")).unwrap();
    assert!(html.contains("Max concurrency under goodput SLOs"));
    assert!(html.contains("met SLOs"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_reports_goodput_per_level_and_an_sla_can_name_the_miss_rate() {
    let tmp = tempfile::tempdir().unwrap();
    let s = common::fast_sweep_at(
        "4",
        "16",
        &[
            "--concurrency",
            "4,256",
            "--request-count",
            "256",
            "--goodput",
            "time_to_first_token:200 request_latency:600",
            "--sla",
            "slo_miss_rate:avg:le:0.05",
        ],
        tmp.path(),
    )
    .unwrap();
    let out = run_sweep(&s, false).await.unwrap();
    let rows = &out.rows;
    assert_eq!(rows.len(), 2);
    for r in rows {
        let miss = r.slo_miss_rate.unwrap();
        assert!(r.goodput.unwrap() <= r.request_throughput + 1e-9);
        assert_eq!(r.meets_slas, Some(miss <= 0.05));
    }
    // 4 in flight on 64 slots meets both SLOs; 256 queues for most of its requests
    assert!(rows[0].slo_miss_rate.unwrap() <= 0.05, "{:?}", rows[0]);
    assert!(rows[1].slo_miss_rate.unwrap() > 0.5, "{:?}", rows[1]);
    let doc = read(&tmp.path().join("sweep_summary.json"));
    assert!(doc["levels"][0]["goodput"].is_number());
}

fn search_args(extra: &[&str]) -> anyhow::Result<SearchSettings> {
    let mut args = vec!["kneepoint", "search", "--sim-profile", "fast"];
    args.extend_from_slice(extra);
    let Command::Search(a) = Cli::try_parse_from(args)?.command else {
        panic!("not a search")
    };
    Ok(SearchSettings::resolve(&a)?)
}

#[test]
fn goodput_settings_that_cannot_be_measured_are_refused_before_anything_runs() {
    let err = |extra: &[&str]| search_args(extra).unwrap_err().to_string();
    assert!(err(&["--objective", "goodput"]).contains("--goodput"));
    assert!(err(&[
        "--objective",
        "goodput",
        "--goodput",
        "ttft:100",
        "--attainment",
        "1.5"
    ])
    .contains("at most 1"));
    assert!(err(&["--e2e-sla-ms", "100", "--attainment", "0.9"]).contains("--objective goodput"));
    assert!(err(&["--objective", "fastest", "--goodput", "ttft:100"]).contains("sla or goodput"));
    assert!(err(&[
        "--goodput",
        "ttft:100",
        "--streaming",
        "false",
        "--objective",
        "goodput"
    ])
    .contains("need streaming"));
    assert!(err(&["--sla", "slo_miss_rate:avg:le:0.01"]).contains("per-request SLOs"));
    assert!(err(&["--objective", "goodput", "--goodput", "tokens:5"])
        .contains("not a per-request latency"));
    // the default attainment is 0.99: a miss rate of at most 1 %
    let s = search_args(&["--objective", "goodput", "--goodput", "e2e:5000"]).unwrap();
    let sla = s
        .search
        .slas
        .iter()
        .find(|s| s.name.starts_with("slo_attainment"))
        .unwrap();
    assert_eq!((sla.metric.name(), sla.threshold), ("slo_miss_rate", 0.01));
}
