//! What every load-sending command shares: the target (starting the built-in simulator when
//! there is no URL), the transport and the workload, handed to the engine as a bench.

use kneepoint_engine::BenchOptions;
use std::sync::Arc;

use kneepoint_core::{TokenCounter, Transport};
use kneepoint_engine::{Bench, BenchBuilder, Observer};
use kneepoint_sim::SimServer;
use kneepoint_transport::{OpenAiConfig, OpenAiTransport};
use kneepoint_workload::{
    load_tokenizer, DatasetWorkload, SyntheticConfig, SyntheticWorkload, TokenizerCounter, Workload,
};

use crate::error::{bail, Context};
use crate::{CommonSettings, Error, Protocol, Result, Target};

/// Asks the server which model it serves; also fails fast when the endpoint is unreachable.
async fn detect_model(config: &OpenAiConfig) -> Result<String> {
    let probe = OpenAiTransport::new(config.clone())?;
    let models = tokio::time::timeout(std::time::Duration::from_secs(30), probe.models())
        .await
        .map_err(|_| Error::Invalid("GET /v1/models did not answer within 30 s".into()))?
        .with_context(|| {
            format!(
                "no --model given, and asking {} for its models failed",
                kneepoint_transport::redact_url(&config.base_url)
            )
        })?;
    models
        .into_iter()
        .next()
        .ok_or_else(|| Error::Invalid("the server lists no models; pass --model".into()))
}

/// Fails fast when the endpoint cannot be reached at all, instead of running a sweep of
/// connection failures. Any HTTP answer (even 404: not every server lists models) is enough.
async fn ready(config: &OpenAiConfig) -> Result<()> {
    let probe = OpenAiTransport::new(config.clone())?;
    match tokio::time::timeout(std::time::Duration::from_secs(15), probe.models()).await {
        Err(_) => bail!(
            "{} did not answer within 15 s",
            kneepoint_transport::redact_url(&config.base_url)
        ),
        Ok(Err(e)) if e.kind() == kneepoint_core::ErrorKind::Connect => Err(e).context(format!(
            "cannot reach {}",
            kneepoint_transport::redact_url(&config.base_url)
        )),
        Ok(_) => Ok(()),
    }
}

/// One target per (URL, model) of `plan`, each a transport like `base` but for its URL and
/// model; every URL must answer first.
async fn routed_transport(
    plan: &crate::RoutesPlan,
    base: &OpenAiConfig,
) -> Result<kneepoint_transport::RoutedTransport> {
    let urls = if plan.urls.is_empty() {
        vec![base.base_url.clone()]
    } else {
        plan.urls.clone()
    };
    let mut targets = Vec::new();
    for url in &urls {
        let mut c = base.clone();
        c.base_url = url.clone();
        if url != &base.base_url {
            ready(&c).await?;
        }
        for (model, weight) in &plan.models {
            c.model = model.clone();
            targets.push(kneepoint_transport::RouteTarget {
                transport: Arc::new(OpenAiTransport::new(c.clone())?),
                route: kneepoint_core::Route {
                    model: model.clone(),
                    url: kneepoint_transport::redact_url(url),
                },
                weight: *weight,
            });
        }
    }
    Ok(kneepoint_transport::RoutedTransport::new(
        targets, plan.rule,
    )?)
}

/// Starts the built-in simulator, speaking OpenAI or (with `sm`) the SageMaker protocol with
/// a fresh test key; returns the transport to it.
async fn start_simulator(
    profile: &kneepoint_sim::SimProfile,
    protocol: &Protocol,
    counter: Arc<dyn TokenCounter>,
) -> Result<(Arc<dyn Transport>, SimServer, String)> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    match protocol {
        #[cfg(feature = "sagemaker")]
        Protocol::SageMaker(sm) => crate::sagemaker::start_simulator(profile, sm, counter).await,
        Protocol::OpenAi { config: openai, .. } => {
            let server = SimServer::start_with_counter(profile.clone(), addr, counter)
                .await
                .context("starting the built-in simulator")?;
            let mut c = openai.clone();
            c.base_url = server.base_url();
            // Our own simulator takes the prompt length from the client instead of tokenizing
            // every prompt on the CPU the client needs.
            c.send_input_token_hint = true;
            // The simulator is on loopback: a proxy from the environment must not catch it.
            c.connect.proxy = kneepoint_transport::ProxySetting::Off;
            let url = server.base_url();
            Ok((Arc::new(OpenAiTransport::new(c)?), server, url))
        }
    }
}

