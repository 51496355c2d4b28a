//! The workload crate's error type.

/// A workload could not be configured or produce requests.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A length distribution parameter is out of range.
    #[error("invalid {what} distribution: {reason}")]
    InvalidDistribution {
        /// `input length` or `output length`.
        what: &'static str,
        /// Why.
        reason: String,
    },
}
