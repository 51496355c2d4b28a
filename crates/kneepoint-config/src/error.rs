//! The crate's one error type, and the two helpers that keep resolution code short: `bail!`
//! (an invalid setting) and [`Context`] (what was being done when a lower layer failed).

use std::fmt::Display;

/// Why flags, a config file or a target could not be turned into a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting is invalid or settings do not fit together; the message says how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// A lower layer failed while doing what `context` says.
    #[error("{context}")]
    Context {
        /// What was being done.
        context: String,
        /// The failure.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The engine refused the run.
    #[error(transparent)]
    Engine(#[from] kneepoint_engine::Error),
    /// The planner refused a plan or SLA.
    #[error(transparent)]
    Planner(#[from] kneepoint_planner::Error),
    /// The transport's configuration is invalid.
    #[error(transparent)]
    Transport(#[from] kneepoint_transport::Error),
    /// The simulator's profile is invalid or it could not start.
    #[error(transparent)]
    Sim(#[from] kneepoint_sim::Error),
    /// The workload's settings are invalid.
    #[error(transparent)]
    Workload(#[from] kneepoint_workload::Error),
    /// The runner refused a setting (an arrival process, say).
    #[error(transparent)]
    Runner(#[from] kneepoint_runner::Error),
    /// A model config, instance catalog or sizing setting is invalid.
    #[error(transparent)]
    Fit(#[from] kneepoint_fit::Error),
    /// A metrics setting (a convergence rule) is invalid.
    #[error(transparent)]
    Metrics(#[from] kneepoint_metrics::Error),
    /// A candidate could not be launched, or its launch settings are invalid.
    #[error(transparent)]
    Deploy(#[from] kneepoint_deploy::Error),
}

/// Returns an [`Error::Invalid`] built like `format!`.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::Error::Invalid(format!($($arg)*)))
    };
}
pub(crate) use bail;

/// Adds what was being done to a lower layer's error.
pub(crate) trait Context<T> {
    /// Wraps the error with `context`.
    fn context(self, context: impl Display) -> Result<T, Error>;
    /// Wraps the error with the context `f` makes (only on failure).
    fn with_context<S: Display>(self, f: impl FnOnce() -> S) -> Result<T, Error>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for Result<T, E> {
    fn context(self, context: impl Display) -> Result<T, Error> {
        self.map_err(|e| Error::Context {
            context: context.to_string(),
            source: Box::new(e),
        })
    }

    fn with_context<S: Display>(self, f: impl FnOnce() -> S) -> Result<T, Error> {
        self.map_err(|e| Error::Context {
            context: f().to_string(),
            source: Box::new(e),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, context: impl Display) -> Result<T, Error> {
        self.ok_or_else(|| Error::Invalid(context.to_string()))
    }

    fn with_context<S: Display>(self, f: impl FnOnce() -> S) -> Result<T, Error> {
        self.ok_or_else(|| Error::Invalid(f().to_string()))
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
