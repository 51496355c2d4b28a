//! Where the store lives: a SQLite file (the default, per user) or a PostgreSQL server.

use std::path::{Path, PathBuf};

use crate::Error;

/// The environment variable naming the store (`postgres://...` or a SQLite path).
pub const STORE_ENV: &str = "KNEEPOINT_STORE";

/// A store's location.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// A SQLite database file (made, with its folder, on first use).
    Sqlite(PathBuf),
    /// A PostgreSQL connection string (`postgres://user:pass@host:port/db`, or key=value).
    Postgres(String),
}

impl Location {
    /// Parses `postgres://...`, `postgresql://...`, `sqlite://PATH` or a plain path.
    pub fn parse(s: &str) -> Result<Location, Error> {
        let s = s.trim();
        if s.is_empty() {
            return Err(Error::Location {
                location: String::new(),
                reason: "empty".into(),
            });
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(Location::Postgres(s.to_owned()));
        }
        if let Some(path) = s.strip_prefix("sqlite://") {
            return Ok(Location::Sqlite(PathBuf::from(path)));
        }
        if s.contains("://") {
            return Err(Error::Location {
                location: kneepoint_core::redact_url(s),
                reason: "use postgres://..., sqlite://PATH or a file path".into(),
            });
        }
        Ok(Location::Sqlite(PathBuf::from(s)))
    }

    /// `$KNEEPOINT_STORE` if set, else the per-user SQLite file ([`Location::default_path`]).
    pub fn from_env() -> Result<Location, Error> {
        match std::env::var(STORE_ENV) {
            Ok(v) if !v.trim().is_empty() => Location::parse(&v),
            _ => Ok(Location::Sqlite(Location::default_path())),
        }
    }

    /// `$XDG_DATA_HOME/kneepoint/results.db`, or `~/.local/share/kneepoint/results.db`
    /// (`./kneepoint-results.db` when neither is known).
    pub fn default_path() -> PathBuf {
        let data = std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| Path::new(&h).join(".local/share"))
            });
        match data {
            Some(d) => d.join("kneepoint").join("results.db"),
            None => PathBuf::from("kneepoint-results.db"),
        }
    }

    /// The location as it may be printed: a PostgreSQL password is replaced.
    pub fn display(&self) -> String {
        match self {
            Location::Sqlite(p) => p.display().to_string(),
            Location::Postgres(url) => kneepoint_core::redact_url(url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_and_print_without_passwords() {
        let pg = Location::parse("postgres://bench:s3cret@db.example:5432/kp").unwrap();
        assert!(matches!(pg, Location::Postgres(_)));
        assert!(!pg.display().contains("s3cret"), "{}", pg.display());
        assert_eq!(
            Location::parse("sqlite:///tmp/r.db").unwrap(),
            Location::Sqlite("/tmp/r.db".into())
        );
        assert_eq!(
            Location::parse("results.db").unwrap(),
            Location::Sqlite("results.db".into())
        );
        let e = Location::parse("mysql://u:pw@h/db")
            .unwrap_err()
            .to_string();
        assert!(e.contains("postgres://") && !e.contains("pw@"), "{e}");
        assert!(Location::parse("  ").is_err());
        assert!(Location::default_path().ends_with("kneepoint/results.db"));
    }
}
