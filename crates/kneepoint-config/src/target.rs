//! What every load-sending command shares: the target (starting the built-in simulator when
//! there is no URL), the transport and the workload, handed to the engine as a bench.

use std::sync::Arc;

use kneepoint_core::{TokenCounter, Transport};
use kneepoint_engine::{Bench, BenchBuilder, Observer};
use kneepoint_sim::SimServer;
use kneepoint_transport::sagemaker::{AwsCredentialChain, SageMakerTransport, StaticCredentials};
use kneepoint_transport::{OpenAiConfig, OpenAiTransport};
use kneepoint_workload::{
    load_tokenizer, DatasetWorkload, SyntheticConfig, SyntheticWorkload, TokenizerCounter, Workload,
};

use crate::error::{bail, Context};
use crate::{CommonSettings, Error, Result, SageMakerSettings, Target};

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

/// Fails fast when a SageMaker runtime URL cannot be reached at all (there is no cheap,
/// unbilled request to send, so this checks that a TCP connection opens).
async fn ready_tcp(base_url: &str) -> Result<()> {
    let uri: http::Uri = base_url
        .parse()
        .with_context(|| format!("invalid endpoint URL {base_url}"))?;
    let host = uri.host().unwrap_or("localhost").to_owned();
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    match tokio::time::timeout(
        std::time::Duration::from_secs(15),
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    {
        Err(_) => bail!("{base_url} did not accept a connection within 15 s"),
        Ok(Err(e)) => Err(e).context(format!("cannot reach {base_url}")),
        Ok(Ok(_)) => Ok(()),
    }
}

/// Starts the built-in simulator, speaking OpenAI or (with `sm`) the SageMaker protocol with
/// a fresh test key; returns the transport to it.
async fn start_simulator(
    profile: &kneepoint_sim::SimProfile,
    sm: Option<&SageMakerSettings>,
    openai: &OpenAiConfig,
    counter: Arc<dyn TokenCounter>,
) -> Result<(Arc<dyn Transport>, SimServer, String)> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let Some(sm) = sm else {
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
        return Ok((Arc::new(OpenAiTransport::new(c)?), server, url));
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let key = kneepoint_sim::SigV4TestKey {
        access_key_id: format!("AKIDKNEEPOINTSIM{}", nanos % 1_000_000),
        secret_access_key: format!("sim-secret-{nanos:x}"),
    };
    let options = kneepoint_sim::SimOptions {
        sigv4: Some(key.clone()),
        endpoint_name: Some(sm.config.endpoint_name.clone()),
    };
    let server = SimServer::start_with_options(profile.clone(), addr, counter, options)
        .await
        .context("starting the built-in simulator")?;
    let mut c = sm.config.clone();
    c.endpoint_url = Some(server.base_url());
    c.send_input_token_hint = true;
    c.connect.proxy = kneepoint_transport::ProxySetting::Off;
    if c.model.is_empty() {
        c.model = profile.model.clone();
    }
    let creds = aws_credential_types::Credentials::new(
        key.access_key_id,
        key.secret_access_key,
        None,
        None,
        "kneepoint-sim",
    );
    let url = server.base_url();
    let t = SageMakerTransport::new(c, Arc::new(StaticCredentials(creds)))?;
    Ok((Arc::new(t), server, url))
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
    let mut transport_config = settings.transport.clone();
    let tokenizer = load_tokenizer(&settings.tokenizer)
        .with_context(|| format!("loading tokenizer {:?}", settings.tokenizer))?;
    let counter: Arc<dyn TokenCounter> = Arc::new(TokenizerCounter(tokenizer.clone()));
    let mut resolved = settings.clone();
    let (transport, server): (Arc<dyn Transport>, Option<SimServer>) = match (
        &settings.target,
        &settings.sagemaker,
    ) {
        (Target::Simulator(profile), sm) => {
            let (transport, server, base_url) =
                start_simulator(profile, sm.as_ref(), &transport_config, counter.clone()).await?;
            observer.note(&format!(
                "built-in simulator ({} profile, {}x real time, {} protocol) on {}",
                profile.name,
                1.0 / profile.time_scale,
                if sm.is_some() { "SageMaker" } else { "OpenAI" },
                base_url
            ));
            transport_config.base_url = base_url;
            transport_config.send_input_token_hint = true;
            (transport, Some(server))
        }
        (Target::SageMaker, Some(sm)) => {
            ready_tcp(&sm.config.base_url()).await?;
            let creds = AwsCredentialChain::load(
                        &sm.config.region,
                        sm.aws_profile.as_deref(),
                    )
                    .await
                    .context("loading AWS credentials (environment, ~/.aws files, web identity, container or instance metadata)")?;
            let t = SageMakerTransport::new(sm.config.clone(), Arc::new(creds))?;
            (Arc::new(t), None)
        }
        (Target::SageMaker, None) => bail!("no SageMaker endpoint configured"),
        (Target::OpenAi(_), _) => {
            if transport_config.model.is_empty() {
                transport_config.model = detect_model(&transport_config).await?;
                observer.note(&format!(
                    "model: {} (from GET /v1/models)",
                    transport_config.model
                ));
            } else {
                ready(&transport_config).await?;
            }
            let t = OpenAiTransport::new(transport_config.clone())?;
            (Arc::new(t), None)
        }
    };
    let transport = match &settings.routes {
        Some(plan) => {
            let routed = routed_transport(plan, &transport_config).await?;
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
            Arc::new(routed) as Arc<dyn Transport>
        }
        None => transport,
    };
    resolved.transport = transport_config.clone();
    let scrape_base = settings
        .target_has_metrics()
        .then_some(transport_config.base_url.as_str());
    let scrape = settings
        .server_metrics
        .settings(scrape_base, &transport_config.connect)?;
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
            if replaying {
                let Some(times) = w.timestamps_ms() else {
                    bail!(
                            "replay_speedup needs a trace dataset (timestamp, input_length, output_length); {} is not one",
                            d.path.display()
                        );
                };
                if d.sampling != kneepoint_workload::Sampling::Sequential {
                    bail!("a trace replay sends records in their recorded order: use sequential sampling");
                }
                replay = Some(times);
            }
            Box::new(w)
        }
        None if replaying => bail!("replay_speedup needs --dataset with a trace"),
        None => {
            let mut config = SyntheticConfig::new(settings.isl, settings.osl, settings.levels.seed);
            if let Some(m) = &settings.mixture {
                config.lengths = m.clone();
            }
            config.prefix = settings.prefix;
            config.conversations = settings.conversations;
            config.images = settings.images;
            config.pooling = settings.pooling;
            config.ignore_eos = settings.output_control;
            config.min_tokens = settings.output_control;
            Box::new(SyntheticWorkload::from_config(tokenizer, config)?)
        }
    };
    let mut bench = Bench::builder(transport)
        .boxed_workload(workload)
        .token_counter(counter)
        .settings(resolved.levels.clone())
        .description(resolved.describe())
        .observer(observer)
        .artifacts(&resolved.artifact_dir)
        .overwrite(resolved.overwrite)
        .server_metrics(scrape);
    if let Some(times) = replay {
        bench = bench.trace(times);
    }
    if let Some(server) = server {
        bench = bench.keep_alive(server);
    }
    Ok(bench)
}
