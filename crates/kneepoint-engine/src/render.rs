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

/// Without the `report` feature a run draws no plots and no page.
#[cfg(not(feature = "report"))]
pub(crate) fn render_quietly(_dir: &Path, _observer: &dyn Observer) {}
