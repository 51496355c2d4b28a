//! Evaluation harness: the planner's search against plain doubling + bisection over a family of
//! synthetic response curves with a known true boundary, without and with measurement noise.
//!
//! `cargo run --release -p kneepoint-planner --example search_eval` (results in docs/search.md)
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/curves.rs"]
mod curves;

use curves::*;
use kneepoint_planner::SearchConfig;

fn main() {
    let mut cfg = SearchConfig::new(vec![]);
    cfg.max_iterations = 40;
    let cases = family();
    println!("| noise | curves | mean probes: planner | mean probes: doubling+bisection | planner fewer / more | max abs error: planner / baseline | max overshoot, all curves: planner / baseline | identifiable curves | max overshoot, identifiable: planner / baseline |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (label, sigma) in [("none", 0.0), ("1 %", 0.01), ("3 %", 0.03)] {
        let (mut n, mut p_sum, mut b_sum, mut fewer, mut more) = (0, 0u32, 0u32, 0, 0);
        let (mut p_err_max, mut b_err_max, mut p_over_max, mut b_over_max) =
            (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        let (mut identifiable, mut p_over_ident, mut b_over_ident) = (0, 0.0f64, 0.0f64);
        let mut rng_p = Rng(0x9e37_79b9_7f4a_7c15);
        let mut rng_b = Rng(0x9e37_79b9_7f4a_7c15);
        for case in &cases {
            let mut c = cfg.clone();
            c.slas = case.slas.clone();
            let Some(t) = truth(case, c.concurrency_max) else {
                continue;
            };
            if t >= c.concurrency_max || t < c.concurrency_min {
                continue;
            }
            let noise_p = (sigma > 0.0).then_some((&mut rng_p, sigma));
            let noise_b = (sigma > 0.0).then_some((&mut rng_b, sigma));
            let (pa, pp) = planner(case, &c, noise_p);
            let (ba, bp) = baseline(case, &c, noise_b);
            let err =
                |a: Option<u32>| a.map_or(1.0, |a| (f64::from(a) - f64::from(t)) / f64::from(t));
            let (pe, be) = (err(pa), err(ba));
            p_err_max = p_err_max.max(pe.abs());
            b_err_max = b_err_max.max(be.abs());
            p_over_max = p_over_max.max(pe);
            if pe > 0.05 && std::env::var_os("SHOW").is_some() {
                println!(
                    "  overshoot {:.1} %: truth {t}, answer {pa:?}, slope {:.2} %",
                    pe * 100.0,
                    slope(case, t) * 100.0
                );
            }
            if slope(case, t) >= sigma {
                identifiable += 1;
                p_over_ident = p_over_ident.max(pe);
                b_over_ident = b_over_ident.max(be);
            }
            b_over_max = b_over_max.max(be);
            n += 1;
            p_sum += pp;
            b_sum += bp;
            if pp < bp {
                fewer += 1
            }
            if pp > bp {
                more += 1
            }
        }
        println!(
            "| {label} | {n} | {:.2} | {:.2} | {fewer} / {more} | {:.1} % / {:.1} % | {:.1} % / {:.1} % | {identifiable} | {:.1} % / {:.1} % |",
            f64::from(p_sum) / n as f64,
            f64::from(b_sum) / n as f64,
            p_err_max * 100.0,
            b_err_max * 100.0,
            p_over_max * 100.0,
            b_over_max * 100.0,
            p_over_ident * 100.0,
            b_over_ident * 100.0,
        );
    }
}
