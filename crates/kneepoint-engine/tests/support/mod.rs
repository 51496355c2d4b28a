//! What the workload tests share: a simulator and its transport, a sweep of synthetic requests
//! into a folder, and the level files read back.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use kneepoint_engine::BenchOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kneepoint_core::Transport;
use kneepoint_engine::{CancelToken, LevelSettings, Sweep, SweepReport};
use kneepoint_planner::{SweepLevel, SweepPlan};
use kneepoint_sim::{SimProfile, SimServer};
use kneepoint_transport::{Api, OpenAiConfig, OpenAiTransport};
use kneepoint_workload::{SyntheticConfig, SyntheticWorkload};
use serde_json::Value;

/// A simulator on loopback and a transport speaking `api` to it.
pub async fn simulator(
    profile: SimProfile,
    api: Api,
) -> anyhow::Result<(SimServer, Arc<dyn Transport>)> {
    let model = profile.model.clone();
    let server = SimServer::start_local(profile).await?;
    let mut c = OpenAiConfig::new(server.base_url(), model);
    c.api = api;
    let transport: Arc<dyn Transport> = Arc::new(OpenAiTransport::new(c)?);
    Ok((server, transport))
}

/// Sweeps `levels` ((concurrency, request count) pairs) of `config`'s synthetic requests
/// (built-in tokenizer) through `transport` into `dir`.
pub async fn sweep(
    transport: Arc<dyn Transport>,
    config: SyntheticConfig,
    settings: LevelSettings,
    levels: &[(u32, u32)],
    dir: &Path,
) -> anyhow::Result<SweepReport> {
    let workload =
        SyntheticWorkload::from_config(kneepoint_workload::load_tokenizer("builtin")?, config)?;
    let plan = SweepPlan::new(
        levels
            .iter()
            .map(|&(concurrency, request_count)| SweepLevel {
                concurrency,
                request_count,
            })
            .collect(),
    )?;
    Ok(Sweep::builder(transport)
        .workload(workload)
        .settings(settings)
        .plan(plan)
        .artifacts(dir)
        .build()?
        .run(&CancelToken::new())
        .await?)
}

/// [`sweep`] of one level; its folder.
pub async fn one_level(
    transport: Arc<dyn Transport>,
    config: SyntheticConfig,
    settings: LevelSettings,
    (concurrency, request_count): (u32, u32),
    dir: &Path,
) -> anyhow::Result<PathBuf> {
    let report = sweep(
        transport,
        config,
        settings,
        &[(concurrency, request_count)],
        dir,
    )
    .await?;
    Ok(dir.join(&report.rows[0].dir))
}

/// A JSON file of a level.
pub fn json(level: &Path, name: &str) -> anyhow::Result<Value> {
    Ok(serde_json::from_slice(&std::fs::read(level.join(name))?)?)
}

/// A level's `profile_export.jsonl`, in request id order.
pub fn records(level: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(level.join("profile_export.jsonl"))?;
    let mut out = text
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<Vec<Value>, _>>()?;
    out.sort_by_key(|r| r["metadata"]["session_num"].as_u64());
    Ok(out)
}
