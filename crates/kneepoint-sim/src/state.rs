//! What a running simulator holds, and the options it was started with.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use kneepoint_core::TokenCounter;
use rand::rngs::StdRng;

use crate::live::EngineHandle;
use crate::metrics::EngineMetrics;
use crate::request::Api;
use crate::truth::{TruthLog, WallClock};
use crate::SimProfile;

pub(crate) struct State {
    pub(crate) profile: SimProfile,
    #[cfg_attr(not(feature = "sagemaker"), allow(dead_code))]
    pub(crate) options: SimOptions,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) model_json: String,
    /// The engines (data-parallel replicas), each request sent to the least loaded.
    pub(crate) engines: Vec<EngineHandle>,
    pub(crate) next_id: AtomicU64,
    pub(crate) lengths: Mutex<StdRng>,
    /// Zero-latency mode: rendered bodies by (api, stream, usage, prompt and output tokens,
    /// finish reason).
    pub(crate) rendered: Mutex<RenderedBodies>,
    /// The server-side truth of completed requests.
    pub(crate) truth: Arc<Mutex<TruthLog>>,
    pub(crate) clock: WallClock,
    /// The engine's Prometheus view.
    pub(crate) metrics: Arc<Mutex<EngineMetrics>>,
}

type RenderedBodies = std::collections::HashMap<(Api, bool, bool, u32, u32, &'static str), Bytes>;

/// A SigV4 key the simulator checks SageMaker-protocol requests against. `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct SigV4TestKey {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
}

impl std::fmt::Debug for SigV4TestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigV4TestKey")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Server options beyond the engine profile.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// Check SageMaker-protocol requests' signatures against this key (unsigned or wrongly
    /// signed requests get 403, as from AWS); `None` accepts any.
    pub sigv4: Option<SigV4TestKey>,
    /// Answer only this SageMaker endpoint name (others get 400 `ValidationError`); `None`
    /// answers any name.
    pub endpoint_name: Option<String>,
    /// Engines behind the one port, each its own copy of the profile's engine (data
    /// parallelism, as vLLM's `--data-parallel-size`): a request goes to the engine with the
    /// fewest in flight; `/metrics` shows their sums. 0 or 1: one engine.
    pub data_parallel_size: usize,
}

/// The most engines one simulator runs.
pub const MAX_DATA_PARALLEL: usize = 64;
