//! `kneepoint report DIR`: the engine's re-render of a saved artifact folder.

use std::path::Path;

/// What `kneepoint report` did.
pub type ReportOutcome = kneepoint_engine::Rerendered;

/// Re-renders the run in `dir`: level summaries, the run's summary document, plots and
/// `report.html`; `recompute` rebuilds levels whose records file was cut short (marked
/// partial) instead of refusing them.
pub fn run_report(dir: &Path, recompute: bool) -> anyhow::Result<ReportOutcome> {
    let options = if recompute {
        kneepoint_engine::RerenderOptions::recompute_short()
    } else {
        kneepoint_engine::RerenderOptions::default()
    };
    Ok(kneepoint_engine::rerender_with(dir, options)?)
}