/// Reaches the target: starts the built-in simulator (filling in its URL), or checks that an
/// endpoint answers (asking an OpenAI-compatible server for its model when none was named);
/// returns the transport (routed when there are several models or URLs) and the simulator to
/// keep alive.
async fn connect(
    target: &mut Target,
    counter: Arc<dyn TokenCounter>,
    observer: &dyn Observer,
) -> Result<(Arc<dyn Transport>, Option<SimServer>)> {
    let (transport, server): (Arc<dyn Transport>, Option<SimServer>) = match target {
        Target::Simulator { profile, protocol } => {
            let (transport, server, base_url) = start_simulator(profile, protocol, counter).await?;
            observer.note(&format!(
                "built-in simulator ({} profile, {}x real time, {} protocol) on {}",
                profile.name,
                1.0 / profile.time_scale,
                match protocol {
                    Protocol::OpenAi { .. } => "OpenAI",
                    #[cfg(feature = "sagemaker")]
                    Protocol::SageMaker(_) => "SageMaker",
                },
                base_url
            ));
            match protocol {
                Protocol::OpenAi { config, .. } => {
                    config.base_url = base_url;
                    config.send_input_token_hint = true;
                    config.connect.proxy = kneepoint_transport::ProxySetting::Off;
                }
                #[cfg(feature = "sagemaker")]
                Protocol::SageMaker(sm) => {
                    sm.config.endpoint_url = Some(base_url);
                    sm.config.send_input_token_hint = true;
                    sm.config.connect.proxy = kneepoint_transport::ProxySetting::Off;
                }
            }
            (transport, Some(server))
        }
        #[cfg(feature = "sagemaker")]
        Target::Endpoint(Protocol::SageMaker(sm)) => (crate::sagemaker::connect(sm).await?, None),
        Target::Endpoint(Protocol::OpenAi { config, .. }) => {
            if config.model.is_empty() {
                config.model = detect_model(config).await?;
                observer.note(&format!("model: {} (from GET /v1/models)", config.model));
            } else {
                ready(config).await?;
            }
            (Arc::new(OpenAiTransport::new(config.clone())?), None)
        }
    };
    let Protocol::OpenAi {
        config,
        routes: Some(plan),
    } = target.protocol()
    else {
        return Ok((transport, server));
    };
    let routed = routed_transport(plan, config).await?;
    observer.note(&format!(
        "spreading requests over {} ({:?}): {}",
        routed.targets().len(),
        plan.rule,
        routed
            .targets()
            .iter()
            .map(|t| format!("{} on {}", t.route.model, t.route.url))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok((Arc::new(routed), server))
}

/// The prefix-cache reset's URL: the one given, or (`auto`) the OpenAI-compatible server's
/// `/reset_prefix_cache` beside its `/v1` (where the scraper finds `/metrics`).
fn reset_url(given: &str, target: &crate::Target) -> Result<String> {
    if target.protocol().routes().is_some_and(|r| r.urls.len() > 1) {
        bail!("--reset-prefix-cache empties one server's cache, and requests go to several URLs: run against one server, or reset the others yourself");
    }
    if given != "auto" {
        let scheme = given.split("://").next().unwrap_or("").to_ascii_lowercase();
        if !given.contains("://") || !(scheme == "http" || scheme == "https") {
            bail!(
                "--reset-prefix-cache takes an http(s) URL, not {:?}",
                kneepoint_transport::redact_url(given)
            );
        }
        return Ok(given.to_owned());
    }
    match target.protocol() {
        Protocol::OpenAi { config, .. } => {
            // the server's root, found as the scraper finds /metrics: the base URL without /v1
            let base = config.base_url.trim_end_matches('/');
            let base = base.strip_suffix("/v1").unwrap_or(base);
            Ok(format!("{base}/reset_prefix_cache"))
        }
        #[cfg(feature = "sagemaker")]
        Protocol::SageMaker(_) => bail!(
            "a SageMaker endpoint offers no prefix-cache reset: --reset-prefix-cache applies to a server kneepoint can reach directly"
        ),
    }
}

/// The synthetic prompts of `settings` with the lengths `isl` and `osl` (a length sweep makes
/// one per length, from the same settings and seed).
pub(crate) fn synthetic(
    settings: &CommonSettings,
    tokenizer: Arc<dyn kneepoint_workload::Tokenizer>,
    isl: kneepoint_workload::LengthDist,
    osl: kneepoint_workload::LengthDist,
) -> std::result::Result<Box<dyn Workload>, kneepoint_workload::Error> {
    let mut config = SyntheticConfig::new(isl, osl, settings.levels.seed);
    if let Some(m) = &settings.mixture {
        config.lengths = m.clone();
    }
    config.prefix = settings.prefix;
    config.conversations = settings.conversations;
    config.images = settings.images;
    config.audio = settings.audio;
    config.pooling = settings.pooling;
    config.ignore_eos = settings.output_control;
    config.min_tokens = settings.output_control;
    Ok(Box::new(SyntheticWorkload::from_config(tokenizer, config)?))
}

/// The longest trace replay accepted: 30 days.
const MAX_REPLAY_S: f64 = 30.0 * 86_400.0;

/// Seconds from a trace's first timestamp to its last.
fn replay_span_s(times_ms: &[u64]) -> f64 {
    let (lo, hi) = times_ms
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), t| (lo.min(*t), hi.max(*t)));
    hi.saturating_sub(lo) as f64 / 1000.0
}

/// `s` seconds as a person reads them (`2 h 5 min`, `41 days`).
fn human_duration(s: f64) -> String {
    match s {
        s if !s.is_finite() => "forever".into(),
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h", s / 3600.0),
        s if s < 2.0 * 31_557_600.0 => format!("{:.0} days", s / 86_400.0),
        s if s < 1e9 * 31_557_600.0 => format!("{:.0} years", s / 31_557_600.0),
        s => format!("{:.1e} years", s / 31_557_600.0),
    }
}

