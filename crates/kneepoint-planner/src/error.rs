//! The planner's error type.

/// Invalid plans or observations.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A plan needs at least one level.
    #[error("a sweep needs at least one concurrency level")]
    EmptyPlan,
    /// Concurrency must be at least 1.
    #[error("concurrency must be at least 1 (level {index})")]
    ZeroConcurrency {
        /// Position of the offending level.
        index: usize,
    },
    /// A concurrency beyond what one client can hold (see [`crate::MAX_CONCURRENCY`]).
    #[error("concurrency {concurrency} is above the maximum of {max}: one client cannot hold that many requests (each level sends at least one request per slot, prepared in memory)")]
    ConcurrencyTooHigh {
        /// The level's concurrency.
        concurrency: u32,
        /// The maximum.
        max: u32,
    },
    /// A level needs at least one request.
    #[error("request_count must be at least 1 (concurrency {concurrency})")]
    ZeroRequests {
        /// The level's concurrency.
        concurrency: u32,
    },
    /// The same concurrency appears twice.
    #[error("concurrency {concurrency} appears more than once")]
    DuplicateLevel {
        /// The repeated concurrency.
        concurrency: u32,
    },
    /// An observation has a value that is not a finite, non-negative number.
    #[error("level {concurrency}: {field} must be a finite number ≥ 0")]
    InvalidPoint {
        /// The level's concurrency.
        concurrency: u32,
        /// The offending field.
        field: &'static str,
    },
    /// An SLA is malformed.
    #[error("invalid SLA {sla:?}: {reason}")]
    InvalidSla {
        /// The SLA as written.
        sla: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A length sweep's lengths cannot be paired or run.
    #[error("invalid length sweep: {reason}")]
    InvalidLengths {
        /// What is wrong.
        reason: String,
    },
    /// A search parameter is out of range or inconsistent.
    #[error("invalid search parameter {field}: {reason}")]
    InvalidSearch {
        /// The parameter (SageMaker's name where there is one).
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// `observe` was called for a level the planner did not ask for.
    #[error("observed concurrency {got}, but the pending probe is {expected:?}")]
    UnexpectedObservation {
        /// The concurrency observed.
        got: u32,
        /// The pending probe's concurrency, if any.
        expected: Option<u32>,
    },
}
