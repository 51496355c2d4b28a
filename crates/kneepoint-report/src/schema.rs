//! The typed top-level documents of an artifact folder: `sweep_summary.json`,
//! `search_history.json` and `recommendations.json`. The engine writes these types; readers
//! (this crate, other tools) decode them. Each carries [`SCHEMA_VERSION`]; files written before
//! the field existed have none and read as version 0 (same fields). The documents are plain
//! structs so that writers can build them; [`LevelRow`] and [`ProbeRow`] have constructors.

use kneepoint_core::{Metric, Stat, StatKey};
use kneepoint_planner::{
    FleetPlan, KneeEstimate, Objective, OperatingZone, Outcome, PeakPlan, PeakTraffic, ProbeRecord,
    Recommendation, SearchConfig, SearchCost, Sla,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the documents below. Raised when a field changes meaning or goes away (new
/// fields do not raise it).
pub const SCHEMA_VERSION: u32 = 1;

/// A condensed per-level row of `sweep_summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LevelRow {
    /// Requests in flight.
    pub concurrency: u32,
    /// Measured requests recorded.
    pub request_count: usize,
    /// Failures.
    pub error_count: usize,
    /// failed / recorded.
    pub error_rate: f64,
    /// Of the failures, the requests the run cut off (an interrupt, the end of a timed
    /// level): not the server's failures, so the zone leaves them out of the error rate it
    /// judges a level by.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cancelled_count: usize,
    /// Seconds.
    pub benchmark_duration_s: f64,
    /// Successful requests / s.
    pub request_throughput: f64,
    /// Output tokens / s.
    pub output_token_throughput: f64,
    /// Input tokens / s (what a pooling endpoint is measured by).
    #[serde(default)]
    pub input_token_throughput: f64,
    /// TTFT p50, ms.
    pub ttft_p50_ms: Option<f64>,
    /// TTFT p95, ms.
    pub ttft_p95_ms: Option<f64>,
    /// ITL p95, ms.
    pub itl_p95_ms: Option<f64>,
    /// Request latency p50, ms.
    pub e2e_p50_ms: Option<f64>,
    /// Request latency p90, ms.
    pub e2e_p90_ms: Option<f64>,
    /// Request latency p99, ms.
    pub e2e_p99_ms: Option<f64>,
    /// p99 − p50 of request latency, ms (a growing gap signals queueing).
    pub e2e_spread_ms: Option<f64>,
    /// Whether every SLA held (None when no SLA was given).
    pub meets_slas: Option<bool>,
    /// The first SLA that failed.
    pub first_breach: Option<String>,
    /// True at the knee.
    pub is_knee: bool,
    /// This level's artifact folder, relative to the sweep's.
    pub dir: String,
    /// What the server's metrics showed (concept → statistic → value), when scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics:
        Option<std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>>>,
    /// The probability that every SLA holds at this level, from each SLA's reading and its
    /// bootstrap spread (None without SLAs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla_pass_probability: Option<f64>,
    /// 90 % intervals of the level's statistics, keyed `metric:stat` (from the summary).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[serde(deserialize_with = "kneepoint_metrics::known_keys")]
    pub intervals: std::collections::BTreeMap<StatKey, kneepoint_metrics::StatInterval>,
    /// Why the client, not the server, may have shaped this level (it is then left out of the
    /// knee and the zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_limited: Option<String>,
    /// Output tokens/s each user sees: the median over requests of 1000 / the request's mean
    /// inter-token latency (streaming only; the median, because a request whose tokens were
    /// read in one burst has a near-zero ITL and would swamp a mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_token_throughput_per_user: Option<f64>,
    /// Why the level was not steady over its time slices (`--slice-s`), when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_steady: Option<String>,
    /// Requests/s that met every per-request SLO (`--goodput`), when SLOs were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<f64>,
    /// The share of requests, failures included, that missed an SLO (one minus attainment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_miss_rate: Option<f64>,
}

impl LevelRow {
    /// The row's server view as a summary (for [`kneepoint_planner::explain_knee`]).
    pub fn server_summary(&self) -> Option<kneepoint_core::ServerSummary> {
        let mut s = kneepoint_core::ServerSummary::default();
        s.concepts = self.server_metrics.clone()?;
        Some(s)
    }

    /// The row of a level summarised as `s`, in folder `dir`, given its SLA verdict.
    pub fn new(
        s: &kneepoint_metrics::LevelSummary,
        dir: String,
        meets_slas: Option<bool>,
        first_breach: Option<String>,
    ) -> Self {
        let st = |m: Metric, q: Stat| s.value(m, q);
        LevelRow {
            concurrency: s.concurrency,
            request_count: s.request_count,
            error_count: s.error_count,
            error_rate: s.error_rate,
            cancelled_count: s
                .errors_by_kind
                .get(&kneepoint_core::ErrorKind::Cancelled)
                .copied()
                .unwrap_or(0),
            benchmark_duration_s: s.benchmark_duration_s,
            request_throughput: s.request_throughput,
            output_token_throughput: s.output_token_throughput,
            input_token_throughput: s.input_token_throughput,
            ttft_p50_ms: st(Metric::TimeToFirstToken, Stat::P50),
            ttft_p95_ms: st(Metric::TimeToFirstToken, Stat::P95),
            itl_p95_ms: st(Metric::InterTokenLatency, Stat::P95),
            e2e_p50_ms: st(Metric::RequestLatency, Stat::P50),
            e2e_p90_ms: st(Metric::RequestLatency, Stat::P90),
            e2e_p99_ms: st(Metric::RequestLatency, Stat::P99),
            e2e_spread_ms: st(Metric::RequestLatency, Stat::P99)
                .zip(st(Metric::RequestLatency, Stat::P50))
                .map(|(a, b)| a - b),
            meets_slas,
            first_breach,
            is_knee: false,
            dir,
            server_metrics: s.server.as_ref().map(|v| v.concepts.clone()),
            sla_pass_probability: None,
            intervals: s.intervals.clone(),
            client_limited: s.client.as_ref().and_then(|c| c.client_limited.clone()),
            output_token_throughput_per_user: st(Metric::OutputTokenThroughputPerUser, Stat::P50),
            not_steady: s
                .steadiness
                .as_ref()
                .and_then(|t| t.not_steady().map(str::to_owned)),
            goodput: s.goodput,
            slo_miss_rate: s.slo_miss_rate,
        }
    }

    /// The relative standard error of `metric`'s `stat` at this level, when known.
    pub fn relative_se(&self, metric: Metric, stat: Stat) -> Option<f64> {
        let key = StatKey::new(metric, stat);
        self.intervals.get(&key).map(|i| i.relative_se)
    }

    /// The 90 % interval of `metric`'s `stat`, when known.
    pub fn interval(&self, metric: Metric, stat: Stat) -> Option<[f64; 2]> {
        let key = StatKey::new(metric, stat);
        self.intervals.get(&key).map(|i| [i.low, i.high])
    }
}

/// Whether a count is zero (left out of the document).
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `sweep_summary.json`: the levels, the knee, the operating zone and the fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSummary {
    /// [`SCHEMA_VERSION`] when written (0: before versioning).
    #[serde(default)]
    pub schema_version: u32,
    /// The writer's version.
    pub kneepoint_version: String,
    /// Every planned level ran.
    pub complete: bool,
    /// Stopped by an interrupt.
    pub interrupted: bool,
    /// `open_loop` for a sweep of request rates (absent: closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
    /// The run's settings (no secrets).
    pub settings: Value,
    /// The closed-loop plan: `[{concurrency, request_count}]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels_planned: Option<Value>,
    /// Open loop: each level's request rate, in run order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rates: Option<Vec<f64>>,
    /// SLAs judged at each level.
    #[serde(default)]
    pub slas: Vec<Sla>,
    /// One row per level, in run order.
    pub levels: Vec<LevelRow>,
    /// The knee (closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<KneeEstimate>,
    /// Why the knee is where it is, from the server's metrics (when scraped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee_explanation: Option<kneepoint_planner::KneeExplanation>,
    /// The operating zone.
    pub zone: OperatingZone,
    /// Peak traffic the fleet is sized for.
    #[serde(default)]
    pub peak: Option<PeakTraffic>,
    /// Instances for the peak.
    #[serde(default)]
    pub fleet: Option<FleetPlan>,
    /// The Pareto front of per-user speed against output tokens/s per instance over the levels
    /// (closed loop, levels with output tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pareto: Option<kneepoint_planner::ParetoFront>,
}

/// One probe of `search_history.json`: the planner's record and the probe's folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ProbeRow {
    /// What was probed and the verdict.
    #[serde(flatten)]
    pub record: ProbeRecord,
    /// The probe's artifact folder, relative to the search's.
    pub dir: String,
}

