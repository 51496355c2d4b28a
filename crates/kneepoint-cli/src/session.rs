//! What every load-sending command shares: the target (starting the built-in simulator when
//! there is no URL), the transport, the workload, and running one level with all its files.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use kneepoint_core::{RecordSink, TokenCounter, Transport};
use kneepoint_metrics::export::{
    write_aiperf_csv, write_aiperf_json, write_inputs_json, write_summary_text, InputEntry,
    JsonlSink, LevelInfo,
};
use kneepoint_metrics::{GoodputSlo, LevelSummary};
use kneepoint_planner::Measurement;
use kneepoint_runner::{
    run_level, schedule, CancelToken, EarlyStop, LevelConfig, OpenLoop, RecordObserver,
};
use kneepoint_sim::SimServer;
use kneepoint_transport::sagemaker::{AwsCredentialChain, SageMakerTransport, StaticCredentials};
use kneepoint_transport::{OpenAiConfig, OpenAiTransport};
use kneepoint_workload::{
    load_tokenizer, DatasetWorkload, SyntheticConfig, SyntheticWorkload, TokenizerCounter, Workload,
};
use serde_json::{json, Value};

use crate::config::{CommonSettings, SageMakerSettings, Target};

/// A connected target and a workload, ready to run levels.
pub(crate) struct Session {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) workload: Arc<std::sync::Mutex<Box<dyn Workload>>>,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) settings: CommonSettings,
    description: Value,
    pub(crate) progress: bool,
    /// Open loop: the rate of the levels run next (requests/s).
    rate: Option<f64>,
    /// Levels run so far (varies the arrival schedule's seed).
    levels_run: u64,
    /// Trace replay: the trace's send times (ms) in record order, and the next record.
    replay: Option<(Vec<u64>, usize)>,
    // Keeps the built-in simulator alive for the session.
    _server: Option<SimServer>,
}

/// Asks the server which model it serves; also fails fast when the endpoint is unreachable.
async fn detect_model(config: &OpenAiConfig) -> anyhow::Result<String> {
    let probe = OpenAiTransport::new(config.clone())?;
    let models = tokio::time::timeout(std::time::Duration::from_secs(30), probe.models())
        .await
        .map_err(|_| anyhow::anyhow!("GET /v1/models did not answer within 30 s"))?
        .with_context(|| {
            format!(
                "no --model given, and asking {} for its models failed",
                config.base_url
            )
        })?;
    models
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("the server lists no models; pass --model"))
}

/// Fails fast when the endpoint cannot be reached at all, instead of running a sweep of
/// connection failures. Any HTTP answer (even 404: not every server lists models) is enough.
async fn ready(config: &OpenAiConfig) -> anyhow::Result<()> {
    let probe = OpenAiTransport::new(config.clone())?;
    match tokio::time::timeout(std::time::Duration::from_secs(15), probe.models()).await {
        Err(_) => anyhow::bail!("{} did not answer within 15 s", config.base_url),
        Ok(Err(e)) if e.kind() == kneepoint_core::ErrorKind::Connect => {
            Err(anyhow::Error::new(e).context(format!("cannot reach {}", config.base_url)))
        }
        Ok(_) => Ok(()),
    }
}

/// Fails fast when a SageMaker runtime URL cannot be reached at all (there is no cheap,
/// unbilled request to send, so this checks that a TCP connection opens).
async fn ready_tcp(base_url: &str) -> anyhow::Result<()> {
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
        Err(_) => anyhow::bail!("{base_url} did not accept a connection within 15 s"),
        Ok(Err(e)) => Err(anyhow::Error::new(e).context(format!("cannot reach {base_url}"))),
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
) -> anyhow::Result<(Arc<dyn Transport>, SimServer, String)> {
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

/// A progress bar and the observer that advances it once per record.
pub(crate) fn progress(show: bool, label: &str, total: u64) -> (ProgressBar, RecordObserver) {
    let bar = progress_bar(show, label, total);
    let observer: RecordObserver = {
        let bar = bar.clone();
        Arc::new(move |_| bar.inc(1))
    };
    (bar, observer)
}

fn progress_bar(show: bool, label: &str, total: u64) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    // A timed level has no known total: count requests and show the time.
    let template = if total == 0 {
        "{prefix:>22} {pos} requests  {elapsed_precise}"
    } else {
        "{prefix:>22} [{bar:32}] {pos}/{len} requests  {elapsed_precise} (eta {eta})"
    };
    let style = ProgressStyle::with_template(template)
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(label.to_owned());
    bar
}

