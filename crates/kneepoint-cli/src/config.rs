//! The config file (TOML or JSON) and the resolved settings of a sweep. CLI flags win over the
//! file; the file wins over defaults. SageMaker's names are accepted where they exist
//! (`sweep_params.concurrency`, `sweep_params.request_count`, `prompt_input_tokens_mean`, ...).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use kneepoint_engine::{OpenLoopSettings, RunsSettings};
use kneepoint_metrics::{ConvergenceRule, Criterion};
use kneepoint_planner::{PeakTraffic, SearchConfig, Sla, SweepPlan};
use kneepoint_runner::{Arrival, Deadlines, EarlyStop, LevelDuration, RetryPolicy};
use kneepoint_sim::{Fault, FaultPlan, SimProfile};
use kneepoint_transport::{
    Api, ApiKey, ConnectOptions, MaxTokensField, OpenAiConfig, ProxySetting, RequestIdHeader,
    RequestIdStyle,
};
use kneepoint_workload::{
    DatasetConfig, DatasetFormat, LengthDist, Lengths, MixEntry, Sampling, SharedPrefix,
};
use serde::Deserialize;

use crate::args::{CommonArgs, SearchArgs, SlaArgs, SweepArgs};

/// Default levels: the source documents' sweep with a low level added.
pub const DEFAULT_CONCURRENCY: [u32; 4] = [16, 64, 256, 1024];
/// Default measured requests per level (SageMaker's example).
pub const DEFAULT_REQUEST_COUNT: u32 = 1024;
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
    /// Repeated runs of each level and convergence.
    pub runs: Option<RunsSection>,
    /// Open-loop arrivals.
    pub load: Option<LoadSection>,
    /// Where results go.
    pub artifact_dir: Option<PathBuf>,
    /// `kneepoint recommend`: what to rank by (`cost`, `latency` or `throughput`).
    pub objective: Option<String>,
    /// `kneepoint recommend`: a dated price table (TOML or JSON) for candidates without a price.
    pub price_table: Option<PathBuf>,
    /// `kneepoint recommend`: the currency prices are in (default `USD`).
    pub currency: Option<String>,
    /// `kneepoint recommend`: the deployments to compare.
    #[serde(default)]
    pub candidates: Vec<CandidateSection>,
}

/// `[load]`: open-loop arrivals (the `--request-rate` family of flags).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSection {
    /// Request rates, one level each (requests/s).
    pub request_rate: Option<Vec<f64>>,
    /// `poisson`, `constant` or `gamma`.
    pub arrival: Option<String>,
    /// Gamma shape.
    pub burstiness: Option<f64>,
    /// Cap on requests in flight.
    pub max_in_flight: Option<u32>,
    /// Replay a trace dataset at its recorded times, this many times faster.
    pub replay_speedup: Option<f64>,
    /// Seconds per level instead of a request count.
    pub duration_s: Option<f64>,
    /// Grace for requests in flight at the end of a timed level, seconds.
    pub grace_s: Option<f64>,
    /// Warm-up seconds of a timed level.
    pub warmup_duration_s: Option<f64>,
    /// Spread each closed-loop level's first wave over this many seconds.
    pub ramp_up_s: Option<f64>,
    /// Stop a level early once its intervals are this narrow (fraction of the mean).
    pub early_stop_width: Option<f64>,
    /// Requests before early stopping is considered.
    pub early_stop_min_requests: Option<u32>,
}

/// A timed level from the flags and the `[load]` section (`None`: count-bound levels).
fn level_duration(args: &CommonArgs, file: &LoadSection) -> anyhow::Result<Option<LevelDuration>> {
    let secs = |what: &str, v: f64, zero_ok: bool| -> anyhow::Result<Duration> {
        if !v.is_finite() || v < 0.0 || (v == 0.0 && !zero_ok) || v > 1e7 {
            bail!(
                "{what} must be a {} number of seconds, not {v}",
                if zero_ok { "non-negative" } else { "positive" }
            );
        }
        Ok(Duration::from_secs_f64(v))
    };
    let grace = args.grace_s.or(file.grace_s);
    let warm = args.warmup_duration_s.or(file.warmup_duration_s);
    let Some(d) = args.duration_s.or(file.duration_s) else {
        if grace.is_some() || warm.is_some() {
            bail!("grace_s and warmup_duration_s need duration_s");
        }
        return Ok(None);
    };
    Ok(Some(LevelDuration {
        measure: secs("duration_s", d, false)?,
        grace: secs("grace_s", grace.unwrap_or(30.0), true)?,
        warmup: secs("warmup_duration_s", warm.unwrap_or(0.0), true)?,
    }))
}

/// Open-loop arrivals from the flags and `[load]`.
fn resolve_open_loop(
    args: &CommonArgs,
    file: &LoadSection,
) -> anyhow::Result<Option<OpenLoopSettings>> {
    {
        let rates = if args.request_rate.is_empty() {
            file.request_rate.clone().unwrap_or_default()
        } else {
            args.request_rate.clone()
        };
        let arrival = args.arrival.clone().or(file.arrival.clone());
        let burstiness = args.burstiness.or(file.burstiness);
        let cap = args.max_in_flight.or(file.max_in_flight);
        let replay = args.replay_speedup.or(file.replay_speedup);
        if let Some(f) = replay {
            if !(f.is_finite() && f > 0.0) {
                bail!("replay_speedup must be a positive factor, not {f}");
            }
            if !rates.is_empty() || arrival.is_some() || burstiness.is_some() {
                bail!("replay_speedup replays a trace's own times: it does not combine with request_rate, arrival or burstiness");
            }
            if cap == Some(0) {
                bail!("max_in_flight must be at least 1");
            }
            return Ok(Some(OpenLoopSettings::replay(f).with_max_in_flight(cap)));
        }
        if rates.is_empty() {
            if arrival.is_some() || burstiness.is_some() || cap.is_some() {
                bail!("arrival, burstiness and max_in_flight need request_rate (open loop)");
            }
            return Ok(None);
        }
        if let Some(r) = rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
            bail!("request_rate must be positive requests/s, not {r}");
        }
        if cap == Some(0) {
            bail!("max_in_flight must be at least 1");
        }
        let arrival = Arrival::parse(arrival.as_deref().unwrap_or("poisson"), burstiness)?;
        if let Arrival::Gamma { burstiness } = arrival {
            if !(burstiness.is_finite() && burstiness > 0.0) {
                bail!("burstiness must be a positive number, not {burstiness}");
            }
        }
        Ok(Some(
            OpenLoopSettings::rates(rates, arrival).with_max_in_flight(cap),
        ))
    }
}