impl ProbeRow {
    /// The row of `record` in folder `dir`.
    pub fn new(record: ProbeRecord, dir: String) -> Self {
        ProbeRow { record, dir }
    }
}

/// `search_history.json`: every probe, the boundary found and the zone over the probes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHistory {
    /// [`SCHEMA_VERSION`] when written (0: before versioning).
    #[serde(default)]
    pub schema_version: u32,
    /// The writer's version.
    pub kneepoint_version: String,
    /// The recipe (`max-concurrency-under-sla`, or `max-goodput-under-slo` when the search
    /// judged the share of requests meeting per-request SLOs).
    pub recipe: String,
    /// The search finished.
    pub complete: bool,
    /// Stopped by an interrupt.
    pub interrupted: bool,
    /// The run's settings (no secrets).
    pub settings: Value,
    /// The search's parameters and SLAs.
    pub search_params: SearchConfig,
    /// Every probe, in order.
    pub probes: Vec<ProbeRow>,
    /// The answer so far.
    pub boundary: Outcome,
    /// Knee and zone over the probed levels.
    pub zone: Option<OperatingZone>,
    /// Probes, requests and endpoint time spent, beside what doubling + bisection would have
    /// spent (absent in files written before it was recorded).
    #[serde(default)]
    pub cost: Option<SearchCost>,
}

