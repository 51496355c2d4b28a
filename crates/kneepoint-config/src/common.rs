//! What every load-sending command needs, resolved and validated: the target, the
//! transport's configuration, the workload and how levels run.

use std::path::PathBuf;
use std::time::Duration;

use kneepoint_engine::LevelSettings;
use kneepoint_runner::RetryPolicy;
use kneepoint_sim::SimProfile;
use kneepoint_transport::OpenAiConfig;
use kneepoint_workload::{Conversations, DatasetConfig, LengthDist, Lengths, SharedPrefix};

use crate::endpoint::{deadlines, openai_config};
use crate::error::bail;
use crate::file::{FileConfig, WorkloadSection};
use crate::options::flags_over;
use crate::workload::{conversations, dataset, lengths, mixture, prefix};
use crate::{CommonArgs, Protocol, Result, RoutesPlan, Target, DEFAULT_REQUEST_COUNT};

/// What every load-sending command needs, resolved and validated.
#[derive(Debug, Clone)]
pub struct CommonSettings {
    /// What the requests go to, and the one client configuration that reaches it.
    pub target: Target,
    /// The archive of the results and its upload, after the run.
    pub publish: crate::Publish,
    /// This process's part of a sharded sweep (`--shard K/N`).
    pub shard: Option<kneepoint_planner::Shard>,
    /// The whole sweep's levels before they were shared out (a sharded sweep's), recorded so
    /// that `merge` can check the shards add up.
    pub shard_levels: Vec<u32>,
    /// How every level runs (request count, warm-up, runs, load shape, deadlines, retries,
    /// the seed of the workload and of the arrival schedules), handed to the engine as is.
    pub levels: LevelSettings,
    /// Tokenizer spec (`builtin`, a path, a model id).
    pub tokenizer: String,
    /// Input lengths.
    pub isl: LengthDist,
    /// Output lengths.
    pub osl: LengthDist,
    /// A length sweep's (isl, osl) pairs (`--isl`/`--osl` lists); `isl`/`osl` are then the
    /// first pair's.
    pub lengths: Option<Vec<kneepoint_planner::LengthPoint>>,
    /// A weighted mixture of (isl, osl) pairs that replaces `isl`/`osl`.
    pub mixture: Option<Lengths>,
    /// Shared prefixes.
    pub prefix: Option<SharedPrefix>,
    /// Multi-turn conversations (synthetic prompts, closed loop, count-bound levels).
    pub conversations: Option<Conversations>,
    /// Images attached to each request (chat, synthetic prompts).
    pub images: Option<kneepoint_workload::Images>,
    /// Audio clips attached to each request (chat, synthetic prompts).
    pub audio: Option<kneepoint_workload::AudioClips>,
    /// Requests for an embeddings, rerank or score endpoint.
    pub pooling: Option<kneepoint_workload::Pooling>,
    /// A dataset instead of synthetic prompts (lengths then come from the records).
    pub dataset: Option<DatasetConfig>,
    /// Send `ignore_eos`/`min_tokens`.
    pub output_control: bool,
    /// Replace a run already in the artifact folder.
    pub overwrite: bool,
    /// `--reset-prefix-cache`: `auto` (the server's `/reset_prefix_cache`) or a URL.
    pub reset_prefix_cache: Option<String>,
    /// Which Prometheus endpoints to scrape during every level.
    pub server_metrics: ServerMetricsPlan,
    /// Output directory.
    pub artifact_dir: PathBuf,
}

/// The Prometheus endpoints scraped during every level.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerMetricsPlan {
    /// Given with `--server-metrics` and `--gpu-metrics`.
    pub endpoints: Vec<String>,
    /// Also scrape the target's own `/metrics` (an OpenAI-compatible server or the simulator).
    pub target_metrics: bool,
    /// Time between scrapes.
    pub interval: Duration,
}