/// `[runs]`: repeated runs of each level (the `--num-runs` family of flags).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsSection {
    /// Runs per level (the cap when converging).
    pub num_runs: Option<u32>,
    /// Confidence level of the intervals.
    pub confidence_level: Option<f64>,
    /// The statistic whose convergence stops the repetition (`<metric>_<stat>`).
    pub converge_on: Option<String>,
    /// `ci-width` or `cv`.
    pub converge_criterion: Option<String>,
    /// Threshold of the test.
    pub converge_threshold: Option<f64>,
    /// Runs before convergence may stop.
    pub min_runs: Option<u32>,
}

/// Repeated runs from the flags and `[runs]`.
fn resolve_runs(args: &CommonArgs, file: &RunsSection) -> anyhow::Result<RunsSettings> {
    {
        let num_runs = args.num_runs.or(file.num_runs).unwrap_or(1);
        if num_runs == 0 {
            bail!("num_runs must be at least 1");
        }
        let confidence = args
            .confidence_level
            .or(file.confidence_level)
            .unwrap_or(0.95);
        if !(confidence > 0.0 && confidence < 1.0) {
            bail!("confidence_level must be between 0 and 1 (exclusive), not {confidence}");
        }
        let statistic = args.converge_on.clone().or(file.converge_on.clone());
        let criterion = args
            .converge_criterion
            .clone()
            .or(file.converge_criterion.clone());
        let threshold = args.converge_threshold.or(file.converge_threshold);
        let min_runs = args.min_runs.or(file.min_runs);
        let convergence = match statistic {
            None => {
                if criterion.is_some() || threshold.is_some() || min_runs.is_some() {
                    bail!("converge_criterion, converge_threshold and min_runs need converge_on (the statistic to watch)");
                }
                None
            }
            Some(statistic) => {
                let known = kneepoint_metrics::RECORD_METRICS
                    .iter()
                    .any(|(m, _, _)| statistic.starts_with(&format!("{m}_")))
                    || [
                        "request_throughput_avg",
                        "output_token_throughput_avg",
                        "error_rate_avg",
                        "goodput_avg",
                    ]
                    .contains(&statistic.as_str());
                if !known {
                    bail!("converge_on {statistic:?} is not a statistic: use <metric>_<stat>, e.g. time_to_first_token_p99 or output_token_throughput_avg");
                }
                let max = threshold.unwrap_or(0.05);
                if !(max > 0.0 && max.is_finite()) {
                    bail!("converge_threshold must be a positive number, not {max}");
                }
                let criterion = match criterion.as_deref().unwrap_or("ci-width") {
                    "ci-width" | "ci_width" => Criterion::CiWidth { max },
                    "cv" => Criterion::Cv { max },
                    other => bail!("converge_criterion must be ci-width or cv, not {other:?}"),
                };
                let min_runs = min_runs.unwrap_or(3);
                if min_runs < 2 {
                    bail!("min_runs must be at least 2 (an interval needs two runs)");
                }
                if num_runs < min_runs {
                    bail!("num_runs ({num_runs}) is the cap on runs and must be at least min_runs ({min_runs})");
                }
                Some(ConvergenceRule {
                    statistic,
                    criterion,
                    min_runs: min_runs as usize,
                    confidence,
                })
            }
        };
        Ok(RunsSettings::new(num_runs, confidence, convergence))
    }
}

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
}

/// `[search_params]` (SageMaker's names).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSection {
    /// Only `max-concurrency-under-sla` is known.
    pub search_recipe: Option<String>,
    /// p95 TTFT limit, ms.
    pub ttft_sla_ms: Option<f64>,
    /// p95 ITL limit, ms.
    pub tpot_sla_ms: Option<f64>,
    /// p99 end-to-end limit, ms.
    pub e2e_sla_ms: Option<f64>,
    /// Mean error-rate limit (fraction).
    pub error_rate_sla: Option<f64>,
    /// General SLAs, `metric:stat:op:threshold`.
    #[serde(default)]
    pub slas: Vec<String>,
    /// Lowest concurrency probed.
    pub concurrency_min: Option<u32>,
    /// Highest concurrency probed.
    pub concurrency_max: Option<u32>,
    /// Probe budget.
    pub search_max_iterations: Option<u32>,
    /// Above this the bracketing phase grows x4.
    pub search_initial_points: Option<u32>,
    /// Requests per probe.
    pub request_count: Option<u32>,
    /// Final bracket width.
    pub precision: Option<f64>,
    /// Judge SLAs at the pessimistic end of the across-run confidence interval.
    pub sla_by_confidence: Option<bool>,
    /// Close-call margin.
    pub confirm_margin: Option<f64>,
}

/// `[fleet]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSection {
    /// Peak concurrent requests.
    pub peak_concurrency: Option<f64>,
    /// Peak requests per second.
    pub peak_rps: Option<f64>,
    /// Peak output tokens per second.
    pub peak_output_tokens_per_s: Option<f64>,
    /// Reserved capacity fraction (default 0.2).
    pub headroom: Option<f64>,
}