/// A price table's provenance, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceSource {
    /// The table's file.
    pub path: Option<String>,
    /// When the prices were read.
    pub as_of: String,
    /// Where they come from.
    pub source: Option<String>,
}

impl PriceSource {
    /// A table read from `path`, dated `as_of`.
    pub fn new(path: Option<String>, as_of: String, source: Option<String>) -> Self {
        PriceSource {
            path,
            as_of,
            source,
        }
    }
}

/// One ranked candidate of `recommendations.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedCandidate {
    /// The planner's verdict.
    #[serde(flatten)]
    pub recommendation: Recommendation,
    /// The candidate's run, relative to the recommendation's folder.
    pub artifact_dir: Option<String>,
    /// The stage-1 bound on its concurrency (sequences its engines hold at once), when a model
    /// config was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// The first-order prediction for it, beside the measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<kneepoint_fit::Prediction>,
    /// GPUs one engine spans (tensor parallelism), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_parallel: Option<u32>,
    /// Engines one instance runs (data-parallel replicas), when known: what was measured and
    /// priced is the whole instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas_per_instance: Option<u32>,
    /// What kneepoint launched to measure it (absent: an endpoint somebody else runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentRecord>,
    /// The trials the adaptive strategy gave it, in order: `screened`, `searched`, or
    /// `skipped: why` (empty under the grid strategy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trials: Vec<String>,
}

