//! The planner's search run against the calibrated engine model in virtual time (what a perfect
//! client would measure): the source documents' recipe, with and without a TTFT SLA.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kneepoint_planner::{Measurement, Metric, SearchConfig, SearchPlanner, Sla, Stat};
use kneepoint_sim::{predict_closed_loop, SeqSpec, SimProfile};

fn p(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

fn search(slas: Vec<Sla>) -> (Option<u32>, Vec<u32>) {
    let profile = SimProfile::calibrated();
    let spec = SeqSpec {
        prompt_tokens: 1024,
        output_tokens: 256,
    };
    let mut s = SearchPlanner::new(SearchConfig::new(slas)).unwrap();
    let mut probes = Vec::new();
    while let Some(probe) = s.next_probe() {
        let r = predict_closed_loop(&profile, probe.concurrency, probe.request_count, spec);
        let m = Measurement::new(r.output_tokens_per_s)
            .with(Metric::RequestLatency, Stat::P99, p(&r.latency_ms, 0.99))
            .with(Metric::TimeToFirstToken, Stat::P95, p(&r.ttft_ms, 0.95));
        s.observe(probe.concurrency, &m).unwrap();
        probes.push(probe.concurrency);
    }
    (s.outcome().feasible_max, probes)
}

#[test]
fn a_ttft_sla_lowers_the_answer_as_in_the_source() {
    let (e2e_only, p1) = search(vec![Sla::e2e_ms(50_000.0).unwrap()]);
    let (with_ttft, p2) = search(vec![
        Sla::e2e_ms(50_000.0).unwrap(),
        Sla::ttft_ms(1500.0).unwrap(),
    ]);
    eprintln!("e2e only: {e2e_only:?} via {p1:?}\nwith TTFT: {with_ttft:?} via {p2:?}");
    let (a, b) = (e2e_only.unwrap(), with_ttft.unwrap());
    // The source: 320 (e2e alone) and 80 (with TTFT). The engine model lands in the same places.
    assert!((256..=512).contains(&a), "{a}");
    assert!((64..128).contains(&b), "{b}");
    assert!(b * 2 < a);
    assert!(p1.len() <= 10 && p2.len() <= 10);
}
