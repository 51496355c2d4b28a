//! How a level runs: its settings, deadlines, retry policy, open-loop schedule and hooks.

use std::sync::Arc;
use std::time::Duration;

use kneepoint_core::{ApproxTokenCounter, RequestRecord, TokenCounter};

use crate::early_stop::EarlyStop;
use crate::CancelToken;

/// Called for every finished record, off the request path (e.g. to advance a progress bar).
pub type RecordObserver = Arc<dyn Fn(&RequestRecord) + Send + Sync>;

/// Awaited between a level's warm-up and its measured phase (only when there was a warm-up),
/// before the measured clock starts: e.g. a side channel taking a reading that separates the
/// two (the server-metrics scraper). It must be bounded; its time is not measured.
pub type PhaseHook =
    Arc<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

/// How to run one level.
#[derive(Clone)]
#[non_exhaustive]
pub struct LevelConfig {
    /// Requests kept in flight.
    pub concurrency: u32,
    /// Per-request deadlines.
    pub deadlines: Deadlines,
    /// Stops the level: in-flight requests end as `cancelled`, no new one is sent.
    pub cancel: CancelToken,
    /// Counts output tokens when the server reports no usage.
    pub token_counter: Arc<dyn TokenCounter>,
    /// Capacity of the queue between the request tasks and the sinks (default 4,096). The
    /// sinks' thread takes records in batches and naps about a millisecond between batches
    /// while records keep coming, so a queue much smaller than a millisecond's records would
    /// hold senders up.
    pub sink_queue: usize,
    /// A response that ends without a `finish_reason` is a failure (`incomplete`): the server
    /// cut the generation short. Off by default for transports that never report one.
    pub require_finish_reason: bool,
    /// Take the server's `completion_tokens` as given, even when implausible (by default a
    /// count that the chunks and text cannot hold is set aside for the client's count).
    pub trust_server_usage: bool,
    /// Retries of failed requests; none by default (a benchmark must see errors).
    pub retry: RetryPolicy,
    /// Open-loop load: requests start on a schedule (`concurrency` is then unused).
    pub open_loop: Option<OpenLoop>,
    /// Stop sending once the key metrics are precise enough (measured phase only).
    pub early_stop: Option<EarlyStop>,
    /// Closed loop: spread each phase's first wave over this time (slot `k` of `n` sends its
    /// first request `k/n` of the way through). Without it every slot sends at the same
    /// instant, and requests of equal length then keep starting and streaming in lock-step,
    /// so the first wave's queueing in the client and the server shows in TTFT. Requests are
    /// timed from when they are sent, so the ramp itself adds no latency.
    pub ramp_up: Option<Duration>,
    /// Awaited after the warm-up, before the measured phase starts (none by default).
    pub after_warmup: Option<PhaseHook>,
    /// Measured requests in flight now (a relaxed atomic add and subtract around each), for a
    /// live view; none by default.
    pub in_flight: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Keep each response's generated text in its record (`response_text`,
    /// `reasoning_text`), for an export of the outputs; off by default (memory).
    pub keep_outputs: bool,
    /// Keep at most this many measured records in [`LevelRun::records`](crate::LevelRun::records); past it records
    /// still reach every sink and the observer as they finish, but the run keeps none
    /// ([`LevelRun::records_seen`](crate::LevelRun::records_seen) counts them), so a level of any length holds memory flat.
    /// `None` (the default) keeps every record.
    pub keep_records: Option<usize>,
    /// Closed loop: keep the server loaded from the first measured request to the last. The
    /// warm-up becomes a lead-in sent by the same slots with no pause before the measured
    /// requests, and once every measured request is sent, slots that come free send fillers
    /// (records dropped) until the last one ends, so no measured request sees the first
    /// wave's burst or the last wave's drain. The level's rates should then be counted from
    /// [`LevelRun::measured_starts_ns`](crate::LevelRun::measured_starts_ns). Fillers are the
    /// level's first wave of requests again ([`run_level`](crate::run_level)), further requests from the
    /// source ([`run_level_drawn`](crate::run_level_drawn)), or the ones given
    /// ([`run_level_loaded`](crate::run_level_loaded)). Off by default; open loops and
    /// multi-turn conversations ignore it.
    pub keep_loaded: bool,
}

/// Open-loop load: each request starts at its intended time, whatever the server is doing, so a
/// slow server faces a growing queue instead of a slower client (no coordinated omission).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenLoop {
    /// Intended start of each measured request, from the measured phase's origin.
    pub offsets: Vec<Duration>,
    /// Intended starts of the warm-up requests, from the warm-up's origin.
    pub warmup_offsets: Vec<Duration>,
    /// Cap on requests in flight (`None`: unbounded). A request waiting for a slot is sent
    /// late, and its lag counts against the server.
    pub max_in_flight: Option<u32>,
}

/// Retries of requests that failed before their first token with a transient error (connect,
/// connection lost, HTTP 429/502/503/504). The record's times span every attempt, so a retried
/// request shows its full latency; `attempts` says how many were made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Extra attempts after the first (0 = no retries).
    pub max_retries: u32,
    /// Wait before the first retry; doubled for each further one.
    pub backoff: Duration,
}

impl std::fmt::Debug for LevelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelConfig")
            .field("concurrency", &self.concurrency)
            .field("deadlines", &self.deadlines)
            .field("token_counter", &self.token_counter.name())
            .finish_non_exhaustive()
    }
}

impl LevelConfig {
    /// `concurrency` in flight, no timeout, approximate token counting.
    pub fn new(concurrency: u32) -> Self {
        LevelConfig {
            concurrency,
            deadlines: Deadlines::default(),
            cancel: CancelToken::new(),
            token_counter: Arc::new(ApproxTokenCounter),
            sink_queue: 4096,
            require_finish_reason: false,
            trust_server_usage: false,
            retry: RetryPolicy::default(),
            open_loop: None,
            early_stop: None,
            ramp_up: None,
            after_warmup: None,
            in_flight: None,
            keep_outputs: false,
            keep_records: None,
            keep_loaded: false,
        }
    }
}

/// Per-request deadlines; `None` waits forever. Each expiry ends the request as a `timeout`
/// record that keeps what had arrived.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadlines {
    /// The whole request, from send to end of stream.
    pub request: Option<Duration>,
    /// Until the response headers arrive.
    pub response: Option<Duration>,
    /// Until the first token, from the request's start.
    pub first_token: Option<Duration>,
    /// The longest gap between two events of a response (the first one counted from the
    /// response headers).
    pub idle: Option<Duration>,
}

/// Where a duration-bound level, or a level drawn as it goes, takes its next request (`None`
/// ends the level early).
pub type RequestSource = Box<dyn FnMut() -> Option<kneepoint_core::Request> + Send>;
