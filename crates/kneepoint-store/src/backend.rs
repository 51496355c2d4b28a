//! The two databases behind one small interface: statements with `$1, $2, ...` parameters
//! (both SQLite and PostgreSQL read that form), run one at a time or as one transaction, and
//! queries whose columns are read as text. The SQL is written once for both (see
//! `migrate.rs`): types are the common ones (`TEXT`, `BIGINT`, `DOUBLE PRECISION`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::pg::{Deadlines, PgConn};
use crate::{Error, Location};

/// A statement's parameter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Param {
    /// Text, or NULL.
    Text(Option<String>),
    /// An integer (`BIGINT`).
    Int(i64),
    /// A number (`DOUBLE PRECISION`), or NULL.
    Real(Option<f64>),
}

impl From<&str> for Param {
    fn from(s: &str) -> Self {
        Param::Text(Some(s.to_owned()))
    }
}

impl From<String> for Param {
    fn from(s: String) -> Self {
        Param::Text(Some(s))
    }
}

impl From<Option<String>> for Param {
    fn from(s: Option<String>) -> Self {
        Param::Text(s)
    }
}

impl From<i64> for Param {
    fn from(v: i64) -> Self {
        Param::Int(v)
    }
}

impl From<Option<f64>> for Param {
    fn from(v: Option<f64>) -> Self {
        Param::Real(v.filter(|v| v.is_finite()))
    }
}

/// One statement and its parameters.
pub(crate) type Statement = (&'static str, Vec<Param>);

/// Whether a store is opened to be written (made, and migrated, when missing) or only read
/// (never made, never changed: a read-only file, or a newer schema, can still be read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Write,
    Read,
}

/// An open database.
pub(crate) enum Conn {
    Sqlite {
        conn: rusqlite::Connection,
        path: PathBuf,
    },
    Postgres(PgConn),
}

/// How long a writer waits for another (a second kneepoint finishing at the same moment).
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

impl Conn {
    pub(crate) fn open(
        location: &Location,
        access: Access,
        deadlines: Deadlines,
    ) -> Result<Conn, Error> {
        match location {
            Location::Sqlite(path) => open_sqlite(path, access),
            Location::Postgres(url) => {
                let shown = location.display();
                let (config, tls) = crate::tls::prepare(url).map_err(|reason| Error::Location {
                    location: shown.clone(),
                    reason,
                })?;
                Ok(Conn::Postgres(PgConn::open(config, tls, shown, deadlines)?))
            }
        }
    }

    /// Runs `statements` as one transaction: all of them, or none. Returns the rows the first
    /// statement changed.
    pub(crate) fn transaction(&mut self, statements: &[Statement]) -> Result<u64, Error> {
        match self {
            Conn::Sqlite { conn, path } => {
                let fail = |source| Error::Sqlite {
                    path: path.clone(),
                    source,
                };
                // IMMEDIATE: the write lock first, so two writers queue (busy timeout) rather
                // than one failing on the upgrade from a read lock.
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(fail)?;
                let mut first = None;
                for (sql, params) in statements {
                    let n = tx
                        .execute(
                            sql,
                            rusqlite::params_from_iter(params.iter().map(sqlite_value)),
                        )
                        .map_err(fail)?;
                    first.get_or_insert(n as u64);
                }
                tx.commit().map_err(fail)?;
                Ok(first.unwrap_or(0))
            }
            Conn::Postgres(pg) => {
                let statements = statements.to_vec();
                pg.call("writing a run", move |client| {
                    let mut tx = client.transaction()?;
                    let mut first = None;
                    for (sql, params) in &statements {
                        let owned = pg_values(params);
                        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                            owned.iter().map(PgValue::as_sql).collect();
                        let n = tx.execute(*sql, &refs)?;
                        first.get_or_insert(n);
                    }
                    tx.commit()?;
                    Ok(first.unwrap_or(0))
                })
            }
        }
    }

