//! Whether a level was steady over its time slices: the verdict [`crate::time_slices`] gives
//! and a level's summary keeps.

use serde::{Deserialize, Serialize};

/// One statistic compared between the first and last complete slices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SliceChange {
    /// The statistic compared (a metric's `avg`, written `metric:avg`).
    pub statistic: kneepoint_core::StatKey,
    /// In the first complete slice.
    pub first: f64,
    /// In the last complete slice.
    pub last: f64,
    /// `last / first − 1`.
    pub relative_change: f64,
    /// The change over its standard error (`ln(last / first)` over the slices' combined
    /// relative standard errors).
    pub z: f64,
}

/// Whether a level was steady over its slices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Steadiness {
    /// `Some(false)`: not steady; `None`: too little to judge.
    pub steady: Option<bool>,
    /// One line on why.
    pub reason: String,
    /// The slices compared (first and last complete), when judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compared: Option<[usize; 2]>,
    /// Each compared statistic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<SliceChange>,
}

impl Steadiness {
    /// The reason when the level is not steady.
    pub fn not_steady(&self) -> Option<&str> {
        (self.steady == Some(false)).then_some(self.reason.as_str())
    }
}
