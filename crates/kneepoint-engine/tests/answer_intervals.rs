//! The search's interval on the boundary, on the calibrated simulator's engine in virtual time
//! (what a perfect client would record; each probe a fresh run with a seed of its own), read
//! through the level summaries as the CLI reads them. The noise is the workload's: output
//! lengths drawn around 256 tokens, narrowly (±10 %) or widely (±60 %), so that requests
//! differ and each level's p99 is known only to within its sampling spread. The truth is the
//! boundary of the same engine and workload, levels as long as the search's, with the median of
//! nine seeds at each. A noisier simulator must give a wider interval, and the interval must
//! cover the truth in most seeds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kneepoint_core::{Phase, RequestRecord};
use kneepoint_metrics::{GoodputSlo, LevelSummary};
use kneepoint_planner::{Measurement, Metric, SearchConfig, SearchPlanner, Sla, Stat};
use kneepoint_sim::{predict_closed_loop_with, SeqSpec, SimProfile};

const SLA_MS: f64 = 60_000.0;
const MAX: u32 = 1024;

/// Output lengths: 256 ± `spread` × 256, uniform, a deterministic function of (seed, request).
fn spec(spread: f64, seed: u64) -> impl Fn(u32) -> SeqSpec {
    move |i| {
        let mut z = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(i);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let u = ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64;
        SeqSpec {
            prompt_tokens: 1024,
            output_tokens: (256.0 * (1.0 + spread * (2.0 * u - 1.0))).round() as u32,
        }
    }
}

/// One level as a client would have recorded it.
fn level(c: u32, requests: u32, spread: f64, seed: u64) -> LevelSummary {
    let mut profile = SimProfile::calibrated();
    profile.seed = seed;
    let r = predict_closed_loop_with(&profile, c, requests, spec(spread, seed));
    let ns = |ms: f64| (ms * 1e6) as u64;
    let mut records: Vec<RequestRecord> = r
        .timeline_ms
        .iter()
        .enumerate()
        .map(|(i, [start, first, end])| {
            let mut rec = RequestRecord::new(i as u64, Phase::Profiling);
            rec.start_ns = ns(*start);
            rec.chunk_ns = vec![ns(*first), ns(*end)];
            rec.end_ns = ns(*end);
            rec
        })
        .collect();
    records.sort_by_key(|r| r.start_ns);
    LevelSummary::from_records(c, &records, &GoodputSlo::default())
}

fn p99(s: &LevelSummary) -> f64 {
    s.value(Metric::RequestLatency, Stat::P99).unwrap()
}

/// The boundary the search measures towards: the highest concurrency whose median p99, over
/// nine seeds of levels as long as the search's (1,024 requests, at least one per slot), holds.
/// (A short level's p99 carries its first wave's burst, so a long level's steady state would
/// be another, higher, boundary.)
fn truth(spread: f64) -> u32 {
    let median_p99 = |c: u32| {
        let mut v: Vec<f64> = (0..9)
            .map(|s| p99(&level(c, 1024u32.max(c), spread, 900 + s)))
            .collect();
        v.sort_by(f64::total_cmp);
        v[4]
    };
    let (mut lo, mut hi) = (16u32, MAX);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if median_p99(mid) <= SLA_MS {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

fn search(spread: f64, seed: u64) -> kneepoint_planner::Outcome {
    let mut cfg = SearchConfig::new(vec![Sla::e2e_ms(SLA_MS).unwrap()]);
    cfg.concurrency_max = MAX;
    let mut s = SearchPlanner::new(cfg).unwrap();
    let mut k = 0;
    while let Some(p) = s.next_probe() {
        k += 1;
        let m = Measurement::from(&level(
            p.concurrency,
            p.request_count,
            spread,
            seed * 100 + k,
        ));
        s.observe(p.concurrency, &m).unwrap();
    }
    s.outcome()
}

#[test]
fn the_boundary_interval_covers_the_simulator_s_truth_and_widens_with_noise() {
    let seeds = 8u64;
    let mut report = Vec::new();
    for spread in [0.1, 0.6] {
        let t = truth(spread);
        let (mut covered, mut widths) = (0, Vec::new());
        for seed in 1..=seeds {
            let o = search(spread, seed);
            let i = o.interval.expect("an interval");
            covered += u32::from(i.covers(t));
            let (lo, hi) = (i.low.unwrap_or(0), i.high.unwrap_or(MAX));
            widths.push(f64::from(hi.saturating_sub(lo)) / f64::from(t));
            eprintln!(
                "spread {spread} seed {seed}: answer {:?}, {i}, truth {t}",
                o.feasible_max
            );
        }
        let mean = widths.iter().sum::<f64>() / widths.len() as f64;
        report.push((spread, t, covered, mean));
    }
    eprintln!("(spread, truth, covered of {seeds}, mean relative width): {report:?}");
    for (spread, _, covered, _) in &report {
        assert!(
            *covered >= 6,
            "spread {spread}: {covered} of {seeds} covered"
        );
    }
    assert!(report[1].3 > report[0].3, "{report:?}");
}