/// `[endpoint]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointSection {
    /// Base URL.
    pub url: Option<String>,
    /// `chat` or `completions`.
    #[serde(rename = "type")]
    pub api: Option<Api>,
    /// Request path override.
    pub path: Option<String>,
    /// The `model` field.
    pub model: Option<String>,
    /// Environment variable holding the API key (keys are never read from the file).
    pub api_key_env: Option<String>,
    /// Extra headers.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Extra body fields.
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// `max_tokens` or `max_completion_tokens`.
    pub max_tokens_field: Option<MaxTokensField>,
    /// The header naming each request (`x-request-id`), or `"none"`.
    pub request_id_header: Option<String>,
    /// `uuid` or `integer`.
    pub request_id_format: Option<RequestIdStyle>,
    /// PEM CA bundle trusted besides the system's roots.
    pub ca_bundle: Option<PathBuf>,
    /// PEM client certificate (mTLS).
    pub client_cert: Option<PathBuf>,
    /// PEM key of `client_cert`.
    pub client_key: Option<PathBuf>,
    /// Accept any server certificate.
    pub insecure_skip_verify: Option<bool>,
    /// Offer HTTP/2 by ALPN.
    pub http2: Option<bool>,
    /// A proxy URL, or `"none"` (default: the environment's).
    pub proxy: Option<String>,
    /// Per-request deadline, seconds.
    pub request_timeout_s: Option<f64>,
    /// Response-headers deadline, seconds.
    pub response_timeout_s: Option<f64>,
    /// First-token deadline, seconds.
    pub first_token_timeout_s: Option<f64>,
    /// Idle-gap deadline, seconds.
    pub idle_timeout_s: Option<f64>,
    /// A SageMaker endpoint name (instead of `url`).
    pub sagemaker_endpoint: Option<String>,
    /// Its AWS region.
    pub region: Option<String>,
    /// SageMaker runtime URL override.
    pub endpoint_url: Option<String>,
    /// `chat`, `completions` or `tgi`.
    pub body_format: Option<String>,
    /// `sse` or `jsonlines`.
    pub payload_codec: Option<String>,
    /// `X-Amzn-SageMaker-Inference-Component`.
    pub inference_component: Option<String>,
    /// `X-Amzn-SageMaker-Target-Variant`.
    pub target_variant: Option<String>,
    /// `X-Amzn-SageMaker-Custom-Attributes`.
    pub custom_attributes: Option<String>,
    /// `X-Amzn-SageMaker-Target-Container-Hostname`.
    pub target_container_hostname: Option<String>,
    /// `X-Amzn-SageMaker-Target-Model`.
    pub target_model: Option<String>,
    /// `X-Amzn-SageMaker-Session-Id`.
    pub session_id: Option<String>,
    /// `X-Amzn-SageMaker-Inference-Id`.
    pub inference_id: Option<String>,
    /// AWS profile for credentials.
    pub aws_profile: Option<String>,
}

/// `[workload]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    /// Tokenizer: `builtin`, a tokenizer.json path, or a Hugging Face model id (local cache).
    pub tokenizer: Option<String>,
    /// Tokens of a shared system prompt inside each input.
    pub shared_prefix_tokens: Option<u32>,
    /// Distinct shared prefixes.
    pub shared_prefix_pool: Option<u32>,
    /// Weighted (isl, osl) pairs instead of the means.
    pub mixture: Option<Vec<MixEntry>>,
    /// A dataset file instead of synthetic prompts.
    pub dataset: Option<PathBuf>,
    /// `jsonl`, `sharegpt` or `trace`.
    pub dataset_format: Option<String>,
    /// `sequential`, `random` or `shuffle`.
    pub sampling: Option<String>,
    /// Tokens per trace block.
    pub trace_block_tokens: Option<u32>,
    /// Stream responses.
    pub streaming: Option<bool>,
    /// Mean input tokens.
    pub prompt_input_tokens_mean: Option<f64>,
    /// Input tokens stddev.
    pub prompt_input_tokens_stddev: Option<f64>,
    /// Mean output tokens.
    pub output_tokens_mean: Option<f64>,
    /// Output tokens stddev.
    pub output_tokens_stddev: Option<f64>,
    /// Seed.
    pub seed: Option<u64>,
    /// Send `ignore_eos` and `min_tokens`.
    pub output_control: Option<bool>,
}

/// `[sweep_params]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSection {
    /// Levels.
    pub concurrency: Option<Vec<u32>>,
    /// Measured requests per level.
    pub request_count: Option<u32>,
    /// Warm-up requests per level.
    pub warmup_request_count: Option<u32>,
}

/// `[simulator]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimulatorSection {
    /// `calibrated` or `fast`.
    pub profile: Option<String>,
    /// Wall seconds per modelled second.
    pub time_scale: Option<f64>,
    /// Seed.
    pub seed: Option<u64>,
    /// Fault injection: `{rate, kinds, stall_ms}`.
    pub faults: Option<FaultPlan>,
    /// Multiplies every engine step cost (1.2 = a server 20 % slower), to model a slower or
    /// faster deployment.
    pub slowdown: Option<f64>,
    /// Relative standard deviation of each engine step (noise between requests and runs).
    pub jitter: Option<f64>,
    /// `openai` (default) or `sagemaker`: the protocol the simulator speaks.
    pub protocol: Option<String>,
}

impl FileConfig {
    /// Reads a `.toml` or `.json` file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        Self::parse(&text, is_json).with_context(|| format!("in {}", path.display()))
    }

    /// Parses the text of a config file: JSON when `is_json`, TOML otherwise. Unknown keys are
    /// errors.
    pub fn parse(text: &str, is_json: bool) -> anyhow::Result<Self> {
        if is_json {
            serde_json::from_str(text).context("parsing the config as JSON")
        } else {
            toml::from_str(text).context("parsing the config as TOML")
        }
    }
}

/// What the sweep runs against.
#[derive(Debug, Clone)]
pub enum Target {
    /// A SageMaker endpoint (real, or at an `endpoint_url`).
    SageMaker,
    /// The built-in simulator, started in-process.
    Simulator(SimProfile),
    /// An OpenAI-compatible endpoint.
    OpenAi(OpenAiConfig),
}

