//! The report crate's error type.

use std::path::PathBuf;

/// Reading an artifact folder, drawing or writing failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("cannot {action} {path}")]
    Io {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A saved JSON file is malformed.
    #[error("{path} is not valid JSON")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The folder holds none of the files a run writes.
    #[error("{path} is not a kneepoint artifact folder (no sweep_summary.json, search_history.json or recommendations.json)")]
    NotAnArtifact {
        /// The folder.
        path: PathBuf,
    },
    /// A saved file lacks something the report needs.
    #[error("{path}: {reason}")]
    Missing {
        /// The file.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// Re-reading or re-writing a level's exports failed.
    #[error(transparent)]
    Metrics(#[from] kneepoint_metrics::Error),
    /// A plot could not be drawn.
    #[error("cannot draw the {plot} plot: {message}")]
    Plot {
        /// Which plot.
        plot: &'static str,
        /// The drawing library's message.
        message: String,
    },
    /// The runs measured different things (workload, target, model, time scale).
    #[error("the runs did not measure the same thing, so a difference would not be a regression: {}; compare them anyway with --force", .differences.join("; "))]
    NotComparable {
        /// What differs, one line each.
        differences: Vec<String>,
    },
    /// Two runs cannot be compared.
    #[error("cannot compare: {reason}")]
    Compare {
        /// Why.
        reason: String,
    },
}

impl Error {
    pub(crate) fn read(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io {
            action: "read",
            path: path.to_owned(),
            source,
        }
    }

    #[cfg_attr(not(feature = "render"), allow(dead_code))]
    pub(crate) fn write(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io {
            action: "write",
            path: path.to_owned(),
            source,
        }
    }
}