impl Session {
    /// Creates the artifact directory, starts the simulator if needed, and builds the transport.
    pub(crate) async fn start(settings: &CommonSettings, progress: bool) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&settings.artifact_dir).with_context(|| {
            format!(
                "creating artifact directory {}",
                settings.artifact_dir.display()
            )
        })?;
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
                    start_simulator(profile, sm.as_ref(), &transport_config, counter.clone())
                        .await?;
                if progress {
                    eprintln!(
                        "built-in simulator ({} profile, {}x real time, {} protocol) on {}",
                        profile.name,
                        1.0 / profile.time_scale,
                        if sm.is_some() { "SageMaker" } else { "OpenAI" },
                        base_url
                    );
                }
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
            (Target::SageMaker, None) => anyhow::bail!("no SageMaker endpoint configured"),
            (Target::OpenAi(_), _) => {
                if transport_config.model.is_empty() {
                    transport_config.model = detect_model(&transport_config).await?;
                    if progress {
                        eprintln!("model: {} (from GET /v1/models)", transport_config.model);
                    }
                } else {
                    ready(&transport_config).await?;
                }
                let t = OpenAiTransport::new(transport_config.clone())?;
                (Arc::new(t), None)
            }
        };
        resolved.transport = transport_config.clone();
        let replaying = settings
            .open_loop
            .as_ref()
            .is_some_and(|o| o.replay_speedup.is_some());
        if replaying && settings.duration.is_some() {
            anyhow::bail!("a trace replay runs for the trace's own length: drop duration_s");
        }
        let mut replay = None;
        let workload: Box<dyn Workload> = match &settings.dataset {
            Some(d) => {
                let w = DatasetWorkload::load(tokenizer, d.clone())
                    .with_context(|| format!("loading dataset {}", d.path.display()))?;
                if replaying {
                    let Some(times) = w.timestamps_ms() else {
                        anyhow::bail!(
                            "replay_speedup needs a trace dataset (timestamp, input_length, output_length); {} is not one",
                            d.path.display()
                        );
                    };
                    if d.sampling != kneepoint_workload::Sampling::Sequential {
                        anyhow::bail!("a trace replay sends records in their recorded order: use sequential sampling");
                    }
                    replay = Some((times, 0));
                }
                Box::new(w)
            }
            None if replaying => anyhow::bail!("replay_speedup needs --dataset with a trace"),
            None => {
                let mut config = SyntheticConfig::new(settings.isl, settings.osl, settings.seed);
                if let Some(m) = &settings.mixture {
                    config.lengths = m.clone();
                }
                config.prefix = settings.prefix;
                config.ignore_eos = settings.output_control;
                config.min_tokens = settings.output_control;
                Box::new(SyntheticWorkload::from_config(tokenizer, config)?)
            }
        };
        Ok(Session {
            transport,
            workload: Arc::new(std::sync::Mutex::new(workload)),
            counter,
            description: resolved.describe(),
            settings: resolved,
            progress,
            rate: None,
            levels_run: 0,
            replay,
            _server: server,
        })
    }

    /// The resolved settings as recorded in exports.
    pub(crate) fn description(&self) -> &Value {
        &self.description
    }

    /// The resolved settings.
    pub(crate) fn settings(&self) -> &CommonSettings {
        &self.settings
    }

    /// Open loop: run the next levels at `rate` requests/s (`None`: closed loop).
    pub(crate) fn set_rate(&mut self, rate: Option<f64>) {
        self.rate = rate;
    }

    /// Whether progress is shown on stderr.
    pub(crate) fn shows_progress(&self) -> bool {
        self.progress
    }

    /// Runs one level once into `dir` (created), writing every per-level file, and summarises
    /// it; `warmup` sends the warm-up requests first. When `cancel` fires, in-flight requests
    /// are recorded as cancelled and the level's files are written and marked partial; the
    /// returned flag says so.
    pub(crate) async fn run_once(
        &mut self,
        dir: &Path,
        concurrency: u32,
        request_count: u32,
        label: &str,
        warmup: bool,
        cancel: &CancelToken,
    ) -> anyhow::Result<(LevelSummary, bool)> {
        if self.settings.duration.is_some() && self.settings.open_loop.is_none() {
            return self
                .run_timed(dir, concurrency, label, warmup, cancel)
                .await;
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let warmup_count = if warmup {
            self.settings.warmup_requests as usize
        } else {
            0
        };
        let (warmup_count, request_count) = match &self.replay {
            Some((times, next)) => {
                let left = times.len().saturating_sub(*next);
                if left <= warmup_count {
                    anyhow::bail!(
                        "the trace has {} records and {next} were sent: none left to replay",
                        times.len()
                    );
                }
                (
                    warmup_count,
                    (request_count as usize).min(left - warmup_count) as u32,
                )
            }
            None => (warmup_count, request_count),
        };
        let request_count = match (&self.settings.open_loop, self.rate, self.settings.duration) {
            // An open loop for a duration: the requests whose intended start falls inside it.
            (Some(o), Some(rate), Some(d)) => {
                let secs = d.measure.as_secs_f64();
                let n = (rate * secs * 1.25).ceil() as usize + 16;
                let seed =
                    self.settings.seed ^ (self.levels_run + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let within = schedule(o.arrival, rate, n, seed)?
                    .iter()
                    .take_while(|t| **t < d.measure)
                    .count();
                within.max(1) as u32
            }
            _ => request_count,
        };
        let (warmup, requests) = {
            let mut w = self
                .workload
                .lock()
                .map_err(|_| anyhow::anyhow!("the workload generator failed"))?;
            (
                w.requests(warmup_count)?,
                w.requests(request_count as usize)?,
            )
        };
        let inputs: Vec<InputEntry> = requests
            .iter()
            .map(|r| InputEntry {
                session_id: r.id.to_string(),
                payloads: self.transport.payload(r).into_iter().collect(),
            })
            .collect();
        write_inputs_json(&dir.join("inputs.json"), &inputs)?;
        let sink: Box<dyn RecordSink> =
            Box::new(JsonlSink::create(&dir.join("profile_export.jsonl"))?);
        let (bar, observer) = progress(self.progress, label, requests.len() as u64);
        let mut config = self.level_config(concurrency, cancel);
        if let (Some(o), Some((times, next))) = (&self.settings.open_loop, &mut self.replay) {
            let speedup = o.replay_speedup.unwrap_or(1.0);
            let offsets = |ts: &[u64]| -> Vec<std::time::Duration> {
                let t0 = ts.first().copied().unwrap_or(0);
                ts.iter()
                    .map(|t| {
                        std::time::Duration::from_secs_f64(
                            t.saturating_sub(t0) as f64 / 1000.0 / speedup,
                        )
                    })
                    .collect()
            };
            let w = warmup.len();
            let n = requests.len();
            config.open_loop = Some(OpenLoop {
                warmup_offsets: offsets(&times[*next..*next + w]),
                offsets: offsets(&times[*next + w..*next + w + n]),
                max_in_flight: o.max_in_flight,
            });
            *next += w + n;
        } else if let (Some(o), Some(rate)) = (&self.settings.open_loop, self.rate) {
            self.levels_run += 1;
            let seed = self.settings.seed ^ self.levels_run.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            config.open_loop = Some(OpenLoop {
                offsets: schedule(o.arrival, rate, requests.len(), seed)?,
                warmup_offsets: schedule(o.arrival, rate, warmup.len(), !seed)?,
                max_in_flight: o.max_in_flight,
            });
        }
        let run = run_level(
            self.transport.clone(),
            &config,
            requests,
            warmup,
            vec![sink],
            Some(observer),
        )
        .await?;
        bar.finish_and_clear();
        for e in &run.sink_errors {
            eprintln!("warning: {e}");
        }
        if run.unsent > 0 {
            // Stopped early or interrupted: list only the requests that went out (in order).
            let sent = inputs.len().saturating_sub(run.unsent);
            write_inputs_json(&dir.join("inputs.json"), &inputs[..sent])?;
        }
        let level = json!({"concurrency": concurrency, "request_count": request_count});
        self.finish_level(dir, concurrency, level, &run)
    }

    /// The runner's settings for one level, from the session's.
    pub(crate) fn level_config(&self, concurrency: u32, cancel: &CancelToken) -> LevelConfig {
        let mut config = LevelConfig::new(concurrency);
        config.deadlines = self.settings.deadlines;
        config.require_finish_reason = self.settings.require_finish_reason;
        config.retry = self.settings.retry;
        config.cancel = cancel.clone();
        config.token_counter = self.counter.clone();
        config.ramp_up = self.settings.ramp_up;
        // One batch per wave of a closed loop; an open loop has no waves.
        config.early_stop = self.settings.early_stop.map(|e| EarlyStop {
            batch: if concurrency > 0 {
                concurrency as usize
            } else {
                16
            },
            ..e
        });
        config
    }

    /// Summarises a finished run and writes its summary files (the records and inputs are
    /// already written).
    pub(crate) fn finish_level(
        &self,
        dir: &Path,
        concurrency: u32,
        level: Value,
        run: &kneepoint_runner::LevelRun,
    ) -> anyhow::Result<(LevelSummary, bool)> {
        let summary = LevelSummary::from_records(concurrency, &run.records, &GoodputSlo::default());
        let mut input_config = self.description.clone();
        input_config["level"] = level;
        if let Some(why) = &run.early_stop {
            input_config["level"]["stopped_early"] = Value::String(why.clone());
            if self.progress {
                eprintln!("concurrency {concurrency}: {why}");
            }
        }
        let info = LevelInfo {
            start_unix_ns: run.start_unix_ns,
            end_unix_ns: run.end_unix_ns,
            input_config,
            partial: run.cancelled,
        };
        write_aiperf_json(&dir.join("profile_export_aiperf.json"), &summary, &info)?;
        write_aiperf_csv(&dir.join("profile_export_aiperf.csv"), &summary)?;
        write_summary_text(&dir.join("benchmark_summary.txt"), &summary, &info)?;
        Ok((summary, run.cancelled))
    }
}

/// Every statistic of a level, keyed `metric:stat`, for the planner's SLA checks.
pub(crate) fn measurement(s: &LevelSummary) -> Measurement {
    Measurement::from(s)
}