    /// The rows of `sql`, every column read as text (select numbers `CAST(x AS TEXT)`).
    pub(crate) fn rows(
        &mut self,
        sql: &str,
        params: &[Param],
    ) -> Result<Vec<Vec<Option<String>>>, Error> {
        match self {
            Conn::Sqlite { conn, path } => {
                let fail = |source| Error::Sqlite {
                    path: path.clone(),
                    source,
                };
                let mut stmt = conn.prepare(sql).map_err(fail)?;
                let n = stmt.column_count();
                let rows = stmt
                    .query_map(
                        rusqlite::params_from_iter(params.iter().map(sqlite_value)),
                        |r| (0..n).map(|i| r.get::<_, Option<String>>(i)).collect(),
                    )
                    .map_err(fail)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(fail)
            }
            Conn::Postgres(pg) => {
                let sql = sql.to_owned();
                let params = params.to_vec();
                pg.call("reading", move |client| {
                    let owned = pg_values(&params);
                    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                        owned.iter().map(PgValue::as_sql).collect();
                    let rows = client.query(&sql, &refs)?;
                    rows.iter()
                        .map(|r| {
                            (0..r.len())
                                .map(|i| r.try_get::<_, Option<String>>(i))
                                .collect::<Result<Vec<_>, _>>()
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
            }
        }
    }

    /// Applies `migrations` newer than the database's schema, all in one transaction with
    /// their version rows (under an advisory lock on PostgreSQL, the write lock on SQLite), so
    /// that stores opened at once by several runs migrate once. Returns the version found
    /// before: one newer than `known` is left alone (the caller refuses to write it).
    pub(crate) fn migrate(
        &mut self,
        migrations: &'static [(i64, &'static str)],
        known: i64,
    ) -> Result<i64, Error> {
        let now = crate::now_rfc3339();
        match self {
            Conn::Sqlite { conn, path } => {
                let fail = |source| Error::Sqlite {
                    path: path.clone(),
                    source,
                };
                // Up to date already: no write lock, no DDL (a store one may only read and
                // insert into is written as it is).
                let up_to_date = conn
                    .query_row(VERSION, [], |r| r.get::<_, i64>(0))
                    .ok()
                    .filter(|v| *v >= known);
                if let Some(v) = up_to_date {
                    return Ok(v);
                }
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(fail)?;
                tx.execute_batch(SCHEMA_TABLE).map_err(fail)?;
                let found: i64 = tx
                    .query_row(
                        "SELECT COALESCE(MAX(version), 0) FROM kneepoint_schema",
                        [],
                        |r| r.get(0),
                    )
                    .map_err(fail)?;
                if found < known {
                    for (version, sql) in migrations.iter().filter(|(v, _)| *v > found) {
                        tx.execute_batch(sql).map_err(fail)?;
                        tx.execute(
                            "INSERT INTO kneepoint_schema (version, applied_at) VALUES ($1, $2)",
                            rusqlite::params![version, now],
                        )
                        .map_err(fail)?;
                    }
                }
                tx.commit().map_err(fail)?;
                Ok(found)
            }
            Conn::Postgres(pg) => pg.call("migrating the schema", move |client| {
                // Up to date already: no lock and no DDL, which PostgreSQL refuses to a role
                // without CREATE on the schema even for a table that exists (a CI role that
                // may only read and insert).
                match client.query_one(VERSION, &[]) {
                    Ok(row) => {
                        let v: i64 = row.try_get(0)?;
                        if v >= known {
                            return Ok(v);
                        }
                    }
                    Err(e) if e.code() == Some(&postgres::error::SqlState::UNDEFINED_TABLE) => {}
                    Err(e) => return Err(e),
                }
                let mut tx = client.transaction()?;
                // Every kneepoint opening the store queues here: the first makes the tables,
                // the others then find them made.
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
                tx.batch_execute(SCHEMA_TABLE)?;
                let found: i64 = tx
                    .query_one(
                        "SELECT COALESCE(MAX(version), 0) FROM kneepoint_schema",
                        &[],
                    )?
                    .try_get(0)?;
                if found < known {
                    for (version, sql) in migrations.iter().filter(|(v, _)| *v > found) {
                        tx.batch_execute(sql)?;
                        let row: [&(dyn postgres::types::ToSql + Sync); 2] = [version, &now];
                        tx.execute(
                            "INSERT INTO kneepoint_schema (version, applied_at) VALUES ($1, $2)",
                            &row,
                        )?;
                    }
                }
                tx.commit()?;
                Ok(found)
            }),
        }
    }

    /// `sqlite` or `postgres`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Conn::Sqlite { .. } => "sqlite",
            Conn::Postgres(_) => "postgres",
        }
    }
}

