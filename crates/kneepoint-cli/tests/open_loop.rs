//! Open-loop arrivals against the simulator: latency from the intended start against latency
//! from the actual start, with and without a stalling server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use kneepoint_cli::{run_sweep, SweepSettings};
use kneepoint_core::{Metric, Stat};
use kneepoint_metrics::export::read_jsonl;
use kneepoint_metrics::LevelSummary;

fn sweep(extra: &[&str], dir: &Path) -> anyhow::Result<SweepSettings> {
    common::fast_sweep("16", extra, dir)
}

fn p50(s: &LevelSummary, m: &str) -> f64 {
    s.value(m.parse().unwrap(), Stat::P50).unwrap()
}

/// A stalling server: requests queued behind stalled ones are sent late. Their latency from the
/// actual start looks normal; from the intended start it carries the wait, as users would feel.
#[test]
fn a_stall_shows_in_latency_from_the_intended_start() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let level = [
        "--request-rate",
        "40",
        "--max-in-flight",
        "8",
        "--request-count",
        "120",
    ];
    let mut runs = Vec::new();
    for faults in [
        &[][..],
        &[
            "--sim-fault-rate",
            "0.2",
            "--sim-faults",
            "stall",
            "--sim-stall-ms",
            "600",
        ][..],
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut args = level.to_vec();
        args.extend_from_slice(faults);
        let out = rt
            .block_on(run_sweep(&sweep(&args, tmp.path()).unwrap(), false))
            .unwrap();
        assert_eq!(out.request_rates, vec![40.0]);
        let records = read_jsonl(&tmp.path().join("request_rate_40/profile_export.jsonl")).unwrap();
        assert_eq!(records.len(), 120);
        assert!(records.iter().all(|r| r.intended_start_ns.is_some()));
        // The report is written, with per-level plots and no curve over concurrency.
        let html = std::fs::read_to_string(tmp.path().join("report.html")).unwrap();
        assert!(html.contains("request_rate_40"));
        assert!(!tmp.path().join("plots/throughput_vs_latency.svg").exists());
        let json = tmp
            .path()
            .join("request_rate_40/profile_export_aiperf.json");
        let before = std::fs::read(&json).unwrap();
        kneepoint_cli::run_report(tmp.path(), false).unwrap();
        assert_eq!(std::fs::read(&json).unwrap(), before);
        runs.push(out.summaries[0].clone());
    }
    let (calm, stalled) = (&runs[0], &runs[1]);
    let show = |s: &LevelSummary| {
        format!(
            "p50 latency from actual start {:.1} ms, from intended start {:.1} ms, p99 lag {:.1} ms",
            p50(s, "request_latency"),
            p50(s, "request_latency_from_schedule"),
            s.value(Metric::ScheduleLag, Stat::P99).unwrap()
        )
    };
    println!("calm server:     {}", show(calm));
    println!("stalling server: {}", show(stalled));
    // Calm: the client keeps its schedule; both latencies agree.
    let gap = p50(calm, "request_latency_from_schedule") - p50(calm, "request_latency");
    assert!(gap < 10.0, "calm gap {gap}");
    // Stalling: most requests are not stalled, so latency from the actual start barely moves…
    assert!(p50(stalled, "request_latency") < 1.5 * p50(calm, "request_latency"));
    // …while latency from the intended start carries the queueing the stalls caused.
    assert!(
        p50(stalled, "request_latency_from_schedule") > 2.0 * p50(stalled, "request_latency"),
        "{}",
        show(stalled)
    );
    assert!(
        stalled.warnings.iter().any(|w| w.contains("fell behind")),
        "{:?}",
        stalled.warnings
    );
    let lag = |s: &LevelSummary| s.value(Metric::ScheduleLag, Stat::P99).unwrap();
    assert!(
        lag(calm) * 10.0 < lag(stalled),
        "{} vs {}",
        lag(calm),
        lag(stalled)
    );
}

#[test]
fn bad_open_loop_settings_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    for (args, want) in [
        (
            &["--request-rate", "0"][..],
            "request_rate must be positive",
        ),
        (&["--max-in-flight", "4"][..], "need request_rate"),
        (
            &["--request-rate", "5", "--arrival", "weibull"][..],
            "possible values: poisson, constant, gamma",
        ),
        (
            &[
                "--request-rate",
                "5",
                "--arrival",
                "gamma",
                "--burstiness",
                "0",
            ][..],
            "burstiness must be a positive number",
        ),
        (
            &["--request-rate", "5", "--max-in-flight", "0"][..],
            "max_in_flight must be at least 1",
        ),
        (
            &["--request-rate", "5", "--ramp-up-s", "1"][..],
            "ramp_up_s spreads a closed loop",
        ),
        (&["--ramp-up-s=-1"][..], "ramp_up_s must be between"),
    ] {
        let e = sweep(args, tmp.path()).unwrap_err();
        assert!(format!("{e:#}").contains(want), "{args:?}: {e:#}");
    }
}

