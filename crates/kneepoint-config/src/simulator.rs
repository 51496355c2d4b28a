//! The built-in simulator: its settings group ([`SimulatorOptions`], the flags and the file's
//! `[simulator]`: the flags are the file's keys with a `sim_` prefix), the profile they make,
//! and fault plans.

use clap::Args;
use kneepoint_sim::{Fault, FaultPlan, SimProfile};
use merge::Merge;
use serde::Deserialize;

use crate::error::bail;
use crate::file::{FileConfig, SimulatorSection};
use crate::{CommonArgs, FitInputs, Result, DEFAULT_SIM_TIME_SCALE};

/// The flags' name for [`SimulatorOptions`].
pub type SimulatorArgs = SimulatorOptions;

/// The built-in simulator, started when no endpoint is given.
#[derive(Debug, Clone, Default, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct SimulatorOptions {
    /// Built-in simulator profile: calibrated, fast, or predicted (built from --model-config
    /// and --instance by the first-order prediction, to try a plan before paying for it).
    #[arg(long, value_name = "NAME", value_parser = ["calibrated", "fast", "predicted"])]
    #[serde(rename = "profile")]
    pub sim_profile: Option<String>,
    /// The model and instance for stage-1 sizing and `--sim-profile predicted`.
    #[command(flatten)]
    #[serde(skip)]
    #[merge(skip)]
    pub fit: crate::FitArgs,
    /// Built-in simulator speed: wall seconds per modelled second (0.1 = ten times faster).
    #[arg(long, value_name = "FACTOR")]
    #[serde(rename = "time_scale")]
    pub sim_time_scale: Option<f64>,
    /// Built-in simulator as a reasoning model: this share of each chat response streams as
    /// `reasoning_content` before the answer (0 to 1; default 0).
    #[arg(long, value_name = "SHARE")]
    #[serde(rename = "reasoning_share")]
    pub sim_reasoning_share: Option<f64>,
    /// Built-in simulator: fraction of requests that get an injected fault (0..1).
    #[arg(long, value_name = "FRACTION")]
    #[serde(skip)]
    pub sim_fault_rate: Option<f64>,
    /// Built-in simulator: which faults (comma-separated; default all): http_429, http_500,
    /// http_503, reset_before_headers, reset_mid_stream, stall, invalid_json, invalid_utf8,
    /// overlong_line, wrong_content_type, no_done, done_without_finish.
    #[arg(long, value_delimiter = ',', value_name = "FAULTS")]
    #[serde(skip)]
    #[merge(skip)]
    pub sim_faults: Vec<String>,
    /// Built-in simulator: how long a `stall` fault lasts, ms.
    #[arg(long, value_name = "MS")]
    #[serde(skip)]
    pub sim_stall_ms: Option<u64>,
    /// Built-in simulator: speak `openai` (default) or the `sagemaker` runtime protocol (signed
    /// requests, event streams) to the client.
    #[arg(long, value_name = "PROTOCOL", value_parser = crate::choices::choice::<crate::SimProtocol>(&["openai", "sagemaker"]))]
    #[serde(
        rename = "protocol",
        default,
        deserialize_with = "crate::choices::parsed"
    )]
    pub sim_protocol: Option<crate::SimProtocol>,
    /// Built-in simulator: multiply every engine step cost (1.2 = a server 20 % slower).
    #[arg(long, value_name = "FACTOR")]
    #[serde(rename = "slowdown")]
    pub sim_slowdown: Option<f64>,
    /// Built-in simulator: relative standard deviation of each engine step (0 = none; the
    /// default profile has 0.03); more jitter makes runs noisier.
    #[arg(long, value_name = "SD")]
    #[serde(rename = "jitter")]
    pub sim_jitter: Option<f64>,
    /// Built-in simulator: a slowly wandering slowdown, as noisy neighbours cause (each step
    /// costs `exp(drift × x)` more, `x` a standard normal with a correlation time of 500
    /// steps; 0 = none): levels then differ from run to run beyond their own requests' spread.
    #[arg(long, value_name = "SD")]
    #[serde(rename = "drift")]
    pub sim_drift: Option<f64>,
    /// Built-in simulator: a server that slows as it runs (each step costs `1 + degrade × t`
    /// more, `t` the model seconds it has spent stepping; 0 = none): its levels are not steady.
    #[arg(long, value_name = "PER_S")]
    #[serde(rename = "degrade")]
    pub sim_degrade: Option<f64>,
    /// File only: the simulator's random seed.
    #[arg(skip)]
    pub seed: Option<u64>,
    /// File only: a fault plan (`--sim-fault-rate`, `--sim-faults`, `--sim-stall-ms` on the
    /// command line).
    #[arg(skip)]
    pub faults: Option<FaultPlan>,
}

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
