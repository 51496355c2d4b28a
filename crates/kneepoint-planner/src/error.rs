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
}
