//! The built-in simulator's settings group ([`SimulatorOptions`]): its flags and the file's
//! `[simulator]` in one struct (the flags are the file's keys with a `sim_` prefix).

use clap::Args;
use kneepoint_sim::FaultPlan;
use merge::Merge;
use serde::Deserialize;

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