/// What every load-sending command needs, resolved and validated.
#[derive(Debug, Clone)]
pub struct CommonSettings {
    /// The target.
    pub target: Target,
    /// Chat or completions, path, headers...: the transport template (URL filled in for the
    /// simulator once it is listening).
    pub transport: OpenAiConfig,
    /// Measured requests per level (sweep) or probe (search).
    pub request_count: u32,
    /// Warm-up requests per level.
    pub warmup_requests: u32,
    /// Repeated runs of each level.
    pub runs: RunsSettings,
    /// Open-loop arrivals (`None`: closed loop).
    pub open_loop: Option<OpenLoopSettings>,
    /// Timed levels (`None`: each level sends `request_count` requests).
    pub duration: Option<LevelDuration>,
    /// Stop levels early once precise enough (`batch` is set per level).
    pub early_stop: Option<EarlyStop>,
    /// Closed loop: each phase's first wave spread over this time.
    pub ramp_up: Option<Duration>,
    /// Tokenizer spec (`builtin`, a path, a model id).
    pub tokenizer: String,
    /// Input lengths.
    pub isl: LengthDist,
    /// Output lengths.
    pub osl: LengthDist,
    /// A weighted mixture of (isl, osl) pairs that replaces `isl`/`osl`.
    pub mixture: Option<Lengths>,
    /// Shared prefixes.
    pub prefix: Option<SharedPrefix>,
    /// A dataset instead of synthetic prompts (lengths then come from the records).
    pub dataset: Option<DatasetConfig>,
    /// Send `ignore_eos`/`min_tokens`.
    pub output_control: bool,
    /// Workload seed.
    pub seed: u64,
    /// Per-request deadlines (whole request, response headers, first token, idle gap).
    pub deadlines: Deadlines,
    /// A response without a finish_reason is an `incomplete` failure.
    pub require_finish_reason: bool,
    /// Retries of transient failures (none by default).
    pub retry: RetryPolicy,
    /// Output directory.
    pub artifact_dir: PathBuf,
    /// Set when the target speaks the SageMaker runtime protocol (a real endpoint, or the
    /// simulator with `protocol = "sagemaker"`).
    pub sagemaker: Option<SageMakerSettings>,
}

/// How to reach a SageMaker endpoint.
#[derive(Debug, Clone)]
pub struct SageMakerSettings {
    /// The transport's configuration.
    pub config: kneepoint_transport::sagemaker::SageMakerConfig,
    /// AWS profile for the credential chain.
    pub aws_profile: Option<String>,
}

fn sagemaker_settings(
    args: &CommonArgs,
    ep: &EndpointSection,
    transport: &OpenAiConfig,
    name: String,
) -> anyhow::Result<SageMakerSettings> {
    use kneepoint_transport::sagemaker::{BodyFormat, CodecKind, InvokeHeaders, SageMakerConfig};
    let region = args
        .region
        .clone()
        .or(ep.region.clone())
        .or_else(|| std::env::var("AWS_REGION").ok())
        .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
        .unwrap_or_else(|| "us-east-1".into());
    let mut c = SageMakerConfig::new(name, region);
    c.endpoint_url = args.endpoint_url.clone().or(ep.endpoint_url.clone());
    c.body = match args.sagemaker_body.as_ref().or(ep.body_format.as_ref()) {
        Some(b) => BodyFormat::parse(b).ok_or_else(|| {
            anyhow::anyhow!("the SageMaker body must be chat, completions or tgi, not {b:?}")
        })?,
        None if transport.api == Api::Completions => BodyFormat::OpenAiCompletions,
        None => BodyFormat::OpenAiChat,
    };
    c.codec = match args
        .payload_codec
        .as_ref()
        .or(ep.payload_codec.as_ref())
        .map(String::as_str)
    {
        None | Some("sse") => CodecKind::Sse,
        Some("jsonlines") | Some("json_lines") | Some("jsonl") => CodecKind::JsonLines,
        Some(other) => bail!("the payload codec must be sse or jsonlines, not {other:?}"),
    };
    c.model = transport.model.clone();
    c.streaming = transport.streaming;
    c.max_tokens_field = transport.max_tokens_field;
    c.request_id = transport.request_id.clone();
    c.connect = transport.connect.clone();
    c.extra_body = transport.extra_body.clone();
    c.connect_timeout = transport.connect_timeout;
    c.headers = InvokeHeaders {
        custom_attributes: args
            .custom_attributes
            .clone()
            .or(ep.custom_attributes.clone()),
        target_variant: args.target_variant.clone().or(ep.target_variant.clone()),
        target_container_hostname: args
            .target_container_hostname
            .clone()
            .or(ep.target_container_hostname.clone()),
        inference_component: args
            .inference_component
            .clone()
            .or(ep.inference_component.clone()),
        session_id: ep.session_id.clone(),
        inference_id: ep.inference_id.clone(),
        target_model: args.target_model.clone().or(ep.target_model.clone()),
    };
    c.validate()?;
    Ok(SageMakerSettings {
        config: c,
        aws_profile: args.aws_profile.clone().or(ep.aws_profile.clone()),
    })
}

/// The longest input or output length accepted, in tokens: the longest context windows served
/// today (10 M tokens); `--isl 1e12` would otherwise try to allocate terabytes.
const MAX_TOKENS: f64 = 10_000_000.0;

fn dist(mean: f64, stddev: f64, what: &str) -> anyhow::Result<LengthDist> {
    if !mean.is_finite() || mean < 1.0 {
        bail!("{what} mean must be at least 1 token (got {mean})");
    }
    if mean > MAX_TOKENS {
        bail!("{what} mean must be at most {MAX_TOKENS} tokens (got {mean})");
    }
    if !stddev.is_finite() || !(0.0..=MAX_TOKENS).contains(&stddev) {
        bail!("{what} stddev must be between 0 and {MAX_TOKENS} (got {stddev})");
    }
    Ok(LengthDist::mean_stddev(mean, stddev))
}

/// The longest deadline accepted: 30 days (a larger one is a typo, and `1e300` would not fit a
/// `Duration`).
const MAX_DEADLINE_S: f64 = 30.0 * 86_400.0;

fn seconds(what: &str, v: Option<f64>) -> anyhow::Result<Option<Duration>> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= MAX_DEADLINE_S => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(s) => bail!(
            "the {what} must be a positive number of seconds up to {MAX_DEADLINE_S} (30 days), not {s}"
        ),
    }
}

