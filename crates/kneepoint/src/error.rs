//! The crate's error: what the conveniences of this crate can fail with (each part's own
//! errors come from its module).

/// Why a convenience of this crate failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The workload could not be made (a tokenizer, a length).
    #[error(transparent)]
    Workload(#[from] kneepoint_workload::Error),
    /// The simulator could not start.
    #[cfg(feature = "sim")]
    #[error(transparent)]
    Sim(#[from] kneepoint_sim::Error),
    /// The client could not be made.
    #[cfg(feature = "openai")]
    #[error(transparent)]
    Transport(#[from] kneepoint_transport::Error),
    /// A run could not be built or failed.
    #[error(transparent)]
    Engine(#[from] kneepoint_engine::Error),
}