/// The newest version applied.
const VERSION: &str = "SELECT COALESCE(MAX(version), 0) FROM kneepoint_schema";

/// The table of applied versions.
const SCHEMA_TABLE: &str = "CREATE TABLE IF NOT EXISTS kneepoint_schema (version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL)";

/// The advisory lock kneepoint's migrations take on PostgreSQL (any constant of its own).
const MIGRATION_LOCK: i64 = 0x6b6e_6565_706f_696e;

fn open_sqlite(path: &Path, access: Access) -> Result<Conn, Error> {
    use rusqlite::OpenFlags;
    let fail = |source| Error::Sqlite {
        path: path.to_owned(),
        source,
    };
    if access == Access::Read {
        if !path.is_file() {
            return Err(Error::Missing {
                location: path.display().to_string(),
            });
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = rusqlite::Connection::open_with_flags(path, flags).map_err(fail)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
        // A write-ahead-logged file in a folder this user cannot write (no `-shm` to make)
        // cannot be read in the usual way: then it is read as immutable.
        let cannot_open = |e: &rusqlite::Error| {
            matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly)
            )
        };
        let conn = match tables(&conn) {
            Err(e) if cannot_open(&e) => {
                let uri = format!("file:{}?immutable=1", uri_path(path));
                rusqlite::Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
                    .map_err(fail)?
            }
            _ => conn,
        };
        let names = tables(&conn).map_err(fail)?;
        if !names.iter().any(|t| t == "kneepoint_schema") {
            return Err(foreign_or_missing(path, &names));
        }
        return Ok(Conn::Sqlite {
            conn,
            path: path.to_owned(),
        });
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_owned(),
            source,
        })?;
    }
    let conn = rusqlite::Connection::open(path).map_err(fail)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
    let names = tables(&conn).map_err(fail)?;
    if !names.is_empty() && !names.iter().any(|t| t == "kneepoint_schema") {
        return Err(foreign_or_missing(path, &names));
    }
    // Write-ahead logging: readers (history, the dashboard) never block a run recording
    // itself, and a killed writer leaves the last commit intact.
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(fail)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(fail)?;
    Ok(Conn::Sqlite {
        conn,
        path: path.to_owned(),
    })
}

/// The user tables of a SQLite database.
fn tables(conn: &rusqlite::Connection) -> Result<Vec<String>, rusqlite::Error> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
    names.collect()
}

fn foreign_or_missing(path: &Path, names: &[String]) -> Error {
    if names.is_empty() {
        return Error::Missing {
            location: path.display().to_string(),
        };
    }
    let mut shown: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
    if names.len() > 5 {
        shown.push("…");
    }
    Error::Foreign {
        location: path.display().to_string(),
        tables: shown.join(", "),
    }
}

/// A path as a SQLite URI's path (`%`, `?` and `#` escaped).
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

fn sqlite_value(p: &Param) -> rusqlite::types::Value {
    use rusqlite::types::Value;
    match p {
        Param::Text(Some(s)) => Value::Text(s.clone()),
        Param::Int(v) => Value::Integer(*v),
        Param::Real(Some(v)) => Value::Real(*v),
        Param::Text(None) | Param::Real(None) => Value::Null,
    }
}

/// A parameter as the PostgreSQL client takes it.
enum PgValue {
    Text(Option<String>),
    Int(i64),
    Real(Option<f64>),
}

impl PgValue {
    fn as_sql(&self) -> &(dyn postgres::types::ToSql + Sync) {
        match self {
            PgValue::Text(v) => v,
            PgValue::Int(v) => v,
            PgValue::Real(v) => v,
        }
    }
}

fn pg_values(params: &[Param]) -> Vec<PgValue> {
    params
        .iter()
        .map(|p| match p {
            Param::Text(v) => PgValue::Text(v.clone()),
            Param::Int(v) => PgValue::Int(*v),
            Param::Real(v) => PgValue::Real(*v),
        })
        .collect()
}