impl ServerMetricsPlan {
    fn from_args(args: &CommonArgs) -> Result<Self> {
        let secs = args.scrape.server_metrics_interval.unwrap_or(1.0);
        if !(secs.is_finite() && (0.01..=3600.0).contains(&secs)) {
            bail!("--server-metrics-interval must be between 0.01 and 3600 seconds, not {secs}");
        }
        let endpoints: Vec<String> = args
            .scrape
            .server_metrics
            .iter()
            .chain(&args.scrape.gpu_metrics)
            .cloned()
            .collect();
        Ok(ServerMetricsPlan {
            target_metrics: !args.scrape.no_server_metrics && args.scrape.server_metrics.is_empty(),
            endpoints,
            interval: Duration::from_secs_f64(secs),
        })
    }

    /// The scrape settings for a target whose OpenAI-compatible base URL is `base_url` (None
    /// for SageMaker, which publishes no Prometheus page): `None` when nothing is scraped. The
    /// pages are fetched with the transports' client and `connect`'s TLS and proxy options.
    pub fn settings(
        &self,
        base_url: Option<&str>,
        connect: &kneepoint_transport::ConnectOptions,
    ) -> Result<Option<kneepoint_engine::ScrapeSettings>> {
        let mut endpoints = self.endpoints.clone();
        if let (true, Some(base)) = (self.target_metrics, base_url) {
            let base = base.trim_end_matches('/');
            let base = base.strip_suffix("/v1").unwrap_or(base);
            endpoints.insert(0, format!("{base}/metrics"));
        }
        if endpoints.is_empty() {
            return Ok(None);
        }
        let fetcher = kneepoint_transport::Fetcher::new(connect)?;
        let s = kneepoint_engine::ScrapeSettings::new(endpoints, std::sync::Arc::new(fetcher))
            .with_interval(self.interval)
            .with_timeout(
                self.interval
                    .clamp(Duration::from_millis(500), Duration::from_secs(5)),
            );
        Ok(Some(s))
    }
}

impl CommonSettings {
    /// Refuses an SLA on a server concept (`server_*`, `gpu_*`) when nothing will be
    /// scraped: every level would count it as breached.
    pub fn check_server_slas(&self, slas: &[kneepoint_planner::Sla]) -> Result<()> {
        let scraped = !self.server_metrics.endpoints.is_empty()
            || (self.server_metrics.target_metrics && self.target.has_metrics());
        if let Some(s) = slas
            .iter()
            .find(|s| matches!(s.metric, kneepoint_core::Metric::Server(_)))
        {
            if !scraped {
                bail!(
                    "{} is read from the server's metrics, and none will be scraped: give --server-metrics URL (or drop --no-server-metrics)",
                    s.name
                );
            }
        }
        Ok(())
    }

    /// Refuses goodput that could not be measured: an SLA on `goodput` or `slo_miss_rate`
    /// without per-request SLOs, or a token-timing SLO (TTFT, ITL) without streaming.
    pub fn check_goodput(&self, slas: &[kneepoint_planner::Sla]) -> Result<()> {
        use kneepoint_core::Metric;
        let slo = &self.levels.goodput;
        if let Some(s) = slas
            .iter()
            .find(|s| matches!(s.metric, Metric::Goodput | Metric::SloMissRate))
        {
            if slo.is_empty() {
                bail!("{} judges each request against per-request SLOs: give them with --goodput \"time_to_first_token:500 request_latency:8000\"", s.name);
            }
        }
        if (slo.ttft_ms.is_some() || slo.itl_ms.is_some()) && !self.target.protocol().streaming() {
            bail!("the goodput SLOs {slo} need streaming responses (TTFT and ITL are measured per token): stream (drop --streaming false) or hold requests to request_latency only");
        }
        Ok(())
    }

