//! `kneepoint report DIR`: the engine's re-render of a saved artifact folder.

use std::path::Path;

/// What `kneepoint report` did.
pub type ReportOutcome = kneepoint_engine::Rerendered;

/// Re-renders the run in `dir`: level summaries, the run's summary document, plots and
/// `report.html`.
pub fn run_report(dir: &Path) -> anyhow::Result<ReportOutcome> {
    Ok(kneepoint_engine::rerender(dir)?)
}
