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
    /// Engines one instance runs (data parallelism): `data_parallel_size` when the
    /// candidate pins it or its launch reads `{data_parallel_size}`; a local launch that does
    /// neither runs one engine; `None` when not known (no GPU count).
    pub replicas: Option<u32>,
}

/// `v` seconds of candidate `name`'s setting `key`: above 0, at most `max_s`.
pub(crate) fn seconds(name: &str, key: &str, v: f64, max_s: f64) -> Result<Duration> {
    if !(v.is_finite() && v > 0.0 && v <= max_s) {
        bail!("candidate {name:?}: {key} must be above 0 and at most {max_s} seconds, not {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

/// A warning naming the servers an earlier run launched and left running, when this one
/// launches any: they would compete with its measurements.
pub(crate) fn warn_leftovers(expanded: &[Expanded], observer: &dyn kneepoint_engine::Observer) {
    if expanded.iter().any(|e| e.section.deploy.is_some()) {
        let left = kneepoint_deploy::find_leftovers();
        if !left.is_empty() {
            observer.warning(&format!(
            "{} server(s) launched by an earlier kneepoint run are still running and may compete with these measurements ({}): `kneepoint cleanup` stops them",
            left.len(),
            left.iter()
                .map(|l| format!("{} (pid {})", l.candidate, l.pgid))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        }
    }
}
