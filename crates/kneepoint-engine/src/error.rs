//! The engine's one error type.

use std::path::PathBuf;

/// Why a sweep, search, recommendation or re-render could not run (a request that fails is a
/// recorded failure, never this).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or folder could not be created, read or written.
    #[error("cannot {action} {}", path.display())]
    Io {
        /// What was being done (`create`, `read`, `write`).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The settings do not describe a run that can be made.
    #[error("invalid settings: {reason}")]
    Invalid {
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The workload could not produce requests.
    #[error("the workload failed")]
    Workload(#[from] kneepoint_workload::Error),
    /// A level could not be driven.
    #[error("the level could not run")]
    Runner(#[from] kneepoint_runner::Error),
    /// The planner refused a plan or an observation.
    #[error(transparent)]
    Planner(#[from] kneepoint_planner::Error),
    /// Writing or reading an export failed.
    #[error(transparent)]
    Metrics(#[from] kneepoint_metrics::Error),
    /// Reading an artifact folder back or drawing its report failed.
    #[error(transparent)]
    Report(#[from] kneepoint_report::Error),
    /// The server-metrics scraper could not be set up (a bad URL or TLS options).
    #[error(transparent)]
    Scrape(#[from] kneepoint_scrape::Error),
    /// A saved document could not be read back.
    #[error("{}: the saved {what} cannot be read", path.display())]
    Saved {
        /// The document.
        path: PathBuf,
        /// Which part.
        what: &'static str,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// A level's files could not be written after its records could not be stored either (a
    /// full disk): the records' failure comes first, as it is the cause.
    #[error("the level in {} could not be saved: storing its records failed first ({records})", dir.display())]
    Unsaved {
        /// The level's folder.
        dir: PathBuf,
        /// Why the records could not be stored (with the OS error).
        records: String,
        /// What failed after.
        #[source]
        source: Box<Error>,
    },
    /// A saved level's records file holds fewer measured records than the run saved: its
    /// saved aggregates are kept unless a re-render is asked to recompute them.
    #[error("{}: the records file holds {read} of the {saved} measured records the run saved (it was cut short): the saved summaries are kept; re-render with recompute (kneepoint report --recompute) to rebuild them from the records left, marked partial", path.display())]
    ShortRecords {
        /// The level's folder.
        path: PathBuf,
        /// Measured records read back.
        read: usize,
        /// Measured records the run saved.
        saved: usize,
    },
    /// A recommendation candidate could not be prepared (its target or settings).
    #[error("candidate {name:?} could not be prepared")]
    Candidate {
        /// The candidate.
        name: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A recommendation candidate's run failed.
    #[error("measuring candidate {name:?}")]
    Measuring {
        /// The candidate.
        name: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        Error::Invalid {
            reason: reason.into(),
        }
    }

    pub(crate) fn io(action: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.to_owned(),
            source,
        }
    }
}
