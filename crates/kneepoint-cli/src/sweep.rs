//! `kneepoint sweep`: the resolved settings handed to the engine's [`Sweep`].

use kneepoint_engine::Sweep;
use kneepoint_runner::CancelToken;

use crate::config::SweepSettings;

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
    let bench = crate::target::prepare(&settings.common, progress).await?;
    let sweep = Sweep::on(bench)
        .plan(settings.plan.clone())
        .slas(settings.slas.clone())
        .peak(settings.peak)
        .headroom(settings.headroom)
        .build()?;
    Ok(sweep.run(cancel).await?)
}
