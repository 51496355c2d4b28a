//! `kneepoint sweep`: levels run one after another, each with its own artifact folder, then the
//! knee and a summary over all levels.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use kneepoint_core::{RecordSink, Transport};
use kneepoint_metrics::export::{
    write_aiperf_csv, write_aiperf_json, write_atomic, write_inputs_json, write_summary_text,
    InputEntry, JsonlSink, LevelInfo,
};
use kneepoint_metrics::{GoodputSlo, LevelSummary};
use kneepoint_planner::{find_knee, KneeEstimate, KneeRule, LevelPoint};
use kneepoint_runner::{run_level, LevelConfig, RecordObserver};
use kneepoint_sim::SimServer;
use kneepoint_transport::OpenAiTransport;
use kneepoint_workload::{SyntheticWorkload, Workload};
use serde_json::json;

use crate::config::{LevelRow, SweepSettings, Target};

/// What a sweep produced.
#[derive(Debug)]
pub struct SweepOutcome {
    /// One row per level, in run order.
    pub rows: Vec<LevelRow>,
    /// Full summaries, in run order.
    pub summaries: Vec<LevelSummary>,
    /// The knee over all levels.
    pub knee: KneeEstimate,
    /// Where the files are.
    pub artifact_dir: PathBuf,
    /// Requests sent per level (measured), to check against records.
    pub sent: Vec<usize>,
}

fn row(s: &LevelSummary, dir: String) -> LevelRow {
    let st = |m: &str, q: &str| s.stat(m, q);
    LevelRow {
        concurrency: s.concurrency,
        request_count: s.request_count,
        error_count: s.error_count,
        error_rate: s.error_rate,
        benchmark_duration_s: s.benchmark_duration_s,
        request_throughput: s.request_throughput,
        output_token_throughput: s.output_token_throughput,
        ttft_p50_ms: st("time_to_first_token", "p50"),
        ttft_p95_ms: st("time_to_first_token", "p95"),
        itl_p95_ms: st("inter_token_latency", "p95"),
        e2e_p50_ms: st("request_latency", "p50"),
        e2e_p90_ms: st("request_latency", "p90"),
        e2e_p99_ms: st("request_latency", "p99"),
        e2e_spread_ms: st("request_latency", "p99")
            .zip(st("request_latency", "p50"))
            .map(|(a, b)| a - b),
        is_knee: false,
        dir,
    }
}

fn knee_of(rows: &[LevelRow]) -> anyhow::Result<KneeEstimate> {
    let points: Vec<LevelPoint> = rows
        .iter()
        .map(|r| {
            LevelPoint::new(
                r.concurrency,
                r.output_token_throughput,
                r.e2e_p99_ms.unwrap_or(0.0),
            )
        })
        .collect();
    Ok(find_knee(&points, &KneeRule::default())?)
}

fn write_sweep_summary(
    dir: &Path,
    settings: &SweepSettings,
    rows: &[LevelRow],
    knee: &KneeEstimate,
    complete: bool,
) -> anyhow::Result<()> {
    let doc = json!({
        "kneepoint_version": env!("CARGO_PKG_VERSION"),
        "complete": complete,
        "settings": settings.describe(),
        "levels": rows,
        "knee": knee,
    });
    write_atomic(
        &dir.join("sweep_summary.json"),
        &serde_json::to_vec_pretty(&doc)?,
    )?;
    Ok(())
}

fn progress_bar(show: bool, concurrency: u32, total: u64) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{prefix:>18} [{bar:32}] {pos}/{len} requests  {elapsed_precise} (eta {eta})",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(format!("concurrency {concurrency}"));
    bar
}

