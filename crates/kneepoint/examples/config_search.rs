//! The configuration search inside another tool, with `kneepoint` as the only kneepoint
//! dependency: a closed-form engine stands in for the launches (a real tool would start the
//! server with these settings, measure it, and take it down). The planner says which
//! combination to try next and how hard; the answer is the cheapest configuration, found
//! without trying every one.
//!
//! `cargo run -p kneepoint --example config_search`

// plan: begin
use kneepoint::planner::config_search::{ConfigSearch, Dimension, Fidelity, Goal, TrialOutcome};

/// Cost per million output tokens at `tp` GPUs, `seqs` sequences, an fp8 KV cache or not.
pub fn launch(s: &[(&str, &str)]) -> f64 {
    let (tp, seqs): (f64, f64) = (s[0].1.parse().unwrap_or(1.0), s[1].1.parse().unwrap_or(1.0));
    let batch = seqs.min(300.0 * tp * if s[2].1 == "fp8" { 1.9 } else { 1.0 });
    2.0 * tp / (3.6 * batch / (10.0 / tp.powf(0.8) + 0.02 * batch))
}

/// The cheapest settings over tp × max_num_seqs × KV dtype, their cost and the launches.
pub fn cheapest() -> Result<(String, f64, u32), kneepoint::planner::Error> {
    let mut search = ConfigSearch::new(
        vec![
            Dimension::new("tensor_parallel_size", ["1", "2", "4"]),
            Dimension::new("max_num_seqs", ["32", "128", "512"]),
            Dimension::new("kv_cache_dtype", ["auto", "fp8"]),
        ],
        Goal::Minimize,
    )?;
    while let Some(trial) = search.next_trial() {
        let cost = launch(&search.settings(trial.combination));
        let hours = if trial.fidelity == Fidelity::Screen {
            0.3
        } else {
            1.0
        };
        search.observe(trial, TrialOutcome::measured(cost, 0.02, hours));
    }
    let answer = search.answer();
    let best = search.settings(answer.best.unwrap_or(0));
    let named: Vec<String> = best.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Ok((named.join(" "), launch(&best), answer.launches))
}

fn main() -> Result<(), kneepoint::planner::Error> {
    let (settings, cost, launches) = cheapest()?;
    println!("cheapest: {settings} at {cost:.3} per million tokens, {launches} of 18 launched");
    Ok(())
}
// plan: end
