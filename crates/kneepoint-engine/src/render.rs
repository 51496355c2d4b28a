//! The plots and `report.html` of a run that just finished.

use std::path::Path;

#[cfg(feature = "report")]
use kneepoint_report::Artifact;

use crate::Observer;

/// Writes the plots and `report.html` of a run that just finished; a failure is a warning (the
/// measurements are already saved).
#[cfg(feature = "report")]
pub(crate) fn render_quietly(dir: &Path, observer: &dyn Observer) {
    if let Err(e) = Artifact::load(dir).and_then(|a| kneepoint_report::write_report(&a)) {
        observer.warning(&format!(
            "the report of {} was not written: {e}",
            dir.display()
        ));
    }
}

/// [`render_quietly`] for a sweep that hands over the summaries it made of its levels (by
/// folder name), which the page then takes instead of computing them again.
#[cfg(feature = "report")]
pub(crate) fn render_known_quietly(
    dir: &Path,
    known: &[(&str, &kneepoint_metrics::LevelSummary)],
    observer: &dyn Observer,
) {
    if let Err(e) =
        Artifact::load_known(dir, known).and_then(|a| kneepoint_report::write_report(&a))
    {
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
    _known: &[(&str, &kneepoint_metrics::LevelSummary)],
    _observer: &dyn Observer,
) {
}

/// Without the `report` feature a run draws no plots and no page.
#[cfg(not(feature = "report"))]
pub(crate) fn render_quietly(_dir: &Path, _observer: &dyn Observer) {}
