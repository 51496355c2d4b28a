//! The store's errors.

use std::path::PathBuf;

/// Why the store could not be opened, written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The location is not a path, `sqlite://PATH` or `postgres://...`.
    #[error("store location {location:?}: {reason}")]
    Location {
        /// The location as given (credentials removed).
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The SQLite database could not be opened or used.
    #[error("SQLite store {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The driver's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The PostgreSQL database could not be reached or used.
    #[error("PostgreSQL store {location}: {source}")]
    Postgres {
        /// The server (credentials removed).
        location: String,
        /// The driver's error.
        #[source]
        source: postgres::Error,
    },
    /// The database holds a newer schema than this kneepoint knows.
    #[error("the store's schema is version {found}, newer than this kneepoint's {known}: upgrade kneepoint to write to it")]
    NewerSchema {
        /// The version in the database.
        found: i64,
        /// The newest version this build applies.
        known: i64,
    },
    /// A folder could not be read as a run.
    #[error("{path}: {source}")]
    Artifact {
        /// The folder.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: kneepoint_report::Error,
    },
    /// A stored value could not be read back.
    #[error("stored run {id}: {reason}")]
    Corrupt {
        /// The run.
        id: String,
        /// What could not be read.
        reason: String,
    },
    /// Two runs measured different things (or share no level): checking one against the
    /// other would call a lighter workload an improvement.
    #[error("the runs are not comparable: {}", reasons.join("; "))]
    NotComparable {
        /// What differs, one line each.
        reasons: Vec<String>,
    },
    /// The folder for the SQLite file could not be made.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