/// `--request-id-header` / `--request-id-format` (or `[endpoint]`'s keys) over the default
/// (`x-request-id` with a UUID).
fn request_id_header(args: &CommonArgs, ep: &EndpointSection) -> anyhow::Result<RequestIdHeader> {
    let mut h = RequestIdHeader::default();
    match args
        .request_id_header
        .as_ref()
        .or(ep.request_id_header.as_ref())
    {
        Some(n) if n.eq_ignore_ascii_case("none") => h.name = None,
        Some(n) if n.trim().is_empty() => bail!("--request-id-header needs a name (or none)"),
        Some(n) => h.name = Some(n.trim().to_ascii_lowercase()),
        None => {}
    }
    h.style = match args.request_id_format.as_deref() {
        Some("uuid") => RequestIdStyle::Uuid,
        Some("integer") => RequestIdStyle::Integer,
        Some(other) => bail!("--request-id-format must be uuid or integer, not {other:?}"),
        None => ep.request_id_format.unwrap_or_default(),
    };
    Ok(h)
}

fn parse_header(h: &str) -> anyhow::Result<(String, String)> {
    let Some((k, v)) = h.split_once(':') else {
        bail!("header {h:?} must look like 'Name: value'");
    };
    Ok((k.trim().to_owned(), v.trim().to_owned()))
}

