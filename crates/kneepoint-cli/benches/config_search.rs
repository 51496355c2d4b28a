//! The configuration search against the grid on a family of spaces (issue 49 part 5).
//!
//! Each space is a shipped model config × an instance type × an SLA set × an objective, over
//! tensor parallelism × `max_num_seqs` × KV-cache dtype. The truth of a combination is the
//! roofline prediction at *other* efficiencies than the ones the search's priors assume
//! (bandwidth 0.6 instead of 0.8, compute 0.35 instead of 0.5, 4 ms per step instead of 2):
//! the priors are off by a factor that differs from setting to setting. Its value is the best
//! level under the SLAs (TTFT and ITL from the predicted curve): cost per million output tokens
//! or output tokens/s. A full measurement reads the truth with 2 % noise; a screening (a
//! coarse search) reads 0–15 % low with 5 % noise. A launch costs 10 minutes of model loading,
//! then 2 minutes per probe (a full search 7 probes, a screening 4). The grid launches every
//! combination that fits and searches it fully.
//!
//! Three families of the same 24 spaces: predictions as above; each prediction also off by its
//! own log-normal factor (spread 0.3); no predictions at all (no `[model]`: reported, not held
//! to the targets, since only screenings can then tell what to skip).
//!
//! `cargo bench -p kneepoint-cli --bench config_search` prints one row per space and the
//! acceptance figures (winner within 5 % of the grid's best in ≥ 95 % of spaces; median share
//! of the grid's instance-hours ≤ 30 %), and exits 1 when they are missed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kneepoint_config::{FitArgs, FitInputs};
use kneepoint_fit::Efficiency;
use kneepoint_planner::config_search::{
    prior_speeds, ConfigSearch, Dimension, Fidelity, Goal, Prior, TrialOutcome,
};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

const LOAD_H: f64 = 10.0 / 60.0;
const PROBE_H: f64 = 2.0 / 60.0;

struct Space {
    model: &'static str,
    instance: &'static str,
    slas: (f64, f64),
    goal: Goal,
    /// Each prediction also off by its own log-normal factor of this spread (negative: no
    /// predictions at all, as without a `[model]`).
    prior_noise: f64,
}

/// (truth, prior) of each combination: `None` when it does not fit; a value of `None` when
/// no level meets the SLAs.
/// Each combination's truth and its prior at every speed (`None`: it does not fit).
type Values = Vec<Option<(Option<f64>, Vec<(f64, Option<f64>)>)>>;

fn dims(gpus: u32) -> Vec<Dimension> {
    let tps: Vec<String> = [1u32, 2, 4, 8]
        .iter()
        .filter(|t| **t <= gpus)
        .map(u32::to_string)
        .collect();
    vec![
        Dimension::new("tensor_parallel_size", tps),
        // monotone, as the engine marks it under the cost and throughput goals
        Dimension::new("max_num_seqs", ["32", "128", "512"]).monotone(),
        Dimension::new("kv_cache_dtype", ["auto", "fp8"]),
    ]
}

/// The best level under the SLAs of one combination at efficiencies `e`, on hardware `speed`
/// times as fast (every latency divided by it, every rate multiplied).
fn value(
    inputs: &FitInputs,
    space: &Space,
    settings: &[(&str, &str)],
    e: Efficiency,
    speed: f64,
) -> Option<Option<f64>> {
    let engine: BTreeMap<String, String> = settings
        .iter()
        .skip(1)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let tp: u32 = settings[0].1.parse().ok()?;
    let (fs, mut fit) = inputs
        .chosen_fit(space.instance, Some(tp), &engine)
        .ok()?
        .ok()?;
    // one engine per launch, as a local or endpoint launch of one server runs
    fit.instance_max_concurrency /= fit.replicas.max(1);
    fit.replicas = 1;
    let inst = inputs.catalog.get(space.instance).ok()?;
    let mut levels: Vec<u32> = (0..40)
        .map(|i| (1.25f64.powi(i)).round() as u32)
        .filter(|c| *c <= fit.instance_max_concurrency.max(1))
        .collect();
    levels.dedup();
    let p = kneepoint_fit::predict(&inputs.model, inst, &fit, &fs, e, &levels).ok()?;
    let (ttft, itl) = space.slas;
    let best = p
        .points
        .iter()
        .filter(|q| q.ttft_ms / speed <= ttft && q.step_ms / speed <= itl)
        .map(|q| q.output_tokens_per_s * speed)
        .fold(None, |b: Option<f64>, t| Some(b.map_or(t, |b| b.max(t))));
    let price = inst.price_per_hour.unwrap_or(1.0);
    Some(best.map(|t| match space.goal {
        Goal::Maximize => t,
        Goal::Minimize => price / (t * 3600.0) * 1e6,
    }))
}