    /// Merges `file` with the flags and validates the result. `request_count` is the file's
    /// count for this command (sweep or search).
    pub fn resolve(
        args: &CommonArgs,
        file: &FileConfig,
        request_count: Option<u32>,
    ) -> Result<Self> {
        let ep = flags_over(&args.endpoint, &file.endpoint.clone().unwrap_or_default());
        let wl = flags_over(&args.workload, &file.workload.clone().unwrap_or_default());
        let sw = flags_over(
            &args.load.counts,
            &file.sweep_params.clone().unwrap_or_default(),
        );
        let sim = flags_over(&args.simulator, &file.simulator.clone().unwrap_or_default());
        let load = flags_over(&args.load.section, &file.load.clone().unwrap_or_default());
        let runs = flags_over(&args.load.runs, &file.runs.clone().unwrap_or_default());
        let url = ep.url.as_ref().and_then(|u| u.first().cloned());
        let sm_name = ep.sagemaker_endpoint.clone();
        // Without a URL or a SageMaker endpoint, the built-in simulator.
        let sim_profile = match (&url, &sm_name) {
            (None, None) => Some(crate::simulator::profile(args, &sim, file)?),
            _ => None,
        };
        let transport = openai_config(&ep, &wl, url.as_deref(), sim_profile.as_ref())?;
        let sim_protocol = sim.sim_protocol.unwrap_or(crate::SimProtocol::OpenAi);
        if sm_name.is_some() && url.is_some() {
            bail!(
                "give either --url (an OpenAI-compatible server) or --sagemaker-endpoint, not both"
            );
        }
        // The SageMaker endpoint's name: the one asked for, or the simulator's.
        let sagemaker = match (
            &sm_name,
            sim_profile.is_some() && sim_protocol == crate::SimProtocol::SageMaker,
        ) {
            (Some(name), _) => Some(name.clone()),
            (None, true) => Some("kneepoint-sim".to_owned()),
            (None, false) => None,
        };

        // (a sweep's per-level counts are laid on its plan; this is the first level's)
        let request_count = args
            .load
            .counts
            .request_count
            .as_ref()
            .map(crate::RequestCounts::first)
            .or(request_count)
            .unwrap_or(DEFAULT_REQUEST_COUNT);
        if request_count == 0 {
            bail!("request_count must be at least 1");
        }
        let (isl, osl) = lengths(&wl)?;
        let artifact_dir = args
            .output
            .artifact_dir
            .clone()
            .or(file.artifact_dir.clone())
            .unwrap_or_else(|| crate::common::default_artifact_dir("sweep"));
        let output_control = !ep.no_output_control && wl.output_control.unwrap_or(true);
        let mut levels = crate::load::level_settings(&sw, &load, &runs, request_count)?;
        levels.seed = wl.seed.unwrap_or(0);
        let shard = crate::load::shard(
            args.load.shard.as_deref(),
            &mut levels,
            url.is_some() || sm_name.is_some(),
        )?;
        apply_flags(&mut levels, args)?;
        levels.deadlines = deadlines(&ep)?;
        let conversations = multi_turn(&wl, &levels)?;
        let routes = routes_plan(&ep, conversations.is_some(), sm_name.is_some())?;
        let images = images(&wl, transport.api, sm_name.is_some())?;
        if images.is_some() && conversations.is_some() {
            bail!("images go with single requests for now: a conversation's history would send them without their images");
        }
        let audio = crate::workload::audio(&wl, transport.api, sm_name.is_some())?;
        if audio.is_some() && conversations.is_some() {
            bail!("audio goes with single requests for now: a conversation's history would send it without its audio");
        }
        let pooling = pooling(
            &wl,
            transport.api,
            sm_name.is_some(),
            conversations.is_some(),
        )?;
        Ok(CommonSettings {
            shard,
            shard_levels: Vec::new(),
            publish: crate::Publish::resolve(
                &args.output.publish,
                file.output.as_ref(),
                ep.aws_profile.clone(),
            )?,
            target: target(&ep, sim_profile, transport, routes, sagemaker)?,
            levels,
            tokenizer: wl.tokenizer.clone().unwrap_or_else(|| "builtin".into()),
            lengths: crate::workload::length_points(&wl)?,
            mixture: mixture(&wl)?,
            prefix: prefix(&wl),
            conversations,
            images,
            audio,
            pooling,
            dataset: dataset(args, &wl, &osl)?.map(|mut d| {
                d.conversations = conversations;
                d
            }),
            isl,
            osl,
            output_control,
            overwrite: args.output.overwrite,
            reset_prefix_cache: args.load.reset_prefix_cache.clone(),
            server_metrics: ServerMetricsPlan::from_args(args)?,
            artifact_dir,
        })
    }
}