/// Starts the target (the built-in simulator when there is no URL), builds the transport and
/// the workload, and returns the engine's bench for them, reporting to `observer`. The bench
/// keeps a started simulator alive.
pub async fn prepare(
    settings: &CommonSettings,
    observer: Arc<dyn Observer>,
) -> Result<BenchBuilder> {
    // The engine checks again when the bench is built; checking first refuses bad settings
    // before a simulator starts or a dataset loads.
    settings.levels.validate()?;
    let tokenizer = load_tokenizer(&settings.tokenizer)
        .with_context(|| format!("loading tokenizer {:?}", settings.tokenizer))?;
    let counter: Arc<dyn TokenCounter> = Arc::new(TokenizerCounter(tokenizer.clone()));
    let mut resolved = settings.clone();
    let (transport, server) =
        connect(&mut resolved.target, counter.clone(), observer.as_ref()).await?;
    let description = crate::server_identity::described(&resolved).await;
    // the prefix-cache reset is tried once now: a server without the route is refused before
    // a dataset loads or anything is created
    let reset = match &settings.reset_prefix_cache {
        Some(_) if settings.shard.is_some() => bail!(
            "--reset-prefix-cache with --shard: every shard would empty the cache in the middle of the others' levels; reset once before the sharded sweep instead"
        ),
        Some(given) => {
            let url = reset_url(given, &resolved.target)?;
            let fetch = kneepoint_transport::Fetcher::new(resolved.target.protocol().connect())?;
            let reset = kneepoint_engine::PrefixCacheReset::new(url, Arc::new(fetch));
            if let Err(why) = reset.reset().await {
                bail!("{}", reset.refused(&why));
            }
            Some(reset)
        }
        None => None,
    };
    let scrape_base = match resolved.target.protocol() {
        Protocol::OpenAi { config, .. } => Some(config.base_url.as_str()),
        #[cfg(feature = "sagemaker")]
        Protocol::SageMaker(_) => None,
    };
    let scrape = settings
        .server_metrics
        .settings(scrape_base, resolved.target.protocol().connect())?;
    let replaying = settings
        .levels
        .open_loop
        .as_ref()
        .is_some_and(|o| o.replay_speedup.is_some());
    let mut replay = None;
    let workload: Box<dyn Workload> = match &settings.dataset {
        Some(d) => {
            let w = DatasetWorkload::load(tokenizer, d.clone())
                .with_context(|| format!("loading dataset {}", d.path.display()))?;
            let sessions = w.multi_turn_conversations();
            if sessions > 0 && settings.levels.open_loop.is_some() {
                bail!(
                    "{} holds {sessions} conversations of several turns, which run in a closed loop (concurrency counts conversations, each turn after the previous reply): give a concurrency, not a request rate or a replay",
                    d.path.display()
                );
            }
            if sessions > 0 && settings.levels.duration.is_some() {
                bail!(
                    "{} holds {sessions} conversations of several turns, which run in count-bound levels for now: drop the level duration",
                    d.path.display()
                );
            }
            if replaying {
                let Some(times) = w.timestamps_ms() else {
                    bail!(
                            "replay_speedup needs a trace dataset with a timestamp on every record (timestamp, input_length, output_length); {} is not one",
                            d.path.display()
                        );
                };
                if d.sampling != kneepoint_workload::Sampling::Sequential {
                    bail!("a trace replay sends records in their recorded order: use sequential sampling");
                }
                let speedup = settings
                    .levels
                    .open_loop
                    .as_ref()
                    .and_then(|o| o.replay_speedup)
                    .unwrap_or(1.0);
                let planned = replay_span_s(&times) / speedup;
                if planned.is_nan() || planned > MAX_REPLAY_S {
                    bail!(
                        "replaying {} at x{speedup} would take {} (its timestamps span {}): at most {} is replayed; raise --replay-speedup or cut the trace (timestamps are milliseconds from the trace's start)",
                        d.path.display(),
                        human_duration(planned),
                        human_duration(replay_span_s(&times)),
                        human_duration(MAX_REPLAY_S),
                    );
                }
                observer.note(&format!(
                    "trace replay: {} requests over {} at x{speedup}",
                    times.len(),
                    human_duration(planned)
                ));
                replay = Some(times);
            }
            Box::new(w)
        }
        None if replaying => bail!("replay_speedup needs --dataset with a trace"),
        None => synthetic(settings, tokenizer, settings.isl, settings.osl)?,
    };
    let mut bench = Bench::builder(transport)
        .boxed_workload(workload)
        .token_counter(counter)
        .settings(resolved.levels.clone())
        .description(description)
        .observer(observer)
        .artifacts(&resolved.artifact_dir)
        .overwrite(resolved.overwrite)
        .server_metrics(scrape);
    if let Some(times) = replay {
        bench = bench.trace(times);
    }
    bench = bench.reset_prefix_cache(reset);
    if let Some(server) = server {
        bench = bench.keep_alive(server);
    }
    Ok(bench)
}