fn values(space: &Space, s: &ConfigSearch) -> Option<Values> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../kneepoint-fit/configs");
    let args = FitArgs {
        model_config: Some(root.join(space.model)),
        instance: Some(space.instance.to_owned()),
        ..Default::default()
    };
    let inputs = FitInputs::resolve(&args, None, None, 1024.0, 256.0).ok()??;
    let truth_e = Efficiency {
        bandwidth: 0.6,
        compute: 0.35,
        step_overhead_ms: 4.0,
    };
    Some(
        (0..s.len())
            .map(|i| {
                let set = s.settings(i);
                let truth = value(&inputs, space, &set, truth_e, 1.0)?;
                // the prior as the engine gives it: its prediction at every speed
                let by_speed: Vec<(f64, Option<f64>)> = prior_speeds()
                    .into_iter()
                    .map(|sp| {
                        let v = value(&inputs, space, &set, Efficiency::default(), sp).flatten();
                        (sp, v)
                    })
                    .collect();
                Some((truth, by_speed))
            })
            .collect(),
    )
}

struct Row {
    within: bool,
    gap: f64,
    share: f64,
    launches: u32,
    grid_launches: usize,
}

fn run(space: &Space, seed: u64) -> Option<Row> {
    let catalog = kneepoint_fit::Catalog::builtin();
    let gpus = catalog.get(space.instance).ok()?.gpu_count;
    let mut s = ConfigSearch::new(dims(gpus), space.goal).ok()?;
    let v = values(space, &s)?;
    let better = |a: f64, b: f64| match space.goal {
        Goal::Maximize => a > b,
        Goal::Minimize => a < b,
    };
    let grid_best = v
        .iter()
        .filter_map(|x| x.as_ref().and_then(|(t, _)| *t))
        .fold(None, |b: Option<f64>, t| {
            Some(b.map_or(t, |b| if better(t, b) { t } else { b }))
        })?;
    let grid_launches = v.iter().filter(|x| x.is_some()).count();
    let grid_hours = grid_launches as f64 * (LOAD_H + 7.0 * PROBE_H);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // as the engine's recommendation tunes it (crates/kneepoint-engine/src/adaptive.rs)
    s.prior_error = 0.5;
    for (i, x) in v.iter().enumerate() {
        let off: f64 = rng.sample(StandardNormal);
        let factor = (space.prior_noise * off).exp();
        let by_speed: Vec<(f64, Option<f64>)> = match x {
            Some((_, b)) if space.prior_noise >= 0.0 => b
                .iter()
                .map(|(sp, p)| (*sp, p.map(|p| p * factor)))
                .collect(),
            _ => Vec::new(),
        };
        let predicted = by_speed
            .iter()
            .find(|(sp, _)| (*sp - 1.0).abs() < 1e-9)
            .and_then(|(_, p)| *p);
        s.set_prior(
            i,
            Prior {
                cannot_fit: x.is_none().then(|| "the fit says no".to_owned()),
                predicted,
                by_speed,
            },
        );
    }
    while let Some(t) = s.next_trial() {
        let truth = v[t.combination].as_ref().and_then(|(t, _)| *t);
        let noise: f64 = rng.sample(StandardNormal);
        let outcome = match (t.fidelity, truth) {
            (_, None) => TrialOutcome::unusable(LOAD_H + 4.0 * PROBE_H),
            (Fidelity::Screen, Some(x)) => {
                let low = 1.0 - 0.15 * rng.random::<f64>();
                let read = if space.goal == Goal::Maximize {
                    x * low
                } else {
                    x / low
                };
                TrialOutcome::measured(read * (0.05 * noise).exp(), 0.05, LOAD_H + 4.0 * PROBE_H)
            }
            (Fidelity::Full, Some(x)) => {
                TrialOutcome::measured(x * (0.02 * noise).exp(), 0.02, LOAD_H + 7.0 * PROBE_H)
            }
        };
        s.observe(t, outcome);
    }
    let a = s.answer();
    let won = a.best.and_then(|b| v[b].as_ref().and_then(|(t, _)| *t))?;
    let gap = match space.goal {
        Goal::Maximize => 1.0 - won / grid_best,
        Goal::Minimize => won / grid_best - 1.0,
    };
    Some(Row {
        within: gap <= 0.05,
        gap,
        share: a.instance_hours / grid_hours,
        launches: a.launches,
        grid_launches,
    })
}

