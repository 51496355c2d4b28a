//! The two databases behind one small interface: statements with `$1, $2, ...` parameters
//! (both SQLite and PostgreSQL read that form), run one at a time or as one transaction, and
//! queries whose columns are read as text. The SQL is written once for both (see
//! `migrate.rs`): types are the common ones (`TEXT`, `BIGINT`, `DOUBLE PRECISION`).

use std::path::PathBuf;
use std::time::Duration;

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

/// An open database.
pub(crate) enum Conn {
    Sqlite {
        conn: rusqlite::Connection,
        path: PathBuf,
    },
    Postgres {
        client: Box<postgres::Client>,
        location: String,
    },
}

/// How long a writer waits for another (a second kneepoint finishing at the same moment).
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

impl Conn {
    pub(crate) fn open(location: &Location) -> Result<Conn, Error> {
        match location {
            Location::Sqlite(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                        path: dir.to_owned(),
                        source,
                    })?;
                }
                let fail = |source| Error::Sqlite {
                    path: path.clone(),
                    source,
                };
                let conn = rusqlite::Connection::open(path).map_err(fail)?;
                conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
                // Write-ahead logging: readers (history, the dashboard) never block a run
                // recording itself, and a killed writer leaves the last commit intact.
                conn.pragma_update(None, "journal_mode", "WAL")
                    .map_err(fail)?;
                conn.pragma_update(None, "foreign_keys", "ON")
                    .map_err(fail)?;
                Ok(Conn::Sqlite {
                    conn,
                    path: path.clone(),
                })
            }
            Location::Postgres(url) => {
                let shown = location.display();
                let mut config: postgres::Config =
                    url.parse().map_err(|source| Error::Postgres {
                        location: shown.clone(),
                        source,
                    })?;
                config.connect_timeout(Duration::from_secs(10));
                config.application_name("kneepoint");
                let client = config
                    .connect(postgres::NoTls)
                    .map_err(|source| Error::Postgres {
                        location: shown.clone(),
                        source,
                    })?;
                Ok(Conn::Postgres {
                    client: Box::new(client),
                    location: shown,
                })
            }
        }
    }

    /// Runs `sql` (several statements, no parameters).
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), Error> {
        match self {
            Conn::Sqlite { conn, path } => {
                conn.execute_batch(sql).map_err(|source| Error::Sqlite {
                    path: path.clone(),
                    source,
                })
            }
            Conn::Postgres { client, location } => {
                client.batch_execute(sql).map_err(|source| Error::Postgres {
                    location: location.clone(),
                    source,
                })
            }
        }
    }

    /// Runs `statements` as one transaction: all of them, or none.
    pub(crate) fn transaction(&mut self, statements: &[Statement]) -> Result<(), Error> {
        match self {
            Conn::Sqlite { conn, path } => {
                let fail = |source| Error::Sqlite {
                    path: path.clone(),
                    source,
                };
                let tx = conn.transaction().map_err(fail)?;
                for (sql, params) in statements {
                    tx.execute(
                        sql,
                        rusqlite::params_from_iter(params.iter().map(sqlite_value)),
                    )
                    .map_err(fail)?;
                }
                tx.commit().map_err(fail)
            }
            Conn::Postgres { client, location } => {
                let fail = |source| Error::Postgres {
                    location: location.clone(),
                    source,
                };
                let mut tx = client.transaction().map_err(fail)?;
                for (sql, params) in statements {
                    let owned = pg_values(params);
                    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                        owned.iter().map(PgValue::as_sql).collect();
                    tx.execute(*sql, &refs).map_err(fail)?;
                }
                tx.commit().map_err(fail)
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
            Conn::Postgres { client, location } => {
                let owned = pg_values(params);
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    owned.iter().map(PgValue::as_sql).collect();
                let fail = |source| Error::Postgres {
                    location: location.clone(),
                    source,
                };
                let rows = client.query(sql, &refs).map_err(fail)?;
                rows.iter()
                    .map(|r| {
                        (0..r.len())
                            .map(|i| r.try_get::<_, Option<String>>(i))
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(fail)
            }
        }
    }

    /// `sqlite` or `postgres`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Conn::Sqlite { .. } => "sqlite",
            Conn::Postgres { .. } => "postgres",
        }
    }
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
