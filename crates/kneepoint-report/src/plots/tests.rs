//! Plot tests: each plot draws, holds its marks and survives empty or odd data.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;
use kneepoint_core::{ErrorKind, ErrorRecord};

fn curve() -> Curve {
    Curve {
        name: "sim".into(),
        points: [
            (16, 500.0, 8.0),
            (64, 1400.0, 12.0),
            (256, 2800.0, 28.0),
            (1024, 2790.0, 98.0),
        ]
        .iter()
        .map(|&(c, t, p99)| CurvePoint {
            concurrency: c,
            throughput: t,
            e2e_p50_ms: Some(p99 * 600.0),
            e2e_p90_ms: Some(p99 * 900.0),
            e2e_p99_ms: Some(p99 * 1000.0),
            meets_slas: Some(c < 1024),
        })
        .collect(),
        knee: Some(256),
        chosen: Some(256),
    }
}

fn record(i: u64, ok: bool) -> RequestRecord {
    {
        let mut built = RequestRecord::new(i, Phase::Profiling);
        built.x_request_id = None;
        built.worker = 0;
        built.origin_unix_ns = 0;
        built.start_ns = i * 10_000_000;
        built.response_ns = None;
        built.chunk_ns = vec![i * 10_000_000 + (20 + i % 7) * 1_000_000];
        built.first_content_ns = None;
        built.end_ns = i * 10_000_000 + 90_000_000;
        built.input_tokens = None;
        built.server_input_tokens = None;
        built.output_tokens = Some(1);
        built.output_tokens_source = None;
        built.client_output_tokens = None;
        built.output_bytes = 0;
        built.requested_output_tokens = None;
        built.finish_reason = None;
        built.error = (!ok).then(|| ErrorRecord {
            kind: ErrorKind::Timeout,
            code: None,
            message: "t".into(),
        });
        built.attempts = 1;
        built.intended_start_ns = None;
        built
    }
}

#[test]
fn every_plot_is_an_svg_with_its_marks() {
    let c = curve();
    let tl = throughput_vs_latency(std::slice::from_ref(&c), Some(50_000.0)).unwrap();
    assert!(tl.starts_with("<svg"));
    assert!(tl.contains("p99 latency SLA 50 s"), "{tl}");
    assert!(tl.contains(">\n1024\n<") || tl.contains("1024"));
    let lp = latency_percentiles(&c).unwrap();
    assert!(lp.contains("p90"));
    let records: Vec<RequestRecord> = (0..50).map(|i| record(i, i % 10 != 3)).collect();
    let tt = ttft_timeline(&records, "concurrency 4").unwrap();
    assert!(tt.contains("failed (5)"));
    let h = ttft_histogram(&records, "concurrency 4").unwrap();
    assert!(h.contains("p50"));
    // Deterministic: the same input draws the same bytes.
    assert_eq!(h, ttft_histogram(&records, "concurrency 4").unwrap());
}

#[test]
fn ticks_read_well() {
    assert_eq!(tick(60000.0), "60000");
    assert_eq!(tick(12_500_000.0), "12.5M");
    assert_eq!(tick(10_000_000.0), "10M");
    assert_eq!(tick(12.0), "12");
    assert_eq!(tick(12.5), "12.5");
    assert_eq!(tick(0.25), "0.25");
    assert_eq!(tick(0.5), "0.5");
    assert_eq!(tick(0.0), "0");
    assert_eq!(tick(0.005), "0.005");
}

#[test]
fn empty_inputs_still_draw() {
    assert!(throughput_vs_latency(&[], None)
        .unwrap()
        .starts_with("<svg"));
    assert!(latency_percentiles(&Curve::default()).is_ok());
    assert!(ttft_timeline(&[], "x").is_ok());
    assert!(ttft_histogram(&[], "x").is_ok());
}

/// Issue 47: a candidate has one colour in every plot, whatever order each lists them in.
#[test]
fn one_candidate_one_colour() {
    let a = super::colour_of(&["slow", "fast"], "fast");
    let b = super::colour_of(&["fast", "slow"], "fast");
    assert_eq!(a, b);
    assert_ne!(a, super::colour_of(&["fast", "slow"], "slow"));
}
