//! `kneepoint search`: the resolved settings' search, with progress drawn on stderr.

use std::sync::Arc;

use kneepoint_config::SearchSettings;
use kneepoint_runner::CancelToken;

use crate::progress::Progress;

/// What a search produced (the engine's report).
pub type SearchOutcome = kneepoint_engine::SearchReport;

/// The run stopped because it was interrupted (Ctrl-C or SIGTERM).
#[derive(Debug, Clone, Copy)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Runs the search described by `settings`, writing every artifact.
pub async fn run_search(
    settings: &SearchSettings,
    progress: bool,
) -> anyhow::Result<SearchOutcome> {
    run_search_with(settings, progress, &CancelToken::new()).await
}

/// [`run_search`] that stops when `cancel` fires: the probe in progress is written and marked
/// partial (and not fed to the planner), and the history is marked interrupted.
pub async fn run_search_with(
    settings: &SearchSettings,
    progress: bool,
    cancel: &CancelToken,
) -> anyhow::Result<SearchOutcome> {
    let search = settings.prepare(Arc::new(Progress::new(progress))).await?;
    Ok(search.run(cancel).await?)
}
