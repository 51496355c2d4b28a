//! The plots and `report.html` of a run that just finished.

use std::path::Path;

use kneepoint_metrics::LevelSummary;

use crate::Observer;

/// Writes the plots and `report.html` of a run that just finished; a failure is a warning (the
/// measurements are already saved).
pub(crate) fn render_quietly(dir: &Path, observer: &dyn Observer) {
    render_known_quietly(dir, &[], observer);
}

/// [`render_quietly`] for a sweep that hands over the summaries it made of its levels (by
/// folder name), which the page then takes instead of computing them again
/// (`kneepoint_report::Artifact::load_known`).
#[cfg(feature = "report")]
pub(crate) fn render_known_quietly(
    dir: &Path,
    known: &[(&str, &LevelSummary)],
    observer: &dyn Observer,
) {
    let written = kneepoint_report::Artifact::load_known(dir, known)
        .and_then(|a| kneepoint_report::write_report(&a));
    if let Err(e) = written {
        observer.warning(&format!(
            "the report of {} was not written: {e}",
            dir.display()
        ));
    }
}

/// Without the `report` feature a run draws no plots and no page.
#[cfg(not(feature = "report"))]
pub(crate) fn render_known_quietly(
    _dir: &Path,
    _known: &[(&str, &LevelSummary)],
    _observer: &dyn Observer,
) {
}
