//! The crate's error.

use std::path::PathBuf;

/// What can go wrong setting up scraping or writing its files (a failing endpoint is not an
/// error: it is a warning, and the run goes on).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A metrics URL that cannot be scraped.
    #[error("invalid metrics URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why.
        reason: String,
    },
    /// Settings that do not fit.
    #[error("server metrics: {reason}")]
    Invalid {
        /// Why.
        reason: String,
    },
    /// An export could not be encoded.
    #[error("encoding the server metrics export")]
    Json {
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// An export could not be written.
    #[error("writing {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<kneepoint_metrics::Error>,
    },
}
