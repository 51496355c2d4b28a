//! The config file (TOML or JSON): its sections, with SageMaker's names where they exist
//! (`sweep_params.concurrency`, `sweep_params.request_count`, `prompt_input_tokens_mean`, ...).
//! Unknown keys are errors.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::Context;
use crate::Result;

/// Default measured requests per level (SageMaker's example).
pub const DEFAULT_REQUEST_COUNT: u32 = 1024;
/// The default sweep's levels, lead-in and counts, owned by the engine (so that a library
/// sweep given no levels runs the same).
pub use kneepoint_engine::{default_level_counts, DEFAULT_CONCURRENCY, DEFAULT_LEAD_IN};

/// Default speed of the built-in simulator for `kneepoint sweep`.
pub const DEFAULT_SIM_TIME_SCALE: f64 = 0.1;

/// The whole config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// The endpoint to benchmark; absent means the built-in simulator.
    pub endpoint: Option<EndpointSection>,
    /// What to send (SageMaker `CreateAIWorkloadConfig` names).
    pub workload: Option<WorkloadSection>,
    /// The levels (SageMaker `sweep_params`).
    pub sweep_params: Option<SweepSection>,
    /// The SLA search (SageMaker `search_params`); its SLAs also mark a sweep's levels.
    pub search_params: Option<SearchSection>,
    /// Fleet sizing for a sweep.
    pub fleet: Option<FleetSection>,
    /// The built-in simulator.
    pub simulator: Option<SimulatorSection>,
    /// The model and its serving assumptions, for stage-1 sizing (`[model]`).
    pub model: Option<crate::fit::ModelSection>,
    /// The archive of the results and its upload (`[output]`).
    pub output: Option<crate::publish::OutputSection>,
    /// Repeated runs of each level and convergence.
    pub runs: Option<RunsSection>,
    /// Open-loop arrivals.
    pub load: Option<LoadSection>,
    /// Where results go.
    pub artifact_dir: Option<PathBuf>,
    /// `kneepoint recommend`: what to rank by (`cost`, `latency` or `throughput`).
    #[serde(default, deserialize_with = "crate::choices::parsed")]
    pub objective: Option<kneepoint_planner::Objective>,
    /// `kneepoint recommend`: a dated price table (TOML or JSON) for candidates without a price.
    pub price_table: Option<PathBuf>,
    /// `kneepoint recommend`: the currency prices are in (default `USD`).
    pub currency: Option<String>,
    /// `kneepoint recommend`: candidates measured at a time (default 1). Only for candidates
    /// that share nothing (separate machines, GPUs or endpoints).
    pub parallel_candidates: Option<u32>,
    /// `kneepoint recommend`: `grid` (every combination measured, the default) or `adaptive`
    /// (the configuration search: skip what cannot fit or win, screen, search what could win).
    #[serde(default, deserialize_with = "crate::choices::parsed")]
    pub search_strategy: Option<crate::SearchStrategy>,
    /// `kneepoint recommend`, adaptive strategy: at most this many launches.
    pub max_launches: Option<u32>,
    /// `kneepoint recommend`, adaptive strategy: at most this many instance-hours of launches.
    pub max_instance_hours: Option<f64>,
    /// `kneepoint recommend`: the deployments to compare.
    #[serde(default)]
    pub candidates: Vec<CandidateSection>,
}

/// `[load]`: the same group as the Load flags ([`crate::LoadOptions`]).
pub type LoadSection = crate::LoadOptions;

/// `[runs]`: the same group as the repeated-runs flags ([`crate::RunsOptions`]).
pub type RunsSection = crate::RunsOptions;

/// `[[candidates]]`: one deployment to measure and rank.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateSection {
    /// A name people recognise (also the candidate's folder name).
    pub name: String,
    /// The instance type (for the price table and the report).
    pub instance_type: Option<String>,
    /// Instances behind the endpoint (default 1).
    pub instance_count: Option<u32>,
    /// Price of one instance-hour; else looked up in the price table.
    pub price_per_hour: Option<f64>,
    /// The endpoint; absent means the built-in simulator.
    pub endpoint: Option<EndpointSection>,
    /// The built-in simulator's settings for this candidate.
    pub simulator: Option<SimulatorSection>,
    /// Tensor-parallel degree for the stage-1 fit (default: the one that holds the most).
    pub tensor_parallel: Option<u32>,
    /// kneepoint launches the candidate itself (and always takes it down).
    pub deploy: Option<crate::DeploySection>,
    /// Engine settings to try: one candidate per combination of these values (each a
    /// placeholder of the deploy command), e.g. `max_num_seqs = [16, 64, 256]`.
    pub matrix: Option<std::collections::BTreeMap<String, Vec<crate::Scalar>>>,
}

/// `[search_params]`: the same group as the search's flags ([`crate::SearchOptions`]).
pub type SearchSection = crate::SearchOptions;

/// `[fleet]`: the same group as the sweep's fleet flags ([`crate::FleetOptions`]).
pub type FleetSection = crate::FleetOptions;

/// `[endpoint]`: the same group as the Endpoint and SageMaker flags
/// ([`crate::EndpointOptions`]).
pub type EndpointSection = crate::EndpointOptions;

/// `[workload]`: the same group as the Workload flags ([`crate::WorkloadOptions`]).
pub type WorkloadSection = crate::workload_flags::WorkloadOptions;

/// `[sweep_params]`: the same group as the count flags ([`crate::CountOptions`]).
pub type SweepSection = crate::CountOptions;

/// `[simulator]`: the same group as the simulator's flags ([`crate::SimulatorOptions`]).
pub type SimulatorSection = crate::SimulatorOptions;

impl FileConfig {
    /// The top-level keys `kneepoint recommend` reads, as its flags' group (`price_table`
    /// relative to `base`, the file's folder).
    pub fn recommend_options(&self, base: &Path) -> crate::RecommendOptions {
        crate::RecommendOptions {
            objective: self.objective,
            strategy: self.search_strategy,
            price_table: self.price_table.as_ref().map(|p| base.join(p)),
            artifact_dir: self.artifact_dir.clone(),
        }
    }

    /// Reads a `.toml` or `.json` file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = kneepoint_core::read_capped_to_string(path, kneepoint_core::MAX_SETTINGS_BYTES)
            .with_context(|| format!("reading config file {}", path.display()))?;
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        Self::parse(&text, is_json).with_context(|| format!("in {}", path.display()))
    }

    /// Parses the text of a config file: JSON when `is_json`, TOML otherwise. Unknown keys are
    /// errors.
    pub fn parse(text: &str, is_json: bool) -> Result<Self> {
        if is_json {
            // The path of the offending key ("sweep_params.concurrency: invalid type ..."),
            // which serde_json alone leaves out and TOML's parser gives.
            let mut json = serde_json::Deserializer::from_str(text);
            let config: FileConfig = serde_path_to_error::deserialize(&mut json)
                .context("parsing the config as JSON")?;
            // Nothing but whitespace may follow the document.
            json.end().context("parsing the config as JSON")?;
            Ok(config)
        } else {
            toml::from_str(text).context("parsing the config as TOML")
        }
    }
}
