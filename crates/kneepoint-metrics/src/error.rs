//! The metrics crate's error type.

use std::path::PathBuf;

/// An export could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Creating or writing a file failed.
    #[error("cannot write {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Reading a file failed.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A saved file does not hold what it should.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number (0 for a whole-file problem).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A goodput SLO (`--goodput`) is not `metric:limit` with a metric one can hold a request
    /// to.
    #[error("goodput SLO {spec:?}: {reason}")]
    InvalidSlo {
        /// The part given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// Encoding JSON failed.
    #[error("cannot encode {what} as JSON")]
    Json {
        /// What was being encoded.
        what: &'static str,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io {
            path: path.to_owned(),
            source,
        }
    }
}