/// A trace replayed twice as fast: each request is meant to start at half its recorded time.
#[test]
fn a_trace_replays_at_its_recorded_times_sped_up() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace.jsonl");
    let lines: String = (0..20)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": 64, \"output_length\": 8, \"hash_ids\": [{}]}}\n",
                i * 100 + if i % 3 == 0 { 7 } else { 0 },
                i % 4
            )
        })
        .collect();
    std::fs::write(&trace, lines).unwrap();
    let out_dir = tmp.path().join("out");
    let s = sweep(
        &[
            "--dataset",
            trace.to_str().unwrap(),
            "--replay-speedup",
            "2",
            "--warmup-requests",
            "2",
        ],
        &out_dir,
    )
    .unwrap();
    let out = rt.block_on(run_sweep(&s, false)).unwrap();
    assert_eq!(out.summaries[0].request_count, 18);
    let mut records = read_jsonl(&out_dir.join("trace_replay_x2/profile_export.jsonl")).unwrap();
    records.sort_by_key(|r| r.intended_start_ns);
    // Records 2..20 of the trace (after 2 warm-up ones), relative to record 2, halved.
    for (k, r) in records.iter().enumerate() {
        let i = (k + 2) as u64;
        let recorded_ms = i * 100 + if i.is_multiple_of(3) { 7 } else { 0 };
        let want = (recorded_ms - 200) * 1_000_000 / 2;
        let got = r.intended_start_ns.unwrap();
        assert_eq!(got, want, "record {i}");
        // Sent on time: within 250 ms of the intended start, a busy machine's timer slack. A
        // replay at the recorded speed (not ×2) would be 850 ms late by record 19.
        assert!(
            r.start_ns.saturating_sub(got) < 250_000_000,
            "record {i} late"
        );
    }
    for (args, want) in [
        (
            &["--replay-speedup", "2"][..],
            "needs --dataset with a trace",
        ),
        (
            &["--replay-speedup", "2", "--request-rate", "3"][..],
            "does not combine",
        ),
    ] {
        let e = match sweep(args, &out_dir) {
            Ok(s) => rt.block_on(run_sweep(&s, false)).unwrap_err(),
            Err(e) => e,
        };
        assert!(format!("{e:#}").contains(want), "{args:?}: {e:#}");
    }
}

/// BurstGPT's CSV (issue 31) replays like a trace: seconds become milliseconds, each prompt has
/// the row's request tokens, the rows the original service failed are left out.
#[test]
fn a_burstgpt_csv_replays_at_its_recorded_times() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("burst.csv");
    let mut text =
        String::from("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n");
    for i in 0..8u32 {
        // every fourth row failed in the original service: no response tokens
        let out = if i % 4 == 3 { 0 } else { 4 + i };
        text.push_str(&format!(
            "{}.5,ChatGPT,{},{out},0,Conversation log\n",
            i / 4,
            40 + i
        ));
    }
    std::fs::write(&csv, text).unwrap();
    let out_dir = tmp.path().join("out");
    let s = sweep(
        &["--dataset", csv.to_str().unwrap(), "--replay-speedup", "4"],
        &out_dir,
    )
    .unwrap();
    let out = rt.block_on(run_sweep(&s, false)).unwrap();
    assert_eq!(
        out.summaries[0].request_count, 6,
        "two failed rows left out"
    );
    let mut records = read_jsonl(&out_dir.join("trace_replay_x4/profile_export.jsonl")).unwrap();
    // rows of one second start together: ordered by their (distinct) prompt lengths
    records.sort_by_key(|r| (r.intended_start_ns, r.input_tokens));
    let kept: Vec<u32> = (0..8).filter(|i| i % 4 != 3).collect();
    for (r, i) in records.iter().zip(&kept) {
        // rows 0..2 at 0.5 s, rows 4..6 at 1.5 s: one second apart, four times as fast
        let want_ms = if *i < 4 { 0 } else { 250 };
        assert_eq!(r.intended_start_ns.unwrap(), want_ms * 1_000_000, "row {i}");
        assert_eq!(r.input_tokens, Some(40 + i), "row {i}");
        assert_eq!(r.requested_output_tokens, Some(4 + i), "row {i}");
    }
}