/// What a recommendation spent on launched candidates, and what the grid would have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// Servers launched (a screened then searched combination twice; a launch that failed
    /// to start counts, with its instance-hours until it failed).
    pub launches: u32,
    /// Instance-hours the launches kept up (instances × hours from launch to teardown).
    pub instance_hours: f64,
    /// Those instance-hours at each candidate's price.
    pub cost: f64,
    /// Launches a grid would have made: one per candidate that fits.
    pub grid_launches: u32,
    /// The grid's instance-hours, estimated from the full measurements made (their mean per
    /// launch × the grid's launches); measured when the strategy was the grid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid_instance_hours: Option<f64>,
}

/// What kneepoint launched for a candidate, what that took, and how to deploy it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentRecord {
    /// The exact configuration to deploy (a command line, request bodies, manifests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<Value>,
    /// Seconds from the launch until it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_s: Option<f64>,
    /// Seconds from the launch until it was taken down: what the benchmark kept it up.
    pub up_s: f64,
    /// Seconds taking it down.
    pub teardown_s: f64,
    /// Instance-hours the benchmark used (`up_s` × instances).
    pub instance_hours: f64,
    /// Their cost at the candidate's price.
    pub benchmark_cost: f64,
    /// Why it could not be taken down: it may be left running (`kneepoint cleanup` finds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown_error: Option<String>,
}

/// `recommendations.json`: the ranking of the candidates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendations {
    /// [`SCHEMA_VERSION`] when written (0: before versioning).
    #[serde(default)]
    pub schema_version: u32,
    /// The writer's version.
    pub kneepoint_version: String,
    /// Every candidate was measured.
    pub complete: bool,
    /// Stopped by an interrupt.
    pub interrupted: bool,
    /// The objective ranked by.
    pub objective: Objective,
    /// `max-concurrency-under-sla` or `sweep`.
    pub mode: String,
    /// Currency of the costs.
    pub currency: String,
    /// The price table, when one was used.
    pub price_table: Option<PriceSource>,
    /// Peak traffic and headroom the fleets are sized for.
    pub peak: Option<PeakPlan>,
    /// Hours in the monthly cost.
    pub hours_per_month: f64,
    /// Ranked candidates, then those that meet no SLA.
    pub candidates: Vec<RankedCandidate>,
    /// Candidates not measured (interrupted).
    #[serde(default)]
    pub not_measured: Vec<String>,
    /// Which engine settings the objective proposed for launched candidates, and why (stage 2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proposals: Vec<String>,
    /// The Pareto front over every candidate's levels that met the SLAs (per-user speed
    /// against throughput per dollar, per GPU or per instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pareto: Option<kneepoint_planner::ParetoFront>,
    /// `grid` (every candidate measured) or `adaptive` (issue 49: screen, skip, search what
    /// could win).
    #[serde(default = "grid")]
    pub strategy: String,
    /// Why the adaptive search stopped (`certain`, `exhausted`, `budget`), and how sure its
    /// winner's lead is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_stop: Option<String>,
    /// What the launches cost (always under the adaptive strategy, even when every launch
    /// failed; under the grid, when something was launched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<Spent>,
}

fn grid() -> String {
    "grid".into()
}

/// Writes `doc` as pretty JSON to `path`, atomically.
pub fn write_document<T: Serialize>(path: &std::path::Path, doc: &T) -> Result<(), crate::Error> {
    let bytes =
        serde_json::to_vec_pretty(doc).map_err(|source| kneepoint_metrics::Error::Json {
            what: "the run's summary document",
            source,
        })?;
    kneepoint_metrics::export::write_atomic(path, &bytes)?;
    Ok(())
}