/// The one target enum from its resolved parts: a SageMaker endpoint's name (asked for, or the
/// simulator's when it speaks SageMaker) makes the protocol SageMaker's, whose settings follow
/// `openai`'s body fields; otherwise the OpenAI configuration is the protocol spoken.
fn target(
    ep: &crate::file::EndpointSection,
    sim: Option<SimProfile>,
    openai: OpenAiConfig,
    routes: Option<RoutesPlan>,
    sagemaker: Option<String>,
) -> Result<Target> {
    let protocol = match sagemaker {
        #[cfg(feature = "sagemaker")]
        Some(name) => Protocol::SageMaker(crate::sagemaker::sagemaker_settings(ep, &openai, name)?),
        #[cfg(not(feature = "sagemaker"))]
        Some(_) => {
            let _ = ep;
            bail!("this build has no SageMaker support: build kneepoint-config with its `sagemaker` feature");
        }
        None => Protocol::OpenAi {
            config: openai,
            routes,
        },
    };
    Ok(match sim {
        Some(profile) => Target::Simulator {
            profile: Box::new(profile),
            protocol,
        },
        None => Target::Endpoint(protocol),
    })
}

/// Multi-turn conversations, where they can run: synthetic prompts in a closed loop with
/// count-bound levels.
fn multi_turn(wl: &WorkloadSection, levels: &LevelSettings) -> Result<Option<Conversations>> {
    let from_dataset = wl.dataset_multi_turn;
    let has_dataset = wl.dataset.is_some();
    if from_dataset && !has_dataset {
        bail!("--dataset-multi-turn reads the turns of a ShareGPT --dataset; give one");
    }
    let c = match conversations(wl)? {
        Some(_) if has_dataset => bail!(
            "with --dataset the file gives the turns: use --dataset-multi-turn (ShareGPT) instead of conversation_turn_mean"
        ),
        Some(c) => c,
        None if from_dataset => crate::workload::turn_delays(wl)?,
        None => return Ok(None),
    };
    if levels.open_loop.is_some() {
        bail!("multi-turn conversations run in a closed loop (concurrency counts conversations): drop the request rate");
    }
    if levels.duration.is_some() {
        bail!(
            "multi-turn conversations run in count-bound levels for now: drop the level duration"
        );
    }
    Ok(Some(c))
}

/// What the flags alone set on the levels: the start time, finish reasons, usage trust,
/// outputs, records and retries.
fn apply_flags(levels: &mut LevelSettings, args: &CommonArgs) -> Result<()> {
    levels.start_at_unix_ns = args
        .load
        .start_at
        .as_deref()
        .map(parse_start_at)
        .transpose()?;
    levels.require_finish_reason = !args.load.allow_missing_finish_reason;
    levels.trust_server_usage = args.load.trust_server_usage;
    levels.export_outputs = args.output.export_outputs_json;
    levels.compress_records = args.output.records_zstd;
    if let Some(n) = args.output.records_in_memory {
        levels.records_in_memory = n;
    }
    levels.exact_percentiles = args.output.exact_percentiles;
    if let Some(n) = args.output.inputs_limit {
        levels.inputs_limit = n;
    }
    levels.retry = RetryPolicy {
        max_retries: args.load.retries.unwrap_or(0),
        backoff: Duration::from_millis(args.load.retry_backoff_ms.unwrap_or(500)),
    };
    Ok(())
}

/// The routes `--model a,b` and repeated `--url`s ask for; none for one model on one URL.
fn routes_plan(
    ep: &crate::EndpointOptions,
    conversations: bool,
    sagemaker: bool,
) -> Result<Option<RoutesPlan>> {
    let urls = ep.url.clone().unwrap_or_default();
    let models = match &ep.model {
        Some(m) => crate::endpoint::parse_models(m)?,
        None => Vec::new(),
    };
    if models.len() <= 1 && urls.len() <= 1 {
        if ep.route_by.is_some() {
            bail!("--route-by needs several models (--model a,b) or several --url");
        }
        return Ok(None);
    }
    if sagemaker {
        bail!("several models or URLs are for OpenAI-compatible endpoints, not SageMaker");
    }
    if models.is_empty() {
        bail!("with several --url, name the model(s) with --model");
    }
    let rule = match ep.route_by.as_deref() {
        Some(r) => r.parse()?,
        None if conversations => kneepoint_transport::RouteRule::Sticky,
        None => kneepoint_transport::RouteRule::RoundRobin,
    };
    Ok(Some(RoutesPlan { urls, models, rule }))
}