/// Asks the server which model it serves; also fails fast when the endpoint is unreachable.
async fn detect_model(config: &kneepoint_transport::OpenAiConfig) -> anyhow::Result<String> {
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

/// Runs the sweep described by `settings` and writes every artifact. `progress` shows a bar per
/// level on stderr.
pub async fn run_sweep(settings: &SweepSettings, progress: bool) -> anyhow::Result<SweepOutcome> {
    let dir = settings.artifact_dir.clone();
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating artifact directory {}", dir.display()))?;
    let mut transport_config = settings.transport.clone();
    let _server = match &settings.target {
        Target::Simulator(profile) => {
            let server = SimServer::start_local(profile.clone())
                .await
                .context("starting the built-in simulator")?;
            transport_config.base_url = server.base_url();
            if progress {
                eprintln!(
                    "built-in simulator ({} profile, {}x real time) on {}",
                    profile.name,
                    1.0 / profile.time_scale,
                    server.base_url()
                );
            }
            Some(server)
        }
        Target::OpenAi(_) => None,
    };
    if transport_config.model.is_empty() {
        transport_config.model = detect_model(&transport_config).await?;
        if progress {
            eprintln!("model: {} (from GET /v1/models)", transport_config.model);
        }
    }
    let transport: Arc<dyn Transport> = Arc::new(OpenAiTransport::new(transport_config)?);
    let mut workload = SyntheticWorkload::new(settings.isl, settings.osl, settings.seed)
        .with_output_control(settings.output_control, settings.output_control);
    let description = settings.describe();

    let mut rows = Vec::new();
    let mut summaries = Vec::new();
    let mut sent = Vec::new();
    for level in settings.plan.levels() {
        let c = level.concurrency;
        let level_dir_name = format!("concurrency_{c}");
        let level_dir = dir.join(&level_dir_name);
        std::fs::create_dir_all(&level_dir)
            .with_context(|| format!("creating {}", level_dir.display()))?;
        let warmup = workload.requests(settings.warmup_requests as usize)?;
        let requests = workload.requests(level.request_count as usize)?;
        let inputs: Vec<InputEntry> = requests
            .iter()
            .map(|r| InputEntry {
                session_id: r.id.to_string(),
                payloads: transport.payload(r).into_iter().collect(),
            })
            .collect();
        write_inputs_json(&level_dir.join("inputs.json"), &inputs)?;
        let sink: Box<dyn RecordSink> =
            Box::new(JsonlSink::create(&level_dir.join("profile_export.jsonl"))?);
        let bar = progress_bar(progress, c, requests.len() as u64);
        let observer: RecordObserver = {
            let bar = bar.clone();
            Arc::new(move |_| bar.inc(1))
        };
        let mut config = LevelConfig::new(c);
        config.request_timeout = settings.request_timeout;
        sent.push(requests.len());
        let run = run_level(
            transport.clone(),
            &config,
            requests,
            warmup,
            vec![sink],
            Some(observer),
        )
        .await?;
        bar.finish();
        for e in &run.sink_errors {
            eprintln!("warning: {e}");
        }
        let summary = LevelSummary::from_records(c, &run.records, &GoodputSlo::default());
        let mut input_config = description.clone();
        input_config["level"] = json!({"concurrency": c, "request_count": level.request_count});
        let info = LevelInfo {
            start_unix_ns: run.start_unix_ns,
            end_unix_ns: run.end_unix_ns,
            input_config,
            partial: false,
        };
        write_aiperf_json(
            &level_dir.join("profile_export_aiperf.json"),
            &summary,
            &info,
        )?;
        write_aiperf_csv(&level_dir.join("profile_export_aiperf.csv"), &summary)?;
        write_summary_text(&level_dir.join("benchmark_summary.txt"), &summary, &info)?;
        rows.push(row(&summary, level_dir_name));
        summaries.push(summary);
        let knee = knee_of(&rows)?;
        write_sweep_summary(&dir, settings, &rows, &knee, false)?;
    }
    let knee = knee_of(&rows)?;
    for r in &mut rows {
        r.is_knee = knee.knee == Some(r.concurrency);
    }
    write_sweep_summary(&dir, settings, &rows, &knee, true)?;
    Ok(SweepOutcome {
        rows,
        summaries,
        knee,
        artifact_dir: dir,
        sent,
    })
}
