//! Evaluation harness: the planner's search against plain doubling + bisection over a family of
//! synthetic response curves with a known true boundary, at SageMaker's default settings
//! (`concurrency_min` 16, `concurrency_max` 4096, `search_max_iterations` 10), without and with
//! measurement noise.
//!
//! `cargo run --release -p kneepoint-planner --example search_eval` (results in docs/search.md;
//! `BY_SHAPE=1` adds a row per curve shape, `SHOW=1` lists the answers more than 5 % off,
//! `SEED=N` draws other noise, `HOSTILE=1` runs the hostile family with log-normal noise,
//! `TRACE=label:truth` prints one search, with `SIGMA=σ` under noise).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/curves.rs"]
mod curves;
#[path = "../tests/support/eval.rs"]
mod eval;
#[path = "../tests/support/hostile.rs"]
mod hostile;

use kneepoint_planner::SearchConfig;

fn main() {
    let mut cfg = SearchConfig::new(vec![]);
    if let Ok(m) = std::env::var("CONFIRM") {
        cfg.confirm_margin = m.parse().expect("a number");
    }
    if let Ok(m) = std::env::var("MAX_ITER") {
        cfg.max_iterations = m.parse().expect("a number");
    }
    if let Ok(m) = std::env::var("NOISE_ITER") {
        cfg.noise_iterations = m.parse().expect("a number");
    }
    let hostile = std::env::var_os("HOSTILE").is_some();
    let cases = if hostile {
        hostile::hostile()
    } else {
        curves::family()
    };
    let show = std::env::var_os("SHOW").is_some();
    let seed = std::env::var("SEED")
        .ok()
        .map(|s| s.parse::<u64>().expect("SEED=a number"))
        .map_or(eval::SEED, |s| eval::SEED ^ s);
    if let Ok(t) = std::env::var("TRACE") {
        let (label, truth) = t.split_once(':').expect("TRACE=label:truth");
        let truth: u32 = truth.parse().expect("a number");
        for case in cases.iter().filter(|c| c.label == label) {
            let max = case.range.map_or(cfg.concurrency_max, |r| r.1);
            if curves::truth(case, max) == Some(truth) {
                println!("{label}, truth {truth}: {:?}", case.shape);
                let sigma: f64 =
                    std::env::var("SIGMA").map_or(0.0, |s| s.parse().expect("SIGMA=σ"));
                let i = cases
                    .iter()
                    .position(|c| std::ptr::eq(c, case))
                    .unwrap_or(0);
                let mut noise = curves::Noise::new(sigma, eval::case_seed(seed, i));
                noise.lognormal = hostile;
                for line in eval::trace(case, &cfg, (sigma > 0.0).then_some(&mut noise)) {
                    println!("  {line}");
                }
            }
        }
        return;
    }
    println!("{}", eval::Figures::header());
    for (label, sigma) in [("none", 0.0), ("3 %", 0.03), ("8 %", 0.08)] {
        let reported = std::env::var_os("UNREPORTED").is_none();
        let runs = eval::evaluate_with(&cases, &cfg, (sigma, seed, reported, hostile), |_| true);
        println!("{}", runs.figures().row(label, "all"));
        if show {
            for r in runs.off(0.05) {
                println!("    {r}");
            }
        }
        if std::env::var_os("BY_SHAPE").is_some() {
            let mut labels: Vec<&str> = cases.iter().map(|c| c.label).collect();
            labels.dedup();
            labels.sort_unstable();
            labels.dedup();
            for l in labels {
                let runs =
                    eval::evaluate_with(&cases, &cfg, (sigma, seed, reported, hostile), |c| {
                        c.label == l
                    });
                println!("{}", runs.figures().row(label, l));
            }
        }
    }
}
