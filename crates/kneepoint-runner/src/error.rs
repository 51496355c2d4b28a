//! The runner's error type.

/// A level could not be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Concurrency must be at least 1.
    #[error("concurrency must be at least 1")]
    ZeroConcurrency,
    /// A level needs at least one request.
    #[error("a level needs at least one request")]
    NoRequests,
    /// An open-loop schedule cannot be built.
    #[error("invalid arrival schedule: {reason}")]
    InvalidArrival {
        /// What is wrong.
        reason: String,
    },
    /// A worker task failed unexpectedly.
    #[error("a load worker stopped unexpectedly: {message}")]
    Worker {
        /// What the runtime said.
        message: String,
    },
}