impl CommonSettings {
    /// Merges `file` with the flags and validates the result. `request_count` is the file's
    /// count for this command (sweep or search).
    pub fn resolve(
        args: &CommonArgs,
        file: &FileConfig,
        request_count: Option<u32>,
    ) -> anyhow::Result<Self> {
        let ep = file.endpoint.clone().unwrap_or_default();
        let wl = file.workload.clone().unwrap_or_default();
        let sw = file.sweep_params.clone().unwrap_or_default();
        let sim = file.simulator.clone().unwrap_or_default();

        let url = args.url.clone().or(ep.url.clone());
        let api = match &args.endpoint_type {
            Some(t) => match t.as_str() {
                "chat" => Api::Chat,
                "completions" => Api::Completions,
                other => bail!("--endpoint-type must be chat or completions, not {other:?}"),
            },
            None => ep.api.unwrap_or_default(),
        };
        let streaming = args.streaming.or(wl.streaming).unwrap_or(true);
        let max_tokens_field = match &args.max_tokens_field {
            Some(f) => match f.as_str() {
                "max_tokens" => MaxTokensField::MaxTokens,
                "max_completion_tokens" => MaxTokensField::MaxCompletionTokens,
                other => bail!(
                    "--max-tokens-field must be max_tokens or max_completion_tokens, not {other:?}"
                ),
            },
            None => ep.max_tokens_field.unwrap_or_default(),
        };
        let sim_profile = {
            let mut p = SimProfile::by_name(
                args.sim_profile
                    .as_deref()
                    .or(sim.profile.as_deref())
                    .unwrap_or("calibrated"),
            )?;
            p.time_scale = args
                .sim_time_scale
                .or(sim.time_scale)
                .unwrap_or(DEFAULT_SIM_TIME_SCALE);
            if let Some(s) = sim.seed {
                p.seed = s;
            }
            if let Some(k) = args.sim_slowdown.or(sim.slowdown) {
                if !k.is_finite() || k <= 0.0 {
                    bail!("the simulator slowdown must be a positive factor (got {k})");
                }
                p.step_base_ms *= k;
                p.step_per_seq_ms *= k;
                p.step_per_context_token_us *= k;
                p.prefill_per_token_us *= k;
            }
            if let Some(j) = args.sim_jitter.or(sim.jitter) {
                if !j.is_finite() || j < 0.0 {
                    bail!("the simulator jitter must be 0 or more (got {j})");
                }
                p.jitter = j;
            }
            p.faults = sim.faults.clone();
            if let Some(rate) = args.sim_fault_rate {
                p.faults = Some(fault_plan(rate, &args.sim_faults, args.sim_stall_ms)?);
            }
            p.validate()?;
            p
        };
        let model = args.model.clone().or(ep.model.clone());
        // Without --model, a URL target's model is asked of the server (GET /v1/models) when
        // the sweep starts.
        let target = match &url {
            Some(_) => None,
            None => Some(sim_profile),
        };
        let mut transport = OpenAiConfig::new(
            url.clone().unwrap_or_else(|| "http://127.0.0.1:0".into()),
            model.unwrap_or_else(|| target.as_ref().map(|p| p.model.clone()).unwrap_or_default()),
        );
        transport.api = api;
        transport.path = args.endpoint_path.clone().or(ep.path.clone());
        transport.streaming = streaming;
        transport.max_tokens_field = max_tokens_field;
        transport.request_id = request_id_header(args, &ep)?;
        transport.connect = ConnectOptions {
            ca_bundle: args.ca_bundle.clone().or(ep.ca_bundle.clone()),
            client_cert: args.client_cert.clone().or(ep.client_cert.clone()),
            client_key: args.client_key.clone().or(ep.client_key.clone()),
            insecure_skip_verify: args.insecure || ep.insecure_skip_verify.unwrap_or(false),
            http2: args.http2 || ep.http2.unwrap_or(false),
            proxy: match args.proxy.as_ref().or(ep.proxy.as_ref()) {
                None => ProxySetting::Environment,
                Some(p) if p.eq_ignore_ascii_case("none") => ProxySetting::Off,
                Some(p) if p.starts_with("http://") || p.starts_with("https://") => {
                    ProxySetting::Url(p.clone())
                }
                Some(_) => bail!("--proxy must be an http:// or https:// URL, or none"),
            },
        };
        if let Some(b) = &ep.extra_body {
            transport.extra_body = b.clone();
        }
        if let Some(b) = &args.extra_body {
            let v: serde_json::Value =
                serde_json::from_str(b).context("--extra-body must be a JSON object")?;
            let serde_json::Value::Object(m) = v else {
                bail!("--extra-body must be a JSON object");
            };
            transport.extra_body.extend(m);
        }
        transport.headers = ep.headers.clone().into_iter().collect();
        for h in &args.headers {
            transport.headers.push(parse_header(h)?);
        }
        let key_env = args
            .api_key_env
            .clone()
            .or(ep.api_key_env.clone())
            .unwrap_or_else(|| "OPENAI_API_KEY".into());
        if url.is_some() {
            if let Ok(k) = std::env::var(&key_env) {
                if !k.is_empty() {
                    transport.api_key = Some(ApiKey::new(k));
                }
            }
        }
        // Fail early on a bad URL or header.
        kneepoint_transport::OpenAiTransport::new(transport.clone())?;

        let sm_name = args
            .sagemaker_endpoint
            .clone()
            .or(ep.sagemaker_endpoint.clone());
        let sim_protocol = args
            .sim_protocol
            .clone()
            .or(sim.protocol.clone())
            .unwrap_or_else(|| "openai".into());
        if !matches!(sim_protocol.as_str(), "openai" | "sagemaker") {
            bail!("the simulator protocol must be openai or sagemaker, not {sim_protocol:?}");
        }
        if sm_name.is_some() && url.is_some() {
            bail!(
                "give either --url (an OpenAI-compatible server) or --sagemaker-endpoint, not both"
            );
        }
        let sagemaker = match (&sm_name, target.is_some() && sim_protocol == "sagemaker") {
            (Some(name), _) => Some(sagemaker_settings(args, &ep, &transport, name.clone())?),
            (None, true) => Some(sagemaker_settings(
                args,
                &ep,
                &transport,
                "kneepoint-sim".into(),
            )?),
            (None, false) => None,
        };

        let request_count = args
            .request_count
            .or(request_count)
            .unwrap_or(DEFAULT_REQUEST_COUNT);
        if request_count == 0 {
            bail!("request_count must be at least 1");
        }
        let isl = dist(
            args.isl.or(wl.prompt_input_tokens_mean).unwrap_or(1024.0),
            args.isl_stddev
                .or(wl.prompt_input_tokens_stddev)
                .unwrap_or(0.0),
            "input length",
        )?;
        let osl = dist(
            args.osl.or(wl.output_tokens_mean).unwrap_or(256.0),
            args.osl_stddev.or(wl.output_tokens_stddev).unwrap_or(0.0),
            "output length",
        )?;
        let request_timeout = seconds(
            "request timeout",
            Some(
                args.request_timeout_s
                    .or(ep.request_timeout_s)
                    .unwrap_or(600.0),
            ),
        )?;
        let artifact_dir = args
            .artifact_dir
            .clone()
            .or(file.artifact_dir.clone())
            .unwrap_or_else(default_artifact_dir);
        let open_loop = resolve_open_loop(args, &file.load.clone().unwrap_or_default())?;
        Ok(CommonSettings {
            target: match (target, &sm_name) {
                (_, Some(_)) => Target::SageMaker,
                (Some(p), None) => Target::Simulator(p),
                (None, None) => Target::OpenAi(transport.clone()),
            },
            sagemaker,
            transport,
            request_count,
            warmup_requests: args
                .warmup_requests
                .or(sw.warmup_request_count)
                .unwrap_or(0),
            runs: resolve_runs(args, &file.runs.clone().unwrap_or_default())?,
            open_loop: open_loop.clone(),
            duration: level_duration(args, &file.load.clone().unwrap_or_default())?,
            ramp_up: match args
                .ramp_up_s
                .or(file.load.as_ref().and_then(|l| l.ramp_up_s))
            {
                None => None,
                Some(_) if open_loop.is_some() => {
                    bail!("ramp_up_s spreads a closed loop's first wave; an open loop (request_rate, replay_speedup) has its own schedule")
                }
                Some(v) if v.is_finite() && (0.0..=3600.0).contains(&v) => {
                    Some(Duration::from_secs_f64(v))
                }
                Some(v) => bail!("ramp_up_s must be between 0 and 3600 seconds, not {v}"),
            },
            early_stop: {
                let load = file.load.clone().unwrap_or_default();
                let width = args.early_stop_width.or(load.early_stop_width);
                let min = args
                    .early_stop_min_requests
                    .or(load.early_stop_min_requests);
                match width {
                    None if min.is_some() => {
                        bail!("early_stop_min_requests needs early_stop_width")
                    }
                    None => None,
                    Some(w) if !(w.is_finite() && w > 0.0 && w < 2.0) => {
                        bail!("early_stop_width must be a fraction of the mean above 0 (e.g. 0.05), not {w}")
                    }
                    Some(w) => Some(EarlyStop {
                        min_requests: min.unwrap_or(200).max(20) as usize,
                        max_relative_width: w,
                        confidence: args
                            .confidence_level
                            .or(file.runs.as_ref().and_then(|r| r.confidence_level))
                            .unwrap_or(0.95),
                        batch: 1,
                    }),
                }
            },
            tokenizer: args
                .tokenizer
                .clone()
                .or(wl.tokenizer.clone())
                .unwrap_or_else(|| "builtin".into()),
            isl,
            osl,
            mixture: match (&args.mix, &wl.mixture) {
                (Some(m), _) => Some(Lengths::parse_mixture(m)?),
                (None, Some(entries)) => {
                    let l = Lengths::Mixture(entries.clone());
                    l.validate()?;
                    Some(l)
                }
                (None, None) => None,
            },
            prefix: match args.shared_prefix_tokens.or(wl.shared_prefix_tokens) {
                None | Some(0) => None,
                Some(tokens) => Some(SharedPrefix {
                    tokens,
                    pool: args
                        .shared_prefix_pool
                        .or(wl.shared_prefix_pool)
                        .unwrap_or(1),
                }),
            },
            dataset: match args.dataset.clone().or(wl.dataset.clone()) {
                None => None,
                Some(path) => {
                    let mut d = DatasetConfig::new(path);
                    if let Some(f) = args.dataset_format.as_ref().or(wl.dataset_format.as_ref()) {
                        d.format = Some(DatasetFormat::parse(f).ok_or_else(|| {
                            anyhow::anyhow!(
                                "dataset format must be jsonl, sharegpt or trace, not {f:?}"
                            )
                        })?);
                    }
                    if let Some(o) = args.sampling.as_ref().or(wl.sampling.as_ref()) {
                        d.sampling = Sampling::parse(o).ok_or_else(|| {
                            anyhow::anyhow!(
                                "sampling must be sequential, random or shuffle, not {o:?}"
                            )
                        })?;
                    }
                    if let Some(b) = args.trace_block_tokens.or(wl.trace_block_tokens) {
                        d.trace_block_tokens = b;
                    }
                    d.seed = args.seed.or(wl.seed).unwrap_or(0);
                    d.default_output_tokens = osl.mean().round().max(1.0) as u32;
                    d.output_control = !args.no_output_control && wl.output_control.unwrap_or(true);
                    Some(d)
                }
            },
            output_control: !args.no_output_control && wl.output_control.unwrap_or(true),
            seed: args.seed.or(wl.seed).unwrap_or(0),
            require_finish_reason: !args.allow_missing_finish_reason,
            retry: RetryPolicy {
                max_retries: args.retries.unwrap_or(0),
                backoff: Duration::from_millis(args.retry_backoff_ms.unwrap_or(500)),
            },
            deadlines: Deadlines {
                request: request_timeout,
                response: seconds(
                    "response timeout",
                    args.response_timeout_s.or(ep.response_timeout_s),
                )?,
                first_token: seconds(
                    "first-token timeout",
                    args.first_token_timeout_s.or(ep.first_token_timeout_s),
                )?,
                idle: seconds("idle timeout", args.idle_timeout_s.or(ep.idle_timeout_s))?,
            },
            artifact_dir,
        })
    }

