//! kneepoint right-sizes generative-AI inference endpoints by measuring them: it sweeps an
//! endpoint at growing concurrency and finds the knee where throughput stops rising while
//! latency climbs, searches for the highest concurrency that meets your SLAs, and ranks
//! candidate deployments by cost, latency or throughput. Every run leaves an artifact folder
//! that other tools read (AIPerf-style exports, per-request records, summaries, plots,
//! `report.html`).
//!
//! This crate is the one dependency a program needs: it re-exports the `kneepoint-*` crates
//! as modules, the builders at its root, and the names most programs use in [`prelude`].
//!
//! # Example: a sweep over your own transport
//! ```
//! use std::sync::Arc;
//! use kneepoint::prelude::*;
//!
//! /// A model that answers every prompt with four tokens at once.
//! struct Echo;
//!
//! #[async_trait]
//! impl Transport for Echo {
//!     async fn send(&self, _: &Request) -> Result<EventStream, TransportError> {
//!         let tokens = (0..4).map(|i| Ok(ResponseEvent::Chunk(Chunk::content(format!(" t{i}")))));
//!         Ok(Box::pin(iter_stream(tokens.collect::<Vec<_>>())))
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let report = Sweep::builder(Arc::new(Echo))
//!     .workload(kneepoint::synthetic(16, 4, 7).unwrap())
//!     .levels([1, 4])
//!     .request_count(8)
//!     .artifacts(dir.path())
//!     .build().unwrap()
//!     .run(&CancelToken::new()).await.unwrap();
//! assert_eq!(report.sent, vec![8, 8]);
//! assert!(dir.path().join("concurrency_4/profile_export.jsonl").is_file());
//! # });
//! ```
//!
//! # Features
//! - `openai` (default): the OpenAI-compatible client (the `transport` module).
//! - `builtin-tokenizer` (default): the offline o200k_base tokenizer, and [`synthetic`].
//! - `report` (default): plots and `report.html` in every artifact folder (the [`report`]
//!   module, which reads, re-summarises and compares saved folders, is there either way).
//! - `sagemaker`: the SageMaker runtime client (`transport::sagemaker`).
//! - `sim`: the built-in simulated inference server (the `sim` module) and, with `openai`,
//!   `LocalSim`, the simulator on a loopback port with a client pointed at it.
//! - `hf-tokenizer`: Hugging Face `tokenizer.json` files.
//! - `testkit`: a scriptable mock transport for tests (the `testkit` module).
//!
//! With no default feature the crate pulls no HTTP or TLS crate: bring a transport of your own.

mod error;
#[cfg(all(feature = "sim", feature = "openai"))]
mod local_sim;
pub mod prelude;

pub use error::Error;
#[cfg(all(feature = "sim", feature = "openai"))]
pub use local_sim::LocalSim;

/// Domain types shared by every part: requests, response events, per-request records, the
/// [`Transport`](types::Transport) trait (the `kneepoint-core` crate).
pub use kneepoint_core as types;
/// Launching candidates (local server processes), their teardown, and what a crashed run
/// left behind (the `kneepoint-deploy` crate; feature `deploy`).
#[cfg(feature = "deploy")]
pub use kneepoint_deploy as deploy;
/// Sweeps, searches, recommendations, re-rendering: runs and their artifact folders (the
/// `kneepoint-engine` crate).
pub use kneepoint_engine as engine;
/// Stage-1 sizing: model configs, the instance catalog, memory fit, the roofline prediction
/// (the `kneepoint-fit` crate).
pub use kneepoint_fit as fit;
/// Per-request metrics, level summaries, statistics and the AIPerf-style exports (the
/// `kneepoint-metrics` crate).
pub use kneepoint_metrics as metrics;
/// The pure decision logic: sweep plans, SLAs, the SLA search, the knee, the operating zone,
/// fleet sizing and rankings (the `kneepoint-planner` crate).
pub use kneepoint_planner as planner;
/// The typed documents of an artifact folder, reading saved runs, comparing two, and (with
/// the `report` feature) plots and `report.html` (the `kneepoint-report` crate).
pub use kneepoint_report as report;
/// The level drivers under the engine: closed and open loops, timed levels, cancellation
/// (the `kneepoint-runner` crate).
pub use kneepoint_runner as runner;
/// The server's own Prometheus metrics, scraped around each level (the `kneepoint-scrape`
/// crate).
pub use kneepoint_scrape as scrape;
/// The simulated inference server (the `kneepoint-sim` crate).
#[cfg(feature = "sim")]
pub use kneepoint_sim as sim;
/// A scriptable mock transport and its handle (the `kneepoint-testkit` crate).
#[cfg(feature = "testkit")]
pub use kneepoint_testkit as testkit;
/// The built-in clients: OpenAI-compatible, SageMaker with the `sagemaker` feature, and the
/// fetcher for metrics pages (the `kneepoint-transport` crate).
#[cfg(feature = "openai")]
pub use kneepoint_transport as transport;
/// Prompts: tokenizers, exact-length synthetic prompts, datasets and traces (the
/// `kneepoint-workload` crate).
pub use kneepoint_workload as workload;

pub use kneepoint_engine::{
    rerender, Bench, CancelToken, LevelSettings, Observer, Recommend, RecommendReport, Search,
    SearchReport, Sweep, SweepReport,
};

/// Synthetic prompts of exactly `isl` tokens (o200k_base) asking for `osl` tokens each, drawn
/// from `seed`: the workload of most sweeps. For length distributions, shared prefixes or
/// conversations, build a [`workload::SyntheticWorkload`] from a
/// [`workload::SyntheticConfig`].
#[cfg(feature = "builtin-tokenizer")]
pub fn synthetic(isl: u32, osl: u32, seed: u64) -> Result<workload::SyntheticWorkload, Error> {
    use workload::{load_tokenizer, LengthDist, SyntheticWorkload};
    let tokenizer = load_tokenizer("builtin")?;
    Ok(SyntheticWorkload::new(
        tokenizer,
        LengthDist::Fixed(isl),
        LengthDist::Fixed(osl),
        seed,
    )?)
}

/// The README's Rust examples, compiled by `cargo test` so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExamples;