fn main() {
    let mut failed = false;
    for prior_noise in [0.0, 0.3] {
        failed |= !family(prior_noise);
    }
    // Without predictions the targets are not expected: reported, not gated.
    let _ = family(-1.0);
    if failed {
        std::process::exit(1);
    }
}

/// One family of spaces with predictions off by `prior_noise` each; whether it met the targets.
fn family(prior_noise: f64) -> bool {
    let mut spaces = Vec::new();
    for model in ["gpt-oss-20b.json", "nemotron-3-nano-30b-a3b.json"] {
        for instance in ["ml.g6e.12xlarge", "ml.g5.12xlarge", "ml.p4d.24xlarge"] {
            for slas in [(500.0, 25.0), (3000.0, 60.0)] {
                for goal in [Goal::Minimize, Goal::Maximize] {
                    spaces.push(Space {
                        model,
                        instance,
                        slas,
                        goal,
                        prior_noise,
                    });
                }
            }
        }
    }
    if prior_noise < 0.0 {
        println!("\nno predictions (no [model]): screenings and the additive model only");
    } else {
        println!("\npredictions at other efficiencies, each also off by a log-normal factor of spread {prior_noise}");
    }
    println!(
        "{:<30} {:<16} {:>12} {:>5} {:>8} {:>9} {:>8}",
        "model", "instance", "SLA ttft/itl", "goal", "gap %", "launches", "hours %"
    );
    let mut rows = Vec::new();
    for (n, sp) in spaces.iter().enumerate() {
        let Some(r) = run(sp, 49 + n as u64) else {
            println!(
                "{} on {}: no combination meets the SLAs (left out)",
                sp.model, sp.instance
            );
            continue;
        };
        println!(
            "{:<30} {:<16} {:>12} {:>5} {:>8.2} {:>4}/{:<4} {:>8.1}",
            sp.model,
            sp.instance,
            format!("{}/{}", sp.slas.0, sp.slas.1),
            if sp.goal == Goal::Minimize {
                "cost"
            } else {
                "tput"
            },
            r.gap * 100.0,
            r.launches,
            r.grid_launches,
            r.share * 100.0
        );
        rows.push(r);
    }
    let within = rows.iter().filter(|r| r.within).count() as f64 / rows.len().max(1) as f64;
    let mut shares: Vec<f64> = rows.iter().map(|r| r.share).collect();
    shares.sort_by(f64::total_cmp);
    let median = shares.get(shares.len() / 2).copied().unwrap_or(f64::NAN);
    let worst = shares.last().copied().unwrap_or(f64::NAN);
    println!(
        "{} spaces: winner within 5 % of the grid's best in {:.0} % (target ≥ 95 %); share of the grid's instance-hours: median {:.1} % (target ≤ 30 %), most {:.1} %",
        rows.len(),
        within * 100.0,
        median * 100.0,
        worst * 100.0
    );
    rows.len() >= 20 && within >= 0.95 && median <= 0.30
}
