//! kneepoint's flags and config file as a library: the clap [`Args`](clap::Args) of `kneepoint
//! sweep`, `search` and `recommend` (flatten them into another command line), the config file
//! (TOML or JSON, with SageMaker's names where they exist), their resolution into validated
//! settings (flags win over the file, the file over defaults), and starting the target they name
//! (the built-in simulator, an OpenAI-compatible server or a SageMaker endpoint) as an engine
//! run. Nothing here prints: progress goes to the [`Observer`](kneepoint_engine::Observer)
//! given.
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use kneepoint_config::{FileConfig, SweepArgs, SweepSettings};
//! use kneepoint_engine::{CancelToken, Silent};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let file = FileConfig::parse(&format!(r#"
//!     artifact_dir = {:?}
//!     [workload]
//!     prompt_input_tokens_mean = 32
//!     output_tokens_mean = 4
//!     [sweep_params]
//!     concurrency = [1, 4]
//!     request_count = 8
//!     [simulator]
//!     profile = "fast"
//!     time_scale = 1.0
//! "#, dir.path()), false).unwrap();
//! let settings = SweepSettings::resolve_with(&SweepArgs::default(), &file).unwrap();
//! let sweep = settings.prepare(Arc::new(Silent)).await.unwrap();
//! let report = sweep.run(&CancelToken::new()).await.unwrap();
//! assert_eq!(report.sent, vec![8, 8]);
//! # });
//! ```

mod aws;
mod choices;
mod command_line;
mod commands;
mod common;
mod deploy;
mod deploy_kubernetes;
#[cfg(feature = "sagemaker")]
mod deploy_sagemaker;
mod deploy_section;
mod describe;
mod endpoint;
mod endpoint_options;
mod engine_settings;
mod error;
mod expanded;
mod file;
mod fit;
mod flags;
mod limits;
mod load;
mod matrix_keys;
mod options;
mod parallelism;
mod prepare;
mod publish;
mod recommend;
mod request_counts;
#[cfg(feature = "sagemaker")]
mod sagemaker;
mod server_identity;
mod simulator;
mod simulator_options;
mod sla_flags;
mod stage_two;
mod target;
mod workload;
mod workload_flags;

pub use choices::{SearchObjective, SearchStrategy, SimProtocol};
pub use commands::{SearchSettings, SweepSettings};
pub use common::{parse_start_at, CommonSettings, ServerMetricsPlan, MAX_START_AHEAD_S};
pub use deploy_section::{
    Command as DeployCommand, DeploySection, KubernetesSection, SageMakerDeploySection, Scalar,
};
pub use endpoint_options::EndpointOptions;
pub use engine_settings::EngineSettings;
pub use error::{Error, Result};
pub use file::{default_level_counts, DEFAULT_LEAD_IN};
pub use file::{
    CandidateSection, EndpointSection, FileConfig, FleetSection, LoadSection, RunsSection,
    SearchSection, SimulatorSection, SweepSection, WorkloadSection, DEFAULT_CONCURRENCY,
    DEFAULT_REQUEST_COUNT, DEFAULT_SIM_TIME_SCALE,
};
pub use fit::{catalog, predicted_profile, FitArgs, FitInputs, ModelSection};
pub use flags::{CommonArgs, RecommendArgs, SearchArgs, SlaArgs, SweepArgs};
pub use kneepoint_engine::{OpenLoopSettings, RunsSettings};
pub use options::{
    flags_over, CountOptions, FleetOptions, LoadOptions, RecommendOptions, RunsOptions,
    SearchOptions,
};
pub use prepare::prepare;
pub use publish::{parse_label, parse_labels, OutputSection, Publish, PublishArgs, Published};
pub use recommend::{recommendation, PriceTable};
pub use request_counts::RequestCounts;
#[cfg(feature = "sagemaker")]
pub use sagemaker::SageMakerSettings;
pub use simulator::fault_plan;
pub use simulator_options::SimulatorOptions;
pub use target::{Protocol, RoutesPlan, Target};
pub use workload_flags::WorkloadOptions;
