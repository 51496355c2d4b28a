//! kneepoint's deployments: bring a candidate configuration up, say where it answers, keep its
//! log, and always take it down; find and remove what an earlier crashed run left behind.
//!
//! - [`LocalSpec`] runs a candidate as a local server process (vLLM, SGLang, llama.cpp's
//!   server, `kneepoint sim serve`, anything with an HTTP port): a command template filled
//!   with the candidate's settings and a free port, a process group of its own, its output in
//!   `logs/server.log`, an HTTP readiness probe with a deadline, and a stop by group
//!   (`SIGTERM`, a grace period, `SIGKILL`). A server that exits early, never answers, or
//!   finds its port taken fails with the server's own error line and the end of its log.
//! - [`LocalDeployment`] implements the engine's [`Deployment`](kneepoint_engine::Deployment),
//!   which [`Recommend`](kneepoint_engine::Recommend) tears down after each candidate's run,
//!   whatever its outcome; dropped while running, it kills its group at once.
//! - `KubeSpec` (feature `kubernetes`) writes a candidate as a Kubernetes Deployment and
//!   Service from `k8s-openapi`'s structs, for `kubectl apply`; `indexed_job` (same feature)
//!   a sweep sharded over the pods of an Indexed Job (`kneepoint k8s job`).
//! - [`find_leftovers`] lists the tagged processes whose launching kneepoint is gone, and
//!   [`remove_leftovers`] stops them (`kneepoint cleanup`).
//!
//! Hand-written rather than a crate: process groups and `/proc` are a few system calls
//! (through `nix`), and readiness uses the HTTP client the caller already has (a
//! [`kneepoint_core::Fetch`]), so this crate adds no HTTP stack of its own.
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use kneepoint_core::{async_trait, Fetch, Fetched};
//! use kneepoint_deploy::LocalSpec;
//! use kneepoint_runner::CancelToken;
//!
//! /// Answers every probe with 200 (a real caller passes kneepoint-transport's `Fetcher`).
//! #[derive(Debug)]
//! struct AlwaysReady;
//! #[async_trait]
//! impl Fetch for AlwaysReady {
//!     async fn get(&self, _: &str, _: std::time::Duration, _: usize) -> Result<Fetched, String> {
//!         Ok(Fetched::new(200, Vec::new(), 0, 0, 0))
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let command = ["sh", "-c", "echo serving {model} on {port}; exec sleep 60"];
//! let mut spec = LocalSpec::new(
//!     "demo",
//!     command.iter().map(|s| s.to_string()).collect(),
//!     dir.path().join("logs/server.log"),
//! );
//! spec.values.insert("model".into(), "tiny".into());
//! let mut server = spec.launch(Arc::new(AlwaysReady), &CancelToken::new()).await.unwrap();
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! server.stop().await.unwrap();
//! server.stop().await.unwrap(); // idempotent
//! # });
//! ```

mod argv_secrets;
mod error;
#[cfg(feature = "kubernetes")]
mod kubernetes;
mod leftovers;
mod live;
mod local;
mod log_pump;
mod orphans;
mod ports;
mod process;
#[cfg(feature = "sagemaker")]
mod sagemaker;
#[cfg(feature = "sagemaker")]
mod sagemaker_leftovers;
#[cfg(feature = "kubernetes")]
mod sharded_job;
mod template;

pub use argv_secrets::redact_argv;
pub use error::{Error, LogTail};
#[cfg(feature = "kubernetes")]
pub use kubernetes::{dns_label, is_dns_label, KubeSpec, ARG_SECRET, MAX_NAME};
pub use leftovers::{find_leftovers, launched_by, remove_leftovers, Leftover, TAG_VAR};
pub use live::{kill_all_now, remote_left};
pub use local::{LocalDeployment, LocalSpec};
pub use orphans::adopt_orphans;
#[cfg(feature = "sagemaker")]
pub use sagemaker::{SageMakerDeployment, SageMakerSpec, CANDIDATE_TAG, LAUNCHER_TAG};
#[cfg(feature = "sagemaker")]
pub use sagemaker_leftovers::{
    find_sagemaker_leftovers, remove_sagemaker_leftovers, SageMakerLeftover,
};
#[cfg(feature = "kubernetes")]
pub use sharded_job::{indexed_job, sweep_flags, ShardedJob, MAX_JOB_NAME};
pub use template::{placeholders, render, shell_line};
