//! How each level runs: request counts, warm-up, repetition, load shape, deadlines, retries.

use std::time::Duration;

use kneepoint_metrics::ConvergenceRule;
use kneepoint_runner::{Arrival, Deadlines, EarlyStop, LevelDuration, RetryPolicy};

/// How every level of a sweep, search or recommendation runs. Start from
/// [`LevelSettings::default`] and change what you need; [`LevelSettings::validate`] (called by
/// every builder) says what does not fit together.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LevelSettings {
    /// Measured requests per level (a sweep's plan may say otherwise per level).
    pub request_count: u32,
    /// Warm-up requests sent before each level's measured ones (not recorded).
    pub warmup_requests: u32,
    /// Keep each closed-loop, count-bound level loaded from its first measured request to its
    /// last ([`kneepoint_runner::LevelConfig::keep_loaded`]): a lead-in of at least this many
    /// requests and at least one per slot, sent with no pause before the measured ones (in
    /// place of `warmup_requests`, for every run of a level), and a wave of fillers after them.
    /// The level's rates are then counted from the measured requests' starts
    /// ([`kneepoint_metrics::loaded_duration_s`]). `None` (the default): the warm-up, if any,
    /// ends before the measured requests start, and the last wave drains.
    pub lead_in: Option<u32>,
    /// Repeated runs of each level.
    pub runs: RunsSettings,
    /// Open-loop arrivals (`None`: a closed loop at each level's concurrency).
    pub open_loop: Option<OpenLoopSettings>,
    /// Timed levels (`None`: each level sends its request count).
    pub duration: Option<LevelDuration>,
    /// Stop a level early once its statistics are precise enough (`batch` is set per level).
    pub early_stop: Option<EarlyStop>,
    /// Closed loop: each phase's first wave is spread over this time.
    pub ramp_up: Option<Duration>,
    /// Per-request deadlines.
    pub deadlines: Deadlines,
    /// A response without a finish reason is an `incomplete` failure.
    pub require_finish_reason: bool,
    /// Retries of transient failures (none by default).
    pub retry: RetryPolicy,
    /// Keep the server's `completion_tokens` even when implausible.
    pub trust_server_usage: bool,
    /// Seeds the open-loop arrival schedules.
    pub seed: u64,
    /// Write each level's generated text to `outputs.json` (off by default).
    pub export_outputs: bool,
    /// Wall-clock time (Unix ns) to start the first level at: shards of one sweep on several
    /// machines start together this way (`--start-at`). A time already past starts at once,
    /// with a warning saying by how much.
    pub start_at_unix_ns: Option<u64>,
    /// Write each level's records as `profile_export.jsonl.zst` (zstd) instead of plain JSON
    /// lines: about a tenth of the bytes for long levels.
    pub compress_records: bool,
    /// Measured records a level keeps in memory for its summary; a longer level summarises
    /// them as they finish in bounded memory ([`kneepoint_metrics::StreamingSummary`]) and
    /// keeps none. Default [`RECORDS_IN_MEMORY`].
    pub records_in_memory: usize,
    /// With records past `records_in_memory`: make every percentile exact with a second pass
    /// over the level's JSONL (without it they are within 0.1 %).
    pub exact_percentiles: bool,
    /// Requests a level lists in full in `inputs.json` (the rest as their ids and lengths,
    /// and the seed regenerates them). Default [`INPUTS_LIMIT`].
    pub inputs_limit: usize,
    /// Prompt text a count-bound closed-loop level may prepare in full before its first
    /// request; a larger level (millions of requests) draws its requests just ahead of the
    /// senders instead, in bounded memory, with the same prompts. Default [`PREPARED_BYTES`].
    pub prepared_bytes: usize,
    /// Cut each level into time slices of this many seconds: per-slice aggregates in
    /// `profile_export_aiperf_timeslices.json/.csv` and a steadiness verdict
    /// ([`kneepoint_metrics::time_slices`]); levels summarised in bounded memory have none.
    pub slice_s: Option<f64>,
    /// Per-request SLOs (`--goodput`): each level reports `goodput` (requests/s that met them
    /// all) and `slo_miss_rate` (the share, failures included, that did not). None by default.
    pub goodput: kneepoint_metrics::GoodputSlo,
}

/// Default [`LevelSettings::records_in_memory`]: about 300 MB of records at 256 output
/// tokens each.
pub const RECORDS_IN_MEMORY: usize = 200_000;

/// Default [`LevelSettings::prepared_bytes`]: 256 MiB of prompt text (the default job's widest
/// level, 4,096 prompts of ~5 KB, is prepared in full, and so is a long-context level of 1,024
/// prompts of 32k tokens).
pub const PREPARED_BYTES: usize = 256 << 20;

