//! The kneepoint engine: everything `kneepoint sweep`, `search`, `recommend` and `report` do,
//! as a library. Give it a [`Transport`] (the built-in OpenAI or
//! SageMaker ones, the simulator's, or your own) and a
//! [`Workload`]; it runs the levels, writes the artifact folder
//! (per-level AIPerf-style exports, `sweep_summary.json` / `search_history.json` /
//! `recommendations.json`, plots, `report.html`) and returns typed results. It prints nothing:
//! progress goes to an [`Observer`].
//!
//! - [`Sweep`]: levels one after another, then the knee, the operating zone and the fleet.
//! - [`Search`]: the max-concurrency-under-SLA search, one probe at a time.
//! - [`Recommend`]: a sweep or search per candidate deployment, costed and ranked.
//! - [`rerender`]: a saved folder's summaries, plots and page made again from its records.
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use kneepoint_core::{async_trait, iter_stream, Chunk, Error, EventStream, Request, ResponseEvent};
//! use kneepoint_engine::{BenchOptions, CancelToken, Sweep, Transport};
//! use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticWorkload};
//!
//! /// A model that answers every prompt with four tokens at once.
//! struct Echo;
//!
//! #[async_trait]
//! impl Transport for Echo {
//!     async fn send(&self, _: &Request) -> Result<EventStream, Error> {
//!         let tokens = (0..4).map(|i| Ok(ResponseEvent::Chunk(Chunk::content(format!(" t{i}")))));
//!         Ok(Box::pin(iter_stream(tokens.collect::<Vec<_>>())))
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let workload = SyntheticWorkload::new(
//!     load_tokenizer("builtin").unwrap(),
//!     LengthDist::Fixed(16),
//!     LengthDist::Fixed(4),
//!     7,
//! ).unwrap();
//! let report = Sweep::builder(Arc::new(Echo))
//!     .workload(workload)
//!     .levels([1, 4])
//!     .request_count(8)
//!     .artifacts(dir.path())
//!     .build().unwrap()
//!     .run(&CancelToken::new()).await.unwrap();
//! assert_eq!(report.sent, vec![8, 8]);
//! assert!(dir.path().join("concurrency_4/profile_export.jsonl").is_file());
//! assert!(dir.path().join("sweep_summary.json").is_file());
//! # });
//! ```
//!
//! Most programs depend on the `kneepoint` crate instead, which re-exports this one with the
//! transports, the workload, the planner and the simulator behind features.
//!
//! # Features
//! - `report` (default): plots and `report.html` in every artifact folder.

mod adaptive;
mod adaptive_prior;
mod archive;
mod bench;
mod bench_options;
mod candidate;
mod counted;
mod defaults;
mod deployment;
mod error;
mod failure;
mod feed;
mod finish;
mod inputs;
mod length_sweep;
mod level;
mod measure;
mod merge;
mod observer;
mod open_sweep;
mod prefix_reset;
mod recommend;
mod render;
mod rerender;
mod runlog;
mod runs;
mod search;
mod search_doc;
mod server;
mod settings;
mod strategy;
mod streamed;
mod sweep;
mod sweep_doc;
mod timed;

pub use archive::{archive_path, write_archive};
pub use bench::{Bench, BenchBuilder};
pub use bench_options::BenchOptions;
pub use candidate::{CandidateRun, CandidateSource, CandidateSpec, Prepared};
pub use defaults::{default_level_counts, DEFAULT_CONCURRENCY, DEFAULT_LEAD_IN};
pub use deployment::{DeployError, Deployment};
pub use error::Error;
pub use failure::every_request_failed;
pub use kneepoint_scrape::{LiveSample, ScrapeSettings};
pub use length_sweep::{LengthReport, LengthSweep, LengthSweepBuilder, LengthWorkloads};
pub use merge::{merge, MergeReport, MergedLevel};
pub use observer::{Observer, Silent};
pub use prefix_reset::PrefixCacheReset;
pub use recommend::{Recommend, RecommendBuilder, RecommendReport};
pub use rerender::{rerender, rerender_with, RerenderOptions, Rerendered};
pub use runlog::{Logged, RunLog, LOG_FILE};
pub use runs::{pessimistic, RunsOutcome};
pub use search::{Search, SearchBuilder, DEFAULT_ERROR_GUARD, SCREEN_ITERATIONS};
pub use search_doc::{probe_dir, SearchReport};
pub use settings::{
    LevelSettings, OpenLoopSettings, RunsSettings, INPUTS_LIMIT, PREPARED_BYTES, RECORDS_IN_MEMORY,
};
pub use strategy::Strategy;
pub use sweep::{Sweep, SweepBuilder, MAX_EXTENSIONS};
pub use sweep_doc::{conclude, knee_explanation, level_row, sweep_pareto, SweepReport};

pub use kneepoint_core::{TokenCounter, Transport};
pub use kneepoint_planner::{SearchConfig, Sla, SweepPlan};
pub use kneepoint_report::schema;
pub use kneepoint_runner::CancelToken;
pub use kneepoint_workload::Workload;

/// The throughput a knee is read from: output tokens per second, or requests per second when
/// nothing is generated (pooling endpoints: embeddings, rerank, score).
pub(crate) fn work_throughput(output_tokens_per_s: f64, requests_per_s: f64) -> f64 {
    if output_tokens_per_s > 0.0 {
        output_tokens_per_s
    } else {
        requests_per_s
    }
}