/// One level of a length sweep (a row of `length_sweep.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LengthRow {
    /// Input tokens asked for.
    pub isl: u32,
    /// Output tokens asked for.
    pub osl: u32,
    /// Input tokens measured (the mean over successful requests).
    pub input_tokens_mean: Option<f64>,
    /// Output tokens measured (the mean over successful requests).
    pub output_tokens_mean: Option<f64>,
    /// Measured requests recorded.
    pub request_count: usize,
    /// failed / recorded.
    pub error_rate: f64,
    /// TTFT p50, ms.
    pub ttft_p50_ms: Option<f64>,
    /// The 90 % interval of TTFT p50, ms (the level's bootstrap), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_interval: Option<[f64; 2]>,
    /// TTFT p95, ms.
    pub ttft_p95_ms: Option<f64>,
    /// TTFT p99, ms.
    pub ttft_p99_ms: Option<f64>,
    /// ITL p50, ms.
    pub itl_p50_ms: Option<f64>,
    /// ITL p95, ms.
    pub itl_p95_ms: Option<f64>,
    /// Request latency p50, ms.
    pub e2e_p50_ms: Option<f64>,
    /// Request latency p99, ms.
    pub e2e_p99_ms: Option<f64>,
    /// Output tokens / s.
    pub output_token_throughput: f64,
    /// Input tokens / s.
    pub input_token_throughput: f64,
    /// Requests/s that met every per-request SLO (`--goodput`), when SLOs were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<f64>,
    /// The share of requests, failures included, that missed an SLO (with `--goodput`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_miss_rate: Option<f64>,
    /// This level's folder, relative to the sweep's (`isl_1024_osl_128`).
    pub dir: String,
}

impl LengthRow {
    /// The row of the level summarised as `s`, asked for `point`, in folder `dir`.
    pub fn new(
        s: &kneepoint_metrics::LevelSummary,
        point: kneepoint_planner::LengthPoint,
        dir: String,
    ) -> Self {
        let st = |m: Metric, q: Stat| s.value(m, q);
        LengthRow {
            isl: point.isl,
            osl: point.osl,
            input_tokens_mean: st(Metric::InputSequenceLength, Stat::Avg),
            output_tokens_mean: st(Metric::OutputSequenceLength, Stat::Avg),
            request_count: s.request_count,
            error_rate: s.error_rate,
            ttft_p50_ms: st(Metric::TimeToFirstToken, Stat::P50),
            ttft_p50_interval: s
                .interval(Metric::TimeToFirstToken, Stat::P50)
                .map(|i| [i.low, i.high]),
            ttft_p95_ms: st(Metric::TimeToFirstToken, Stat::P95),
            ttft_p99_ms: st(Metric::TimeToFirstToken, Stat::P99),
            itl_p50_ms: st(Metric::InterTokenLatency, Stat::P50),
            itl_p95_ms: st(Metric::InterTokenLatency, Stat::P95),
            e2e_p50_ms: st(Metric::RequestLatency, Stat::P50),
            e2e_p99_ms: st(Metric::RequestLatency, Stat::P99),
            output_token_throughput: s.output_token_throughput,
            input_token_throughput: s.input_token_throughput,
            goodput: s.goodput,
            slo_miss_rate: s.slo_miss_rate,
            dir,
        }
    }
}

/// `length_sweep.json`: a sweep over prompt (and output) lengths at one concurrency or rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LengthSweepDoc {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The kneepoint version that wrote it.
    pub kneepoint_version: String,
    /// `length-sweep`.
    pub recipe: String,
    /// Every length ran.
    pub complete: bool,
    /// Stopped by Ctrl-C or SIGTERM.
    pub interrupted: bool,
    /// The resolved settings.
    pub settings: Value,
    /// Requests in flight at every length (the cap on them in an open loop; 0 for none).
    pub concurrency: u32,
    /// The open-loop request rate, requests/s (absent in a closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<f64>,
    /// One row per length, in the order run.
    pub rows: Vec<LengthRow>,
    /// The prefill rate fitted to TTFT against the measured input lengths (absent with fewer
    /// than two lengths).
    pub prefill: Option<kneepoint_planner::PrefillFit>,
}
