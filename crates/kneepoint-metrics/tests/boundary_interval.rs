//! The search's interval on the boundary, measured end to end through the level summaries: a
//! model server whose request latencies are log-normal around a median that grows with
//! concurrency once its 256 slots are full (Little's law), so the true p99 at any concurrency
//! is known exactly. Each probe draws its own requests; the summary's block-bootstrap spread
//! reaches the planner through `Measurement::from`. A noisier server (more spread between
//! requests) must give a wider interval, and the interval must cover the true boundary in most
//! seeds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kneepoint_core::{Phase, RequestRecord};
use kneepoint_metrics::{GoodputSlo, LevelSummary};
use kneepoint_planner::{Measurement, SearchConfig, SearchPlanner, Sla};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

const SLOTS: f64 = 256.0;
const SLA_MS: f64 = 60_000.0;

/// The median latency at concurrency `c`, ms.
fn median_ms(c: f64) -> f64 {
    20_000.0 * (c / SLOTS).max(1.0)
}

/// The true boundary: the highest concurrency whose true p99 meets the SLA.
fn truth(sigma: f64) -> u32 {
    let p99 = |c: f64| median_ms(c) * (2.326 * sigma).exp();
    (1..4096)
        .take_while(|c| p99(f64::from(*c)) <= SLA_MS)
        .last()
        .unwrap()
}

fn level(c: u32, n: u32, sigma: f64, rng: &mut rand::rngs::StdRng) -> LevelSummary {
    let records: Vec<RequestRecord> = (0..n)
        .map(|i| {
            let z: f64 = rng.sample(StandardNormal);
            let ms = median_ms(f64::from(c)) * (sigma * z).exp();
            let mut r = RequestRecord::new(u64::from(i), Phase::Profiling);
            r.start_ns = u64::from(i) * 1_000_000;
            r.chunk_ns = vec![
                r.start_ns + (ms * 1e5) as u64,
                r.start_ns + (ms * 1e6) as u64,
            ];
            r.end_ns = r.start_ns + (ms * 1e6) as u64;
            r.output_tokens = Some(256);
            r
        })
        .collect();
    LevelSummary::from_records(c, &records, &GoodputSlo::default())
}

fn search(sigma: f64, seed: u64) -> kneepoint_planner::Outcome {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let slas = vec![Sla::e2e_ms(SLA_MS).unwrap()];
    let mut s = SearchPlanner::new(SearchConfig::new(slas)).unwrap();
    while let Some(p) = s.next_probe() {
        let m = Measurement::from(&level(p.concurrency, p.request_count, sigma, &mut rng));
        s.observe(p.concurrency, &m).unwrap();
    }
    s.outcome()
}

#[test]
fn the_boundary_interval_covers_the_truth_and_widens_with_noise() {
    let seeds = 12u64;
    let mut report = Vec::new();
    for sigma in [0.1, 0.4] {
        let t = truth(sigma);
        let (mut covered, mut widths, mut within) = (0, Vec::new(), 0);
        for seed in 0..seeds {
            let o = search(sigma, seed);
            let i = o.interval.expect("an interval");
            covered += u32::from(i.covers(t));
            let a = o.feasible_max.unwrap();
            within += u32::from((f64::from(a) / f64::from(t) - 1.0).abs() <= 0.1);
            let (lo, hi) = (i.low.unwrap_or(0), i.high.unwrap_or(4096));
            widths.push(f64::from(hi - lo) / f64::from(t));
            eprintln!("sigma {sigma} seed {seed}: answer {a}, {i}, truth {t}");
        }
        let mean = widths.iter().sum::<f64>() / widths.len() as f64;
        report.push((sigma, covered, within, mean));
    }
    eprintln!("(sigma, covered, answers within 10 %, mean relative width): {report:?}");
    for (sigma, covered, within, _) in &report {
        // a 90 % interval: most seeds cover the truth, and the answers stay near it
        assert!(*covered >= 9, "sigma {sigma}: {covered} of {seeds} covered");
        assert!(
            *within >= 9,
            "sigma {sigma}: {within} of {seeds} within 10 %"
        );
    }
    assert!(report[1].3 > report[0].3, "{report:?}");
}
