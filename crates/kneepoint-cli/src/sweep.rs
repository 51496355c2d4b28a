//! `kneepoint sweep` and `kneepoint recommend`: the resolved settings' runs, with progress
//! drawn on stderr.

use std::sync::Arc;

use kneepoint_config::{RecommendArgs, SweepSettings};
use kneepoint_runner::CancelToken;

use crate::progress::Progress;

/// What a sweep produced (the engine's report).
pub type SweepOutcome = kneepoint_engine::SweepReport;

/// Runs the sweep described by `settings` and writes every artifact. `progress` shows a bar per
/// level on stderr.
pub async fn run_sweep(settings: &SweepSettings, progress: bool) -> anyhow::Result<SweepOutcome> {
    run_sweep_with(settings, progress, &CancelToken::new()).await
}

/// [`run_sweep`] that stops when `cancel` fires: the current level's in-flight requests are
/// recorded as cancelled, its files are written and marked partial, and no further level runs.
pub async fn run_sweep_with(
    settings: &SweepSettings,
    progress: bool,
    cancel: &CancelToken,
) -> anyhow::Result<SweepOutcome> {
    let sweep = settings.prepare(Arc::new(Progress::new(progress))).await?;
    Ok(sweep.run(cancel).await?)
}

/// What `recommend` produced (the engine's report).
pub type RecommendOutcome = kneepoint_engine::RecommendReport;

/// Runs `kneepoint recommend`: measures every candidate in turn, ranks them, and writes
/// `recommendations.json`, plots and `report.html`. Stops early (keeping what was measured) when
/// `cancel` fires.
pub async fn run_recommend_with(
    args: &RecommendArgs,
    progress: bool,
    cancel: &CancelToken,
) -> anyhow::Result<RecommendOutcome> {
    let r = kneepoint_config::recommendation(args, Arc::new(Progress::new(progress)))?;
    Ok(r.run(cancel).await?)
}