/// Default [`LevelSettings::inputs_limit`]: AIPerf-compatible `inputs.json` for levels up to
/// this many requests (about 120 MB at 128-token prompts).
pub const INPUTS_LIMIT: usize = 100_000;

impl Default for LevelSettings {
    fn default() -> Self {
        LevelSettings {
            request_count: 100,
            warmup_requests: 0,
            lead_in: None,
            runs: RunsSettings::default(),
            open_loop: None,
            duration: None,
            early_stop: None,
            ramp_up: None,
            deadlines: Deadlines::default(),
            require_finish_reason: false,
            retry: RetryPolicy::default(),
            trust_server_usage: false,
            seed: 0,
            export_outputs: false,
            start_at_unix_ns: None,
            compress_records: false,
            records_in_memory: RECORDS_IN_MEMORY,
            exact_percentiles: false,
            inputs_limit: INPUTS_LIMIT,
            prepared_bytes: PREPARED_BYTES,
            slice_s: None,
            goodput: kneepoint_metrics::GoodputSlo::default(),
        }
    }
}

impl LevelSettings {
    /// Checks that the settings describe a run that can be made.
    pub fn validate(&self) -> Result<(), crate::Error> {
        if self.request_count == 0 && self.duration.is_none() {
            return Err(crate::Error::invalid("request_count must be at least 1"));
        }
        if self.runs.num_runs == 0 {
            return Err(crate::Error::invalid("num_runs must be at least 1"));
        }
        if self.slice_s.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
            return Err(crate::Error::invalid(
                "the time slice must be a positive number of seconds",
            ));
        }
        if !(self.runs.confidence > 0.0 && self.runs.confidence < 1.0) {
            return Err(crate::Error::invalid(
                "the confidence level must be between 0 and 1 (exclusive)",
            ));
        }
        if self.lead_in.is_some() {
            if self.warmup_requests > 0 {
                return Err(crate::Error::invalid(
                    "a level kept loaded has a lead-in in place of warm-up requests: give one of them",
                ));
            }
            if self.open_loop.is_some() || self.duration.is_some() {
                return Err(crate::Error::invalid(
                    "a lead-in keeps a closed loop of a set request count loaded: not an open loop or a timed level",
                ));
            }
        }
        if let Some(o) = &self.open_loop {
            if o.replay_speedup.is_some() && self.duration.is_some() {
                return Err(crate::Error::invalid(
                    "a trace replay runs for the trace's own length: drop the duration",
                ));
            }
            if o.replay_speedup.is_none() && o.rates.is_empty() {
                return Err(crate::Error::invalid(
                    "an open loop needs at least one request rate",
                ));
            }
            if let Some(r) = o.rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
                return Err(crate::Error::invalid(format!(
                    "request rates must be positive requests/s, not {r}"
                )));
            }
        }
        Ok(())
    }
}

/// Open-loop arrivals.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OpenLoopSettings {
    /// One level per rate (requests/s).
    pub rates: Vec<f64>,
    /// The arrival process.
    pub arrival: Arrival,
    /// Cap on requests in flight.
    pub max_in_flight: Option<u32>,
    /// Trace replay: the speed-up of the recorded send times (then `rates` is empty).
    pub replay_speedup: Option<f64>,
}

impl OpenLoopSettings {
    /// One level per rate, arrivals drawn from `arrival`.
    pub fn rates(rates: Vec<f64>, arrival: Arrival) -> Self {
        OpenLoopSettings {
            rates,
            arrival,
            max_in_flight: None,
            replay_speedup: None,
        }
    }

    /// One level replaying a trace's send times, `speedup` times faster.
    pub fn replay(speedup: f64) -> Self {
        OpenLoopSettings {
            rates: Vec::new(),
            arrival: Arrival::Constant,
            max_in_flight: None,
            replay_speedup: Some(speedup),
        }
    }

    /// Caps the requests in flight.
    pub fn with_max_in_flight(mut self, cap: Option<u32>) -> Self {
        self.max_in_flight = cap;
        self
    }
}

/// Repeated runs of each level.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunsSettings {
    /// Runs per level (the cap with convergence); 1 = a single run, no `profile_runs/`.
    pub num_runs: u32,
    /// Confidence level of the intervals.
    pub confidence: f64,
    /// Stop early once this converges.
    pub convergence: Option<ConvergenceRule>,
}

impl Default for RunsSettings {
    fn default() -> Self {
        RunsSettings {
            num_runs: 1,
            confidence: 0.95,
            convergence: None,
        }
    }
}

impl RunsSettings {
    /// `num_runs` runs per level with intervals at `confidence`, stopping early when
    /// `convergence` (if any) is met.
    pub fn new(num_runs: u32, confidence: f64, convergence: Option<ConvergenceRule>) -> Self {
        RunsSettings {
            num_runs,
            confidence,
            convergence,
        }
    }
}