    /// The settings as recorded in exports (no secrets: the API key and header values are
    /// left out).
    pub fn describe(&self) -> serde_json::Value {
        let target = match &self.target {
            Target::Simulator(p) => serde_json::json!({"kind": "simulator", "profile": p}),
            Target::OpenAi(c) => serde_json::json!({"kind": "openai", "url": c.url()}),
            Target::SageMaker => serde_json::json!({"kind": "sagemaker"}),
        };
        let sagemaker = self.sagemaker.as_ref().map(|s| {
            let c = &s.config;
            serde_json::json!({
                "endpoint_name": c.endpoint_name,
                "region": c.region,
                "url": c.url(),
                "body": c.body,
                "payload_codec": c.codec,
                "streaming": c.streaming,
                "headers": c.headers,
                "credentials": match &s.aws_profile {
                    Some(p) => format!("AWS default chain, profile {p}"),
                    None => "AWS default chain".to_owned(),
                },
            })
        });
        serde_json::json!({
            "target": target,
            "sagemaker": sagemaker,
            "endpoint": {
                "type": self.transport.api,
                "url": self.transport.url(),
                "model": self.transport.model,
                "streaming": self.transport.streaming,
                "max_tokens_field": self.transport.max_tokens_field,
                "request_id": self.transport.request_id,
                "connect": self.transport.connect,
                "header_names": self.transport.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                "api_key": self.transport.api_key.as_ref().map(|_| "[redacted]"),
                "extra_body": self.transport.extra_body,
            },
            "workload": {
                "tokenizer": self.tokenizer,
                "isl": self.isl,
                "osl": self.osl,
                "mixture": self.mixture,
                "shared_prefix": self.prefix,
                "dataset": self.dataset,
                "output_control": self.output_control,
                "seed": self.seed,
                "prompts": "built-in corpus, exact token counts",
            },
            "requests": {
                "request_count": self.request_count,
                "warmup_request_count": self.warmup_requests,
                "open_loop": self.open_loop.as_ref().map(|o| serde_json::json!({
                    "request_rates": o.rates,
                    "arrival": format!("{:?}", o.arrival),
                    "max_in_flight": o.max_in_flight,
                    "replay_speedup": o.replay_speedup,
                })),
                "duration_s": self.duration.map(|d| d.measure.as_secs_f64()),
                "grace_s": self.duration.map(|d| d.grace.as_secs_f64()),
                "warmup_duration_s": self.duration.map(|d| d.warmup.as_secs_f64()),
                "ramp_up_s": self.ramp_up.map(|d| d.as_secs_f64()),
                "early_stop": self.early_stop.map(|e| serde_json::json!({
                    "max_relative_width": e.max_relative_width,
                    "min_requests": e.min_requests,
                    "confidence": e.confidence,
                })),
                "num_runs": self.runs.num_runs,
                "confidence_level": self.runs.confidence,
                "convergence": self.runs.convergence,
                "request_timeout_s": self.deadlines.request.map(|d| d.as_secs_f64()),
                "response_timeout_s": self.deadlines.response.map(|d| d.as_secs_f64()),
                "first_token_timeout_s": self.deadlines.first_token.map(|d| d.as_secs_f64()),
                "idle_timeout_s": self.deadlines.idle.map(|d| d.as_secs_f64()),
                "retries": self.retry.max_retries,
                "retry_backoff_ms": self.retry.backoff.as_millis() as u64,
            },
        })
    }
}

