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
    /// Parses `postgres://...`, `postgresql://...`, a libpq `key=value` string
    /// (`host=db port=5432 dbname=kp user=bench`), `sqlite://PATH` or a plain path. A SQLite
    /// database that would vanish at exit (`sqlite://`, `:memory:`) is refused.
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
        if looks_like_libpq(s) {
            return Ok(Location::Postgres(s.to_owned()));
        }
        let path = s.strip_prefix("sqlite://").unwrap_or(s);
        if path.contains("password=") {
            // a connection string kneepoint did not read as one: never a file name that
            // would be printed with its password
            return Err(Error::Location {
                location: "[a connection string holding a password]".into(),
                reason: "not read as a PostgreSQL connection string and not a file path: use postgres://user:pass@host/db, or libpq's key=value form starting with a known keyword (host=...)".into(),
            });
        }
        if path.trim().is_empty() || path == ":memory:" || path.starts_with("file::memory:") {
            return Err(Error::Location {
                location: s.to_owned(),
                reason: "a SQLite database needs a file path (an in-memory database would vanish at exit): sqlite:///path/results.db".into(),
            });
        }
        if s.starts_with("sqlite://") {
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
            Location::Postgres(url) if looks_like_libpq(url) => redact_libpq(url),
            Location::Postgres(url) => kneepoint_core::redact_url(url),
        }
    }

    /// The secrets the location holds (a PostgreSQL password), to register so that nothing
    /// written shows them.
    pub fn secrets(&self) -> Vec<String> {
        match self {
            Location::Sqlite(_) => Vec::new(),
            Location::Postgres(s) if looks_like_libpq(s) => libpq_pairs(s)
                .into_iter()
                .filter(|(k, _)| *k == "password")
                .map(|(_, v)| v)
                .collect(),
            Location::Postgres(url) => url_password(url).into_iter().collect(),
        }
    }
}

/// The keywords of libpq's connection strings (PostgreSQL 17's list).
const LIBPQ_KEYS: [&str; 42] = [
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "require_auth",
    "channel_binding",
    "connect_timeout",
    "client_encoding",
    "options",
    "application_name",
    "fallback_application_name",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "replication",
    "gssencmode",
    "sslmode",
    "sslnegotiation",
    "sslcompression",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcertmode",
    "sslrootcert",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "requirepeer",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "krbsrvname",
    "gsslib",
    "gssdelegation",
    "service",
    "target_session_attrs",
    "load_balance_hosts",
    "requiressl",
];

/// Whether `s` is a libpq `key=value ...` connection string: a word of it is `keyword=...`
/// for a libpq keyword, and it has no path separator outside a value.
pub(crate) fn looks_like_libpq(s: &str) -> bool {
    let first = s.split_whitespace().next().unwrap_or("");
    let keyword = |w: &str| {
        w.split_once('=')
            .is_some_and(|(k, _)| LIBPQ_KEYS.contains(&k.trim()))
    };
    keyword(first) && !first.split_once('=').is_some_and(|(k, _)| k.contains('/'))
}

/// The `key=value` pairs of a libpq string (values may be single-quoted, `\'` and `\\`
/// escaped, as libpq reads them).
pub(crate) fn libpq_pairs(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        if key.is_empty() {
            return out;
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek() != Some(&'=') {
            out.push((key, String::new()));
            continue;
        }
        chars.next();
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '\'' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        out.push((key, value));
    }
}

/// A libpq string as it may be printed: the password's value replaced.
fn redact_libpq(s: &str) -> String {
    libpq_pairs(s)
        .into_iter()
        .map(|(k, v)| {
            if k == "password" {
                format!("{k}=[redacted]")
            } else {
                format!("{k}={v}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The password of a `scheme://user:password@host/...` URL (up to the last `@` of the
/// authority, so a raw `@` in it stays in the password).
fn url_password(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    // the last `@` before the query, else (a `?` in the password) the last one of all
    let query = rest.find(['?', '#']).unwrap_or(rest.len());
    let at = rest[..query].rfind('@').or_else(|| rest.rfind('@'))?;
    let userinfo = &rest[..at];
    let (_, pw) = userinfo.split_once(':')?;
    (!pw.is_empty()).then(|| pw.to_owned())
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

    /// Issue 57.7: a libpq string is a PostgreSQL location, never a SQLite file name, and
    /// its password is neither printed nor missed by the secrets; a SQLite database that
    /// would vanish at exit is refused.
    #[test]
    fn libpq_strings_are_postgres_and_in_memory_sqlite_is_refused() {
        let l =
            Location::parse("host=127.0.0.1 port=5432 dbname=kp user=bench password='s3 cr\\'et'")
                .unwrap();
        assert!(matches!(l, Location::Postgres(_)), "{l:?}");
        assert!(!l.display().contains("s3"), "{}", l.display());
        assert!(l.display().contains("host=127.0.0.1"), "{}", l.display());
        assert_eq!(l.secrets(), ["s3 cr'et"]);
        let u = Location::parse("postgres://bench:p@ss@db:5432/kp").unwrap();
        assert_eq!(u.secrets(), ["p@ss"]);
        let q = Location::parse("postgres://u:pw@h/db?sslrootcert=/c/a@b.pem").unwrap();
        assert_eq!(q.secrets(), ["pw"]);
        // any libpq keyword starts one; a password never makes a file name
        let k = Location::parse("service=team password=s3cretpw").unwrap();
        assert!(matches!(k, Location::Postgres(_)), "{k:?}");
        let e = Location::parse("myservice password=s3cretpw")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cretpw"), "{e}");
        assert!(
            !u.display().contains("p@ss") && !u.display().contains("ss@"),
            "{}",
            u.display()
        );
        for bad in ["sqlite://", "sqlite://  ", ":memory:", "sqlite://:memory:"] {
            let e = Location::parse(bad).unwrap_err().to_string();
            assert!(e.contains("file path"), "{bad}: {e}");
        }
        // a file name with `=` in it is still a file
        assert!(matches!(
            Location::parse("runs=old.db").unwrap(),
            Location::Sqlite(_)
        ));
    }

    /// Issue 57 item 8: the variable is among those kneepoint's secrets know it reads for a
    /// secret, so a launched server does not inherit it and its password is registered at
    /// start, whatever its name says.
    #[test]
    fn the_store_variable_is_known_to_carry_a_secret() {
        use kneepoint_core::secrets::{carrier, withheld_from_servers, Carrier};
        assert_eq!(carrier(STORE_ENV), Some(Carrier::Connection));
        assert!(withheld_from_servers(
            STORE_ENV,
            "postgres://bench:pw@db/kp"
        ));
    }
}
