//! `kneepoint-sim`: a simulated LLM inference server with a continuous-batching engine model,
//! speaking the OpenAI-compatible API (chat and completions, SSE streaming or whole responses)
//! and the SageMaker runtime protocol (SigV4-checked `InvokeEndpoint` and
//! `InvokeEndpointWithResponseStream` with event-stream framing; OpenAI or TGI bodies) on
//! loopback. It is kneepoint's embedded default target and the tests' ground truth.
//!
//! The engine ([`EngineModel`]) is pure and clock-free: a limit of concurrent sequences
//! (`max_num_seqs`), a KV-cache token budget, chunked prefill with a per-token cost, a decode
//! step whose duration grows with batch size and context, a FIFO queue when full, and optional
//! jitter. [`SimServer`] drives it in real time (scaled by `time_scale`) on its own thread and
//! records the server-side truth of every request ([`SimServer::truth`]); `GET /metrics`
//! shows its engine state (running, waiting, KV usage, TTFT/ITL/e2e/queue histograms) under
//! vLLM's names, and [`SimServer::load_history`] is the truth a scrape is checked against.
//! [`predict_closed_loop`] runs the same engine in virtual time.
//!
//! # Example
//! ```
//! use kneepoint_sim::{SimProfile, SimServer};
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let server = SimServer::start_local(SimProfile::fast()).await.unwrap();
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! # });
//! ```

mod engine;
mod error;
mod fault;
mod fixed;
mod generate;
mod live;
mod media;
mod metrics;
mod modes;
mod predict;
mod profile;
mod render;
mod request;
mod respond;
#[cfg(feature = "sagemaker")]
mod sagemaker;
mod server;
mod sse_body;
mod state;
mod truth;
mod words;

pub use engine::{Emission, EngineModel, Rejection, SeqSpec, Step, DRIFT_STEPS};
pub use error::Error;
pub use fault::{Fault, FaultPlan};
pub use metrics::LoadSample;
pub use predict::{predict_closed_loop, predict_closed_loop_with, Prediction};
pub use profile::{ExpertReads, FixedTiming, SimProfile, MAX_TIME_SCALE, MIN_TIME_SCALE};
pub use server::{default_counter, SimServer};
pub use state::{SigV4TestKey, SimOptions, MAX_DATA_PARALLEL};
pub use truth::{ServerTiming, TruthLog};