/// A fault plan from the command line: `rate` of requests get one of `kinds` (all HTTP/SSE
/// kinds when empty).
pub(crate) fn fault_plan(
    rate: f64,
    kinds: &[String],
    stall_ms: Option<u64>,
) -> anyhow::Result<FaultPlan> {
    let kinds = kinds
        .iter()
        .map(|k| {
            Fault::parse(k.trim()).ok_or_else(|| anyhow::anyhow!("unknown simulator fault {k:?}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut plan = FaultPlan::new(rate, kinds);
    if let Some(ms) = stall_ms {
        plan.stall_ms = ms;
    }
    Ok(plan)
}

fn load(path: &Option<PathBuf>) -> anyhow::Result<FileConfig> {
    match path {
        Some(p) => {
            let file = FileConfig::load(p)?;
            if !file.candidates.is_empty() {
                bail!(
                    "{} lists candidates: run it with `kneepoint recommend --config {}`",
                    p.display(),
                    p.display()
                );
            }
            Ok(file)
        }
        None => Ok(FileConfig::default()),
    }
}

/// SLAs from the flags, else from the file's `search_params`.
fn slas(args: &SlaArgs, file: &SearchSection) -> anyhow::Result<Vec<Sla>> {
    let flags_given = args.ttft_sla_ms.is_some()
        || args.tpot_sla_ms.is_some()
        || args.e2e_sla_ms.is_some()
        || args.error_rate_sla.is_some()
        || !args.slas.is_empty();
    let (ttft, tpot, e2e, err, general) = if flags_given {
        (
            args.ttft_sla_ms,
            args.tpot_sla_ms,
            args.e2e_sla_ms,
            args.error_rate_sla,
            &args.slas,
        )
    } else {
        (
            file.ttft_sla_ms,
            file.tpot_sla_ms,
            file.e2e_sla_ms,
            file.error_rate_sla,
            &file.slas,
        )
    };
    let mut out = Vec::new();
    for (v, make) in [
        (
            ttft,
            Sla::ttft_ms as fn(f64) -> Result<Sla, kneepoint_planner::Error>,
        ),
        (tpot, Sla::tpot_ms),
        (e2e, Sla::e2e_ms),
        (err, Sla::error_rate),
    ] {
        if let Some(v) = v {
            if v < 0.0 {
                bail!("SLA thresholds must be ≥ 0 (got {v})");
            }
            out.push(make(v)?);
        }
    }
    for g in general {
        out.push(Sla::parse(g)?);
    }
    Ok(out)
}

/// Everything a sweep needs.
#[derive(Debug, Clone)]
pub struct SweepSettings {
    /// Target, workload, output.
    pub common: CommonSettings,
    /// The levels.
    pub plan: SweepPlan,
    /// SLAs that mark each level pass/fail (may be empty).
    pub slas: Vec<Sla>,
    /// Peak traffic to size a fleet for.
    pub peak: Option<PeakTraffic>,
    /// Reserved capacity fraction for fleet sizing.
    pub headroom: f64,
}

impl SweepSettings {
    /// Merges the config file (if any) with the flags and validates the result.
    pub fn resolve(args: &SweepArgs) -> anyhow::Result<Self> {
        Self::resolve_with(args, &load(&args.common.config)?)
    }

    /// [`SweepSettings::resolve`] with the file already read.
    pub fn resolve_with(args: &SweepArgs, file: &FileConfig) -> anyhow::Result<Self> {
        let sw = file.sweep_params.clone().unwrap_or_default();
        let common = CommonSettings::resolve(&args.common, file, sw.request_count)?;
        let concurrency = if !args.concurrency.is_empty() {
            args.concurrency.clone()
        } else {
            sw.concurrency
                .clone()
                .unwrap_or_else(|| DEFAULT_CONCURRENCY.to_vec())
        };
        let plan = SweepPlan::uniform(&concurrency, common.request_count)?;
        let slas = slas(&args.sla, &file.search_params.clone().unwrap_or_default())?;
        if !common.transport.streaming {
            if let Some(s) = slas.iter().find(|s| s.requires_streaming()) {
                bail!("{} needs streaming responses", s.name);
            }
        }
        let fleet = file.fleet.clone().unwrap_or_default();
        let peaks = [
            args.peak_concurrency
                .or(fleet.peak_concurrency)
                .map(PeakTraffic::Concurrency),
            args.peak_rps
                .or(fleet.peak_rps)
                .map(PeakTraffic::RequestsPerSecond),
            args.peak_output_tokens_per_s
                .or(fleet.peak_output_tokens_per_s)
                .map(PeakTraffic::OutputTokensPerSecond),
        ];
        let given: Vec<PeakTraffic> = peaks.into_iter().flatten().collect();
        if given.len() > 1 {
            bail!("give one of --peak-concurrency, --peak-rps, --peak-output-tokens-per-s");
        }
        let headroom = args.headroom.or(fleet.headroom).unwrap_or(0.2);
        if !(0.0..1.0).contains(&headroom) {
            bail!("--headroom must be at least 0 and below 1");
        }
        Ok(SweepSettings {
            common,
            plan,
            slas,
            peak: given.first().copied(),
            headroom,
        })
    }
}

/// Everything a search needs.
#[derive(Debug, Clone)]
pub struct SearchSettings {
    /// Target, workload, output.
    pub common: CommonSettings,
    /// The search's parameters and SLAs.
    pub search: SearchConfig,
    /// SLAs judged at the pessimistic end of each probe's across-run confidence interval.
    pub sla_by_confidence: bool,
}

impl SearchSettings {
    /// Merges the config file (if any) with the flags and validates the result.
    pub fn resolve(args: &SearchArgs) -> anyhow::Result<Self> {
        Self::resolve_with(args, &load(&args.common.config)?)
    }

    /// [`SearchSettings::resolve`] with the file already read.
    pub fn resolve_with(args: &SearchArgs, file: &FileConfig) -> anyhow::Result<Self> {
        let sp = file.search_params.clone().unwrap_or_default();
        if let Some(r) = &sp.search_recipe {
            if r != "max-concurrency-under-sla" {
                bail!("search_recipe {r:?} is not known (only max-concurrency-under-sla)");
            }
        }
        let common = CommonSettings::resolve(&args.common, file, sp.request_count)?;
        if common.open_loop.is_some() {
            bail!("the search finds the highest concurrency under the SLAs in a closed loop; request_rate (open loop) applies to `kneepoint sweep`");
        }
        let mut search = SearchConfig::new(slas(&args.sla, &sp)?);
        search.request_count = common.request_count;
        search.streaming = common.transport.streaming;
        if let Some(v) = args.concurrency_min.or(sp.concurrency_min) {
            search.concurrency_min = v;
        }
        if let Some(v) = args.concurrency_max.or(sp.concurrency_max) {
            search.concurrency_max = v;
        }
        if let Some(v) = args.search_max_iterations.or(sp.search_max_iterations) {
            search.max_iterations = v;
        }
        search.initial_points = args.search_initial_points.or(sp.search_initial_points);
        if let Some(v) = args.precision.or(sp.precision) {
            search.precision = v;
        }
        if let Some(v) = args.confirm_margin.or(sp.confirm_margin) {
            search.confirm_margin = v;
        }
        search.validate()?;
        let sla_by_confidence = args.sla_by_confidence || sp.sla_by_confidence.unwrap_or(false);
        if sla_by_confidence && common.runs.num_runs < 2 {
            bail!("sla_by_confidence judges each probe by its confidence interval across runs: set num_runs to 2 or more");
        }
        Ok(SearchSettings {
            common,
            search,
            sla_by_confidence,
        })
    }
}

/// `artifacts/sweep-YYYYMMDDTHHMMSSZ`.
fn default_artifact_dir() -> PathBuf {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let stamp: String = kneepoint_metrics::export::rfc3339(now)
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect();
    PathBuf::from("artifacts").join(format!("sweep-{stamp}Z"))
}
