//! The config file (TOML or JSON) and the resolved settings of a sweep. CLI flags win over the
//! file; the file wins over defaults. SageMaker's names are accepted where they exist
//! (`sweep_params.concurrency`, `sweep_params.request_count`, `prompt_input_tokens_mean`, ...).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use kneepoint_planner::{PeakTraffic, SearchConfig, Sla, SweepPlan};
use kneepoint_runner::{Deadlines, RetryPolicy};
use kneepoint_sim::{Fault, FaultPlan, SimProfile};
use kneepoint_transport::{Api, ApiKey, MaxTokensField, OpenAiConfig};
use kneepoint_workload::{
    DatasetConfig, DatasetFormat, LengthDist, Lengths, MixEntry, Sampling, SharedPrefix,
};
use serde::{Deserialize, Serialize};

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
        if is_json {
            serde_json::from_str(&text)
                .with_context(|| format!("parsing {} as JSON", path.display()))
        } else {
            toml::from_str(&text).with_context(|| format!("parsing {} as TOML", path.display()))
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

fn dist(mean: f64, stddev: f64, what: &str) -> anyhow::Result<LengthDist> {
    if !mean.is_finite() || mean < 1.0 {
        bail!("{what} mean must be at least 1 token (got {mean})");
    }
    if !stddev.is_finite() || stddev < 0.0 {
        bail!("{what} stddev must be ≥ 0 (got {stddev})");
    }
    Ok(LengthDist::mean_stddev(mean, stddev))
}

fn seconds(what: &str, v: Option<f64>) -> anyhow::Result<Option<Duration>> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => bail!("the {what} must be a positive number of seconds, not {s}"),
    }
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
            p.faults = sim.faults.clone();
            if let Some(rate) = args.sim_fault_rate {
                let kinds = args
                    .sim_faults
                    .iter()
                    .map(|k| {
                        Fault::parse(k.trim())
                            .ok_or_else(|| anyhow::anyhow!("unknown simulator fault {k:?}"))
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let mut plan = FaultPlan::new(rate, kinds);
                if let Some(ms) = args.sim_stall_ms {
                    plan.stall_ms = ms;
                }
                p.faults = Some(plan);
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
        let timeout_s = args
            .request_timeout_s
            .or(ep.request_timeout_s)
            .unwrap_or(600.0);
        if !timeout_s.is_finite() || timeout_s <= 0.0 {
            bail!("the request timeout must be a positive number of seconds");
        }
        let artifact_dir = args
            .artifact_dir
            .clone()
            .or(file.artifact_dir.clone())
            .unwrap_or_else(default_artifact_dir);
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
                request: Some(Duration::from_secs_f64(timeout_s)),
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
        Ok(SearchSettings { common, search })
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

/// A condensed per-level row of `sweep_summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelRow {
    /// Requests in flight.
    pub concurrency: u32,
    /// Measured requests recorded.
    pub request_count: usize,
    /// Failures.
    pub error_count: usize,
    /// failed / recorded.
    pub error_rate: f64,
    /// Seconds.
    pub benchmark_duration_s: f64,
    /// Successful requests / s.
    pub request_throughput: f64,
    /// Output tokens / s.
    pub output_token_throughput: f64,
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
}