/// Images per request, where they can be sent: chat requests of synthetic prompts.
fn images(
    wl: &WorkloadSection,
    api: kneepoint_transport::Api,
    sagemaker: bool,
) -> Result<Option<kneepoint_workload::Images>> {
    let count = wl.images_per_request.unwrap_or(0);
    if count == 0 {
        return Ok(None);
    }
    if api != kneepoint_transport::Api::Chat || sagemaker {
        bail!("images go in chat requests to an OpenAI-compatible endpoint (--endpoint-type chat)");
    }
    if wl.dataset.is_some() {
        bail!("images are added to synthetic prompts: drop --dataset or --images-per-request");
    }
    let i = kneepoint_workload::Images {
        count,
        width: wl.image_width.unwrap_or(512),
        height: wl.image_height.unwrap_or(512),
        pool: wl.image_pool.unwrap_or(16),
    };
    i.validate()?;
    Ok(Some(i))
}

/// Pooling requests for an embeddings, rerank or score endpoint type.
fn pooling(
    wl: &WorkloadSection,
    api: kneepoint_transport::Api,
    sagemaker: bool,
    conversations: bool,
) -> Result<Option<kneepoint_workload::Pooling>> {
    use kneepoint_transport::Api;
    use kneepoint_workload::Pooling;
    let batch = wl.batch_size;
    if !api.is_pooling() {
        if batch.is_some() {
            bail!("--batch-size is for the pooling endpoint types (embeddings, rerank, score)");
        }
        return Ok(None);
    }
    if sagemaker {
        bail!("the pooling endpoint types are for OpenAI-compatible servers, not SageMaker");
    }
    if conversations {
        bail!("pooling endpoints take no conversations: drop the conversation_turn options");
    }
    if wl.dataset.is_some() {
        bail!("pooling requests are synthetic for now: drop --dataset");
    }
    if batch == Some(0) {
        bail!("--batch-size must be at least 1");
    }
    Ok(Some(match api {
        Api::Embeddings => Pooling::Embed {
            batch: batch.unwrap_or(1),
        },
        _ => Pooling::Rank {
            batch: batch.unwrap_or(8),
        },
    }))
}

/// How far ahead `--start-at` may be (a typo in the year would otherwise wait silently).
pub const MAX_START_AHEAD_S: u64 = 7 * 24 * 3600;

/// `--start-at`: RFC 3339 UTC (`2026-12-01T19:30:00Z`) or Unix seconds, into Unix ns; at most
/// [`MAX_START_AHEAD_S`] from now.
pub fn parse_start_at(s: &str) -> Result<u64> {
    let ns = match kneepoint_metrics::export::parse_rfc3339(s) {
        Some(ns) => ns,
        None => match s.trim().parse::<f64>() {
            Ok(secs) if secs.is_finite() && (0.0..1.8e10).contains(&secs) => (secs * 1e9) as u64,
            _ => bail!(
                "--start-at must be a UTC time like 2026-12-01T19:30:00Z or Unix seconds, not {s:?}"
            ),
        },
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    if ns > now.saturating_add(MAX_START_AHEAD_S * 1_000_000_000) {
        bail!(
            "--start-at {s} is more than 7 days ahead ({:.0} s): a typo?",
            (ns - now) as f64 / 1e9
        );
    }
    Ok(ns)
}

/// `artifacts/<kind>-YYYYMMDDTHHMMSSZ` (UTC).
pub(crate) fn default_artifact_dir(kind: &str) -> PathBuf {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let stamp: String = kneepoint_metrics::export::rfc3339(now)
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect();
    PathBuf::from("artifacts").join(format!("{kind}-{stamp}Z"))
}
