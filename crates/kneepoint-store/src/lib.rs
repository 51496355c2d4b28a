//! A results store for kneepoint runs: every sweep, search, length sweep and recommendation
//! indexed in a database, so that history, trends and regression gates outlive the artifact
//! folders. SQLite by default (one file per user, `$XDG_DATA_HOME/kneepoint/results.db`),
//! PostgreSQL for a team (`postgres://...`). The schema is versioned and migrated when a
//! store is opened ([`SCHEMA_VERSION`]); a run is written in one transaction, so a process
//! killed while recording leaves the store as it was.
//!
//! The SQL is written once for both databases; the two drivers (`rusqlite` with SQLite
//! bundled, `postgres` without TLS) sit behind a small private interface.
//!
//! # Example
//! ```
//! use kneepoint_store::{Location, RunFilter, Store};
//! # fn main() -> Result<(), kneepoint_store::Error> {
//! let dir = tempfile::tempdir().expect("a temporary folder");
//! let mut store = Store::open(&Location::Sqlite(dir.path().join("results.db")))?;
//! assert!(store.runs(&RunFilter::default())?.is_empty());
//! // After a run: store.record(&RunRecord::from_folder(Path::new("artifacts/sweep-..."))?)?;
//! # Ok(())
//! # }
//! ```

mod backend;
mod check;
mod dashboard;
mod error;
mod figures;
mod host;
mod location;
mod migrate;
mod pg;
mod query;
mod record;
mod tables;
mod tls;

pub use check::{check, check_with, CheckOptions, CheckReport, CheckedFigure};
#[allow(deprecated)]
pub use dashboard::filter_from_query;
pub use dashboard::{dashboard_page, parse_filter_query};
pub use error::Error;
pub use figures::Figures;
pub use host::Host;
pub use location::{Location, STORE_ENV};
pub use migrate::SCHEMA_VERSION;
pub use pg::Deadlines;
pub use query::RunFilter;
pub use record::{write_labels, RunRecord, RunStatus, StoredLevel, LABELS_FILE};
pub use tables::history_table;

use backend::{Access, Conn, Param, Statement};

/// An open results store.
pub struct Store {
    conn: Conn,
    location: Location,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location.display())
            .finish()
    }
}

/// Whether [`Store::record`] added the run or found it already stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Added.
    Added,
    /// The same run (same folder, same contents) was already stored.
    AlreadyStored,
}

/// How a store is opened: to write (made and migrated when needed) or only to read, and the
/// deadlines PostgreSQL is given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenOptions {
    /// Read only: nothing is made or changed, a store that does not exist is
    /// [`Error::Missing`], and a read-only file or a newer schema can still be read.
    pub read_only: bool,
    /// How long PostgreSQL may take.
    pub deadlines: Deadlines,
}

impl OpenOptions {
    /// To read only.
    pub fn read_only() -> Self {
        OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        }
    }

    /// With these deadlines.
    pub fn deadlines(mut self, deadlines: Deadlines) -> Self {
        self.deadlines = deadlines;
        self
    }
}

impl Store {
    /// Opens (creating, for SQLite) the store at `location` and brings its schema up to date.
    pub fn open(location: &Location) -> Result<Store, Error> {
        Store::open_with(location, &OpenOptions::default())
    }

    /// Opens the store at `location` to read it: nothing is made or changed.
    pub fn open_read(location: &Location) -> Result<Store, Error> {
        Store::open_with(location, &OpenOptions::read_only())
    }

    /// Opens the store at `location` as `options` say. Safe from any thread, inside an async
    /// runtime or not (the PostgreSQL client runs on a thread of its own); a call blocks
    /// the calling thread, so async code calls it from `spawn_blocking`.
    pub fn open_with(location: &Location, options: &OpenOptions) -> Result<Store, Error> {
        for secret in location.secrets() {
            kneepoint_core::secrets::register(&secret);
        }
        let access = if options.read_only {
            Access::Read
        } else {
            Access::Write
        };
        let mut conn = Conn::open(location, access, options.deadlines)?;
        if options.read_only {
            migrate::current(&mut conn).map_err(|e| match e {
                // no schema table on PostgreSQL: nothing recorded there yet
                Error::Postgres { ref source, .. }
                    if source.code() == Some(&postgres::error::SqlState::UNDEFINED_TABLE) =>
                {
                    Error::Missing {
                        location: location.display(),
                    }
                }
                e => e,
            })?;
        } else {
            migrate::migrate(&mut conn)?;
        }
        Ok(Store {
            conn,
            location: location.clone(),
        })
    }

