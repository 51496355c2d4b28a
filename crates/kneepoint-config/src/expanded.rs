//! One candidate of the config file after its matrix is expanded, and the checks its launch
//! settings share.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::bail;
use crate::file::CandidateSection;
use crate::Result;

/// One candidate of the file after its matrix is expanded: the section (named for its
/// combination) and the values of its command's placeholders.
#[derive(Debug, Clone)]
pub(crate) struct Expanded {
    pub section: CandidateSection,
    pub values: BTreeMap<String, String>,
    /// The matrix combination alone (matrix keys and what stage 2 proposed), in key order:
    /// what the adaptive strategy searches over.
    pub combination: Vec<(String, String)>,
}

/// `v` seconds of candidate `name`'s setting `key`: above 0, at most `max_s`.
pub(crate) fn seconds(name: &str, key: &str, v: f64, max_s: f64) -> Result<Duration> {
    if !(v.is_finite() && v > 0.0 && v <= max_s) {
        bail!("candidate {name:?}: {key} must be above 0 and at most {max_s} seconds, not {v}");
    }
    Ok(Duration::from_secs_f64(v))
}
