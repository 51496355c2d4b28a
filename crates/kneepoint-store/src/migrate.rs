//! The schema, versioned: the migrations a store lacks run once, in order, in one transaction
//! with their version rows (under an advisory lock on PostgreSQL), when a store is opened to
//! be written; `kneepoint_schema` lists the versions applied. A store opened to be read is
//! never changed. A migration is never
//! edited once released: a change is a new one. The SQL is common to SQLite and PostgreSQL.

use crate::backend::Conn;
use crate::Error;

/// The migrations, oldest first: (version, SQL).
pub(crate) const MIGRATIONS: [(i64, &str); 1] = [(
    1,
    "
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    command TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at TEXT,
    recorded_at TEXT NOT NULL,
    artifact_dir TEXT NOT NULL,
    endpoint TEXT,
    model TEXT,
    kneepoint_version TEXT,
    git_commit TEXT,
    host TEXT NOT NULL,
    settings TEXT NOT NULL,
    server TEXT NOT NULL,
    answer TEXT NOT NULL,
    figures TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_recorded_at ON runs (recorded_at);
CREATE TABLE IF NOT EXISTS levels (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    name TEXT NOT NULL,
    concurrency BIGINT NOT NULL,
    output_token_throughput DOUBLE PRECISION,
    summary TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);
CREATE TABLE IF NOT EXISTS labels (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
",
)];

/// The newest schema this build knows.
pub const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// Applies every migration the database lacks, atomically; refuses a database newer than
/// this build.
pub(crate) fn migrate(conn: &mut Conn) -> Result<i64, Error> {
    let found = conn.migrate(&MIGRATIONS, SCHEMA_VERSION)?;
    if found > SCHEMA_VERSION {
        return Err(Error::NewerSchema {
            found,
            known: SCHEMA_VERSION,
        });
    }
    current(conn)
}

/// The schema version of a store opened for reading (a missing schema table: no store).
pub(crate) fn current(conn: &mut Conn) -> Result<i64, Error> {
    let rows = conn.rows(
        "SELECT CAST(MAX(version) AS TEXT) FROM kneepoint_schema",
        &[],
    )?;
    Ok(rows
        .first()
        .and_then(|r| r.first().cloned().flatten())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}
