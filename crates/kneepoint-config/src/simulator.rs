//! The built-in simulator's profile from its settings group
//! ([`crate::SimulatorOptions`]), and fault plans.

use kneepoint_sim::{Fault, FaultPlan, SimProfile};

use crate::error::bail;
use crate::file::{FileConfig, SimulatorSection};
use crate::{CommonArgs, FitInputs, Result, DEFAULT_SIM_TIME_SCALE};

/// The simulator profile the merged group (the flags over `[simulator]`) describes (validated); `predicted` is
/// built from the model and instance of `--model-config` / `--instance` or `[model]`.
pub(crate) fn profile(
    args: &CommonArgs,
    sim: &SimulatorSection,
    file: &FileConfig,
) -> Result<SimProfile> {
    let name = sim.sim_profile.as_deref().unwrap_or("calibrated");
    let mut p = if name == "predicted" {
        let wl = crate::flags_over(&args.workload, &file.workload.clone().unwrap_or_default());
        let (isl, osl) = crate::workload::mean_lengths(&wl);
        let base = args.config.as_deref().and_then(std::path::Path::parent);
        let Some(inputs) =
            FitInputs::resolve(&args.simulator.fit, file.model.as_ref(), base, isl, osl)?
        else {
            bail!("--sim-profile predicted needs --model-config FILE and --instance TYPE (or [model] config and instance)");
        };
        crate::fit::predicted_profile(&inputs)?
    } else {
        SimProfile::by_name(name)?
    };
    p.time_scale = sim.sim_time_scale.unwrap_or(DEFAULT_SIM_TIME_SCALE);
    if let Some(s) = sim.seed {
        p.seed = s;
    }
    if let Some(k) = sim.sim_slowdown {
        if !k.is_finite() || k <= 0.0 {
            bail!("the simulator slowdown must be a positive factor (got {k})");
        }
        p.step_base_ms *= k;
        p.step_per_seq_ms *= k;
        p.step_per_context_token_us *= k;
        p.prefill_per_token_us *= k;
        if let Some(e) = p.experts.as_mut() {
            e.read_all_ms *= k;
        }
    }
    if let Some(j) = sim.sim_jitter {
        if !j.is_finite() || j < 0.0 {
            bail!("the simulator jitter must be 0 or more (got {j})");
        }
        p.jitter = j;
    }
    if let Some(d) = sim.sim_drift {
        if !d.is_finite() || d < 0.0 {
            bail!("the simulator drift must be 0 or more (got {d})");
        }
        p.drift = d;
    }
    if let Some(d) = sim.sim_degrade {
        if !d.is_finite() || d < 0.0 {
            bail!("the simulator's degrade rate must be 0 or more (got {d})");
        }
        p.degrade = d;
    }
    if let Some(r) = sim.sim_reasoning_share {
        if !(0.0..=1.0).contains(&r) {
            bail!("the simulator's reasoning share must be between 0 and 1 (got {r})");
        }
        p.reasoning_share = r;
    }
    p.faults = sim.faults.clone();
    if let Some(rate) = args.simulator.sim_fault_rate {
        p.faults = Some(fault_plan(
            rate,
            &args.simulator.sim_faults,
            args.simulator.sim_stall_ms,
        )?);
    }
    p.validate()?;
    Ok(p)
}

/// A fault plan from the command line: `rate` of requests get one of `kinds` (all HTTP/SSE
/// kinds when empty).
pub fn fault_plan(rate: f64, kinds: &[String], stall_ms: Option<u64>) -> Result<FaultPlan> {
    let kinds = kinds
        .iter()
        .map(|k| {
            Fault::parse(k.trim())
                .ok_or_else(|| crate::Error::Invalid(format!("unknown simulator fault {k:?}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut plan = FaultPlan::new(rate, kinds);
    if let Some(ms) = stall_ms {
        plan.stall_ms = ms;
    }
    Ok(plan)
}
