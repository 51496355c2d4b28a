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
    /// PostgreSQL did not answer within its deadline (see [`crate::Deadlines`]).
    #[error("PostgreSQL store {location}: no answer {what} within {after:?}")]
    Timeout {
        /// The server (credentials removed).
        location: String,
        /// What was waited for.
        what: String,
        /// How long.
        after: std::time::Duration,
    },
    /// The connection's thread ended (the driver failed).
    #[error("PostgreSQL store {location}: the connection closed")]
    Closed {
        /// The server (credentials removed).
        location: String,
    },
    /// The store failed a moment ago: not tried again yet (a server that hangs costs each
    /// attempt a deadline, so attempts are spaced).
    #[error("results store {location}: unavailable a moment ago; tried again after {retry_s} s")]
    Unavailable {
        /// The store (credentials removed).
        location: String,
        /// Seconds between attempts.
        retry_s: u64,
    },
    /// The store's thread could not be started.
    #[error("starting the store's PostgreSQL thread: {source}")]
    Thread {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A store opened for reading does not exist (reading never creates one).
    #[error("no results store at {location}: nothing was recorded there yet (a run records itself; `kneepoint import DIR` adds a folder)")]
    Missing {
        /// Where it was looked for.
        location: String,
    },
    /// The database is not a kneepoint store: it holds other tables and no kneepoint schema,
    /// and is left as it is.
    #[error("{location} is a database of something else (tables {tables}), not a kneepoint results store: it is left untouched; name another file")]
    Foreign {
        /// The database.
        location: String,
        /// Some of its tables.
        tables: String,
    },
    /// A run id prefix names several runs.
    #[error("{prefix:?} names {} runs ({}): give more of the id", ids.len(), ids.join(", "))]
    Ambiguous {
        /// The prefix given.
        prefix: String,
        /// The runs it starts (at most a few).
        ids: Vec<String>,
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
