//! `sweep --isl A,B,...` (issue 31): one level per length at one concurrency, TTFT against the
//! prompt's length, and a prefill rate that matches the simulator's own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use kneepoint_cli::{run_length_sweep_with, Cli, Command, SweepSettings};
use kneepoint_runner::CancelToken;
use serde_json::Value;

fn settings(extra: &[&str]) -> anyhow::Result<SweepSettings> {
    let mut args = vec!["kneepoint", "sweep", "--sim-profile", "fast"];
    args.extend_from_slice(extra);
    let Command::Sweep(a) = Cli::try_parse_from(args)?.command else {
        panic!("not a sweep")
    };
    Ok(SweepSettings::resolve(&a)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prefill_rate_is_the_simulator_s_and_the_curves_are_reported() {
    // The fast profile prefills a lone prompt of n ≤ 4,096 tokens in one engine step of
    // 5 ms + 5 µs × n model time: at time × 10, TTFT grows 50 µs of wall time per prompt
    // token, a prefill rate of 20,000 tokens/s. Between 128 and 4,000 tokens that is 194 ms,
    // against a millisecond or two of client, loopback and tokenizing time that grows little
    // with the prompt (measured at time × 10: 19,962 tokens/s).
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lengths");
    let s = settings(&[
        "--sim-time-scale",
        "10",
        "--isl",
        "128,1024,2048,4000",
        "--osl",
        "8",
        "--request-count",
        "16",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ])
    .unwrap();
    assert_eq!(
        s.plan.levels()[0].concurrency,
        1,
        "a length sweep's default"
    );
    let out = run_length_sweep_with(&s, false, &CancelToken::new())
        .await
        .unwrap();
    assert_eq!(out.rows.len(), 4);
    for r in &out.rows {
        // the built-in tokenizer makes prompts of exactly the length asked for
        assert_eq!(r.input_tokens_mean, Some(f64::from(r.isl)), "{r:?}");
        assert_eq!((r.osl, r.request_count, r.error_rate), (8, 16, 0.0));
        assert!(dir.join(&r.dir).join("profile_export.jsonl").is_file());
    }
    // TTFT grows with the prompt
    let ttft: Vec<f64> = out.rows.iter().map(|r| r.ttft_p50_ms.unwrap()).collect();
    assert!(ttft.windows(2).all(|w| w[0] < w[1]), "{ttft:?}");
    let f = out.prefill.as_ref().unwrap();
    let rate = f.rate_tokens_per_s.unwrap();
    assert!((rate / 20_000.0 - 1.0).abs() < 0.05, "{f:?}");
    let [lo, hi] = f.rate_interval.unwrap();
    assert!(lo < hi && lo > 0.5 * rate && hi < 2.0 * rate, "{f:?}");
    assert!(
        f.r_squared > 0.95 && (f.lengths, f.requests) == (4, 64),
        "{f:?}"
    );
    // the document, the page and its curves
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.join("length_sweep.json")).unwrap()).unwrap();
    assert_eq!(doc["recipe"], "length-sweep");
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["rows"][3]["isl"], 4000);
    assert_eq!(doc["prefill"]["rate_tokens_per_s"].as_f64(), Some(rate));
    let level: Value = serde_json::from_slice(
        &std::fs::read(dir.join("isl_4000_osl_8/profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(level["input_config"]["length"]["isl"], 4000);
    // the seed its prompts were drawn with: its own, not the first length's
    let seeds: Vec<&Value> = doc["settings"]["workload"]["lengths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["seed"])
        .collect();
    assert_eq!(level["input_config"]["length"]["seed"], *seeds[3]);
    assert_ne!(seeds[0], seeds[3]);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Input-length sweep") && html.contains("TTFT against the prompt"));
    assert!(dir.join("plots/lengths.svg").is_file());
    // `kneepoint report` makes the document and the page again, byte for byte
    let (doc_before, html_before) = (
        std::fs::read(dir.join("length_sweep.json")).unwrap(),
        html.into_bytes(),
    );
    std::fs::remove_file(dir.join("report.html")).unwrap();
    kneepoint_cli::run_report(&dir, false).unwrap();
    assert_eq!(
        std::fs::read(dir.join("length_sweep.json")).unwrap(),
        doc_before
    );
    assert_eq!(std::fs::read(dir.join("report.html")).unwrap(), html_before);
}

#[test]
fn length_lists_that_cannot_make_a_length_sweep_are_refused() {
    let err = |extra: &[&str]| settings(extra).unwrap_err().to_string();
    assert!(err(&["--isl", "128,1024", "--concurrency", "1,4"]).contains("one concurrency"));
    assert!(err(&["--isl", "128,1024,4096", "--osl", "8,16"]).contains("same length"));
    assert!(err(&["--isl", "128.5,1024"]).contains("whole number"));
    assert!(err(&["--isl", "0,1024"]).contains("at least 1 token"));
    assert!(err(&["--isl", "128,128"]).contains("twice"));
    assert!(err(&["--isl", "128,1024", "--mix", "100:10:1"]).contains("mixture"));
    assert!(err(&["--isl", "128,1024", "--shared-prefix-tokens", "64"]).contains("shared prefix"));
    assert!(err(&["--isl", "128,1024", "--streaming", "false"]).contains("streaming"));
    assert!(err(&["--isl", "128,1024", "--e2e-sla-ms", "100"]).contains("judges no SLA"));
    assert!(err(&["--isl", "128,1024", "--peak-rps", "10"]).contains("no fleet"));
    // pairs in order, or a single value with each of the other list's
    let s = settings(&["--isl", "128,1024", "--osl", "16,64", "--concurrency", "2"]).unwrap();
    let points = s.common.lengths.unwrap();
    assert_eq!((points[1].isl, points[1].osl), (1024, 64));
    assert_eq!(s.plan.levels()[0].request_count, 32);
    let s = settings(&["--osl", "16,256"]).unwrap();
    let points = s.common.lengths.unwrap();
    assert_eq!(
        (points[0].isl, points[1].isl, points[1].osl),
        (1024, 1024, 256)
    );
    // a search runs one workload
    let Command::Search(a) = Cli::try_parse_from([
        "kneepoint",
        "search",
        "--isl",
        "128,1024",
        "--e2e-sla-ms",
        "100",
    ])
    .unwrap()
    .command
    else {
        panic!()
    };
    let e = kneepoint_cli::SearchSettings::resolve(&a)
        .unwrap_err()
        .to_string();
    assert!(e.contains("length sweep"), "{e}");
}