    /// Where it is, printable (no password).
    pub fn location(&self) -> String {
        self.location.display()
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        self.conn.kind()
    }

    /// Stores `run` with its levels and labels, all or nothing.
    /// Recording one run from several processes at once stores it once (the others find it
    /// stored).
    pub fn record(&mut self, run: &RunRecord) -> Result<Recorded, Error> {
        if self.contains(&run.id)? {
            return Ok(Recorded::AlreadyStored);
        }
        let json = |v: &serde_json::Value| v.to_string();
        let mut statements: Vec<Statement> = vec![(
            "INSERT INTO runs (id, command, status, started_at, recorded_at, artifact_dir, endpoint, model, kneepoint_version, git_commit, host, settings, server, answer, figures) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT (id) DO NOTHING",
            vec![
                Param::from(run.id.clone()),
                Param::from(run.command.clone()),
                Param::from(run.status.as_str()),
                Param::from(run.started_at.clone()),
                Param::from(run.recorded_at.clone()),
                Param::from(run.artifact_dir.clone()),
                Param::from(run.endpoint.clone()),
                Param::from(run.model.clone()),
                Param::from(run.kneepoint_version.clone()),
                Param::from(run.host.as_ref().and_then(|h| h.git_commit.clone())),
                Param::from(to_json(&run.host)),
                Param::from(json(&run.settings)),
                Param::from(json(&run.server)),
                Param::from(json(&run.answer)),
                Param::from(to_json(&run.figures)),
            ],
        )];
        for (i, l) in run.levels.iter().enumerate() {
            statements.push((
                "INSERT INTO levels (run_id, position, name, concurrency, output_token_throughput, summary) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, position) DO NOTHING",
                vec![
                    Param::from(run.id.clone()),
                    Param::Int(i64::try_from(i).unwrap_or(i64::MAX)),
                    Param::from(l.name.clone()),
                    Param::Int(i64::from(l.concurrency)),
                    Param::from(Some(l.summary.output_token_throughput)),
                    Param::from(to_json(&l.summary)),
                ],
            ));
        }
        for (k, v) in &run.labels {
            statements.push((
                "INSERT INTO labels (run_id, key, value) VALUES ($1, $2, $3) ON CONFLICT (run_id, key) DO NOTHING",
                vec![
                    Param::from(run.id.clone()),
                    Param::from(k.clone()),
                    Param::from(v.clone()),
                ],
            ));
        }
        // Another process may have stored it since: its run row then stays as it was.
        match self.conn.transaction(&statements)? {
            0 => Ok(Recorded::AlreadyStored),
            _ => Ok(Recorded::Added),
        }
    }

    fn contains(&mut self, id: &str) -> Result<bool, Error> {
        let rows = self
            .conn
            .rows("SELECT id FROM runs WHERE id = $1", &[Param::from(id)])?;
        Ok(!rows.is_empty())
    }
}

/// The current time, RFC 3339 UTC.
pub(crate) fn now_rfc3339() -> String {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    kneepoint_metrics::export::rfc3339(ns)
}

/// A value as the JSON text of a column.
fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    /// A run whose writing fails part way leaves nothing: its statements are one transaction.
    #[test]
    fn a_write_that_fails_part_way_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&Location::Sqlite(dir.path().join("r.db"))).unwrap();
        let insert = "INSERT INTO runs (id, command, status, recorded_at, artifact_dir, host, settings, server, answer, figures) VALUES ($1, 'sweep', 'complete', 'now', '/x', 'null', 'null', 'null', 'null', '{}')";
        let statements: Vec<Statement> = vec![
            (insert, vec![Param::from("r1")]),
            // no summary: NOT NULL fails after the run's row went in
            (
                "INSERT INTO levels (run_id, position, name, concurrency, summary) VALUES ($1, 0, 'c', 1, NULL)",
                vec![Param::from("r1")],
            ),
        ];
        assert!(store.conn.transaction(&statements).is_err());
        let runs = store.runs(&RunFilter::new()).unwrap();
        assert!(runs.is_empty(), "{runs:?}");
        assert_eq!(migrate::migrate(&mut store.conn).unwrap(), SCHEMA_VERSION);
    }
}
