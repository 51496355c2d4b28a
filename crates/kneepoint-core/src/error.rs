//! The crate's error type: every way a request or a sink can fail, classified.

use serde::{Deserialize, Serialize};

/// A boxed error kept as the `source` of an [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a request (or a record sink) failed.
///
/// Transports return these; the runner turns each into an [`crate::ErrorRecord`] so that every
/// request ends in exactly one record. Match on [`Error::kind`] rather than on the display text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The connection could not be established (refused, DNS, TLS handshake).
    #[error("connect to {target} failed: {message}")]
    Connect {
        /// Host and port (never credentials).
        target: String,
        /// A short description.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
    /// The server answered with a non-success HTTP status.
    #[error(
        "HTTP {status}: {}{}",
        status_body(body_excerpt),
        status_headers(headers)
    )]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The first few hundred bytes of the body, lossily decoded (empty when it was).
        body_excerpt: String,
        /// The response headers that explain such a status (`location` on a redirect,
        /// `retry-after` on 429/503, `www-authenticate` on 401, ...), lower-case names.
        headers: Vec<(String, String)>,
    },
    /// A deadline passed.
    #[error("timed out after {after_ms} ms ({phase})")]
    Timeout {
        /// Which deadline.
        phase: TimeoutPhase,
        /// The configured deadline in milliseconds.
        after_ms: u64,
    },
    /// The response body could not be understood (bad SSE framing, invalid JSON, invalid UTF-8).
    #[error("malformed response: {message}")]
    MalformedResponse {
        /// What was wrong, with a short excerpt of the offending bytes.
        message: String,
        /// The underlying parse error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// The server reported an error object (in the body or inside the stream).
    #[error("server error{}: {message}", code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Server {
        /// The error's code or type, when the server gave one.
        code: Option<String>,
        /// The server's message.
        message: String,
    },
    /// The connection broke while the body was being read.
    #[error("connection lost while reading the response: {message}")]
    Disconnected {
        /// A short description.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
    /// The request could not be built (e.g. an invalid header value).
    #[error("invalid request: {message}")]
    InvalidRequest {
        /// What was wrong.
        message: String,
    },
    /// The request was cancelled before it finished (e.g. the run was interrupted).
    #[error("cancelled")]
    Cancelled,
    /// The response ended cleanly but incompletely (e.g. `[DONE]` with no `finish_reason`: the
    /// server cut the generation short).
    #[error("incomplete response: {message}")]
    Incomplete {
        /// What was missing.
        message: String,
    },
    /// The client ran out of a resource of its own (file descriptors: `EMFILE`/`ENFILE`);
    /// the server is not at fault.
    #[error("client out of resources: {message}")]
    ClientResources {
        /// What ran out and what to do.
        message: String,
        /// The operating system's error.
        #[source]
        source: Option<BoxError>,
    },
    /// A record sink failed to store a record.
    #[error("record sink {sink} failed")]
    Sink {
        /// Which sink (e.g. a file path).
        sink: String,
        /// The I/O or encoding error.
        #[source]
        source: BoxError,
    },
}

fn status_body(excerpt: &str) -> &str {
    if excerpt.trim().is_empty() {
        "empty body (the server gave no reason)"
    } else {
        excerpt
    }
}

fn status_headers(headers: &[(String, String)]) -> String {
    headers
        .iter()
        .map(|(k, v)| format!(" [{k}: {v}]"))
        .collect()
}

/// What replaces a secret in a recorded message.
pub const REDACTED: &str = "[redacted]";

fn scrub(s: &mut String, secrets: &[&str]) {
    for secret in secrets {
        // Very short values would blank out ordinary words; they are not credentials.
        if secret.len() >= 6 && s.contains(secret) {
            *s = s.replace(secret, REDACTED);
        }
    }
}

impl Error {
    /// The error with every occurrence of each of `secrets` (an API key, a header value) in
    /// its messages, body excerpt and header values replaced by [`REDACTED`]: a server that
    /// echoes the request's credentials back must not put them in a record. Values shorter
    /// than six bytes are left alone.
    pub fn redact(mut self, secrets: &[&str]) -> Self {
        if secrets.is_empty() {
            return self;
        }
        match &mut self {
            Error::Connect {
                target, message, ..
            } => {
                scrub(target, secrets);
                scrub(message, secrets);
            }
            Error::Status {
                body_excerpt,
                headers,
                ..
            } => {
                scrub(body_excerpt, secrets);
                for (_, v) in headers.iter_mut() {
                    scrub(v, secrets);
                }
            }
            Error::Server { code, message } => {
                if let Some(c) = code {
                    scrub(c, secrets);
                }
                scrub(message, secrets);
            }
            Error::MalformedResponse { message, .. }
            | Error::Disconnected { message, .. }
            | Error::InvalidRequest { message }
            | Error::Incomplete { message } => scrub(message, secrets),
            Error::Sink { sink, .. } => scrub(sink, secrets),
            Error::ClientResources { message, .. } => scrub(message, secrets),
            Error::Timeout { .. } | Error::Cancelled => {}
        }
        self
    }

    /// An [`Error::Status`] without explaining headers.
    pub fn status_code(status: u16, body_excerpt: impl Into<String>) -> Self {
        Error::Status {
            status,
            body_excerpt: body_excerpt.into(),
            headers: Vec::new(),
        }
    }

    /// The error's class, as recorded in exports.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Connect { .. } => ErrorKind::Connect,
            Error::Status { .. } => ErrorKind::HttpStatus,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::MalformedResponse { .. } => ErrorKind::MalformedResponse,
            Error::Server { .. } => ErrorKind::Server,
            Error::Disconnected { .. } => ErrorKind::Disconnected,
            Error::InvalidRequest { .. } => ErrorKind::InvalidRequest,
            Error::Cancelled => ErrorKind::Cancelled,
            Error::Incomplete { .. } => ErrorKind::Incomplete,
            Error::Sink { .. } => ErrorKind::Sink,
            Error::ClientResources { .. } => ErrorKind::ClientResources,
        }
    }

    /// The HTTP status code, for [`Error::Status`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// How long the server asked the client to wait before trying again: an HTTP status's
    /// `retry-after` header, in delta-seconds (`1`, `2.5`) or as an HTTP date (then from
    /// `now_unix_s`); `None` without one, or when it cannot be read.
    pub fn retry_after(&self, now_unix_s: u64) -> Option<std::time::Duration> {
        let Error::Status { headers, .. } = self else {
            return None;
        };
        let v = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))?
            .1
            .trim();
        if let Ok(s) = v.parse::<f64>() {
            return std::time::Duration::try_from_secs_f64(s).ok();
        }
        let at = http_date_unix_s(v)?;
        Some(std::time::Duration::from_secs(
            at.saturating_sub(now_unix_s),
        ))
    }

    /// The code a server gave, as a number when it is one: an HTTP status, or an error
    /// object's numeric `code` (an SSE `event: error` payload's, say).
    pub fn numeric_code(&self) -> Option<u16> {
        match self {
            Error::Status { status, .. } => Some(*status),
            Error::Server { code: Some(c), .. } => c.trim().parse().ok(),
            _ => None,
        }
    }

    /// True for deadline failures.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    /// Shorthand for a [`Error::MalformedResponse`] without a source.
    pub fn malformed(message: impl Into<String>) -> Self {
        Error::MalformedResponse {
            message: message.into(),
            source: None,
        }
    }
}

/// The class of a failed request, as written to `profile_export.jsonl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// See [`Error::Connect`].
    Connect,
    /// See [`Error::Status`].
    HttpStatus,
    /// See [`Error::Timeout`].
    Timeout,
    /// See [`Error::MalformedResponse`].
    MalformedResponse,
    /// See [`Error::Server`].
    Server,
    /// See [`Error::Disconnected`].
    Disconnected,
    /// See [`Error::InvalidRequest`].
    InvalidRequest,
    /// See [`Error::Cancelled`].
    Cancelled,
    /// See [`Error::Incomplete`].
    Incomplete,
    /// See [`Error::Sink`].
    Sink,
    /// The client ran out of file descriptors (or another resource of its own).
    ClientResources,
}

impl ErrorKind {
    /// The snake_case name used in exports.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::HttpStatus => "http_status",
            ErrorKind::Timeout => "timeout",
            ErrorKind::MalformedResponse => "malformed_response",
            ErrorKind::Server => "server",
            ErrorKind::Disconnected => "disconnected",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Incomplete => "incomplete",
            ErrorKind::Sink => "sink",
            ErrorKind::ClientResources => "client_resources",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which deadline a request missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutPhase {
    /// The whole request (`--request-timeout-s`).
    Request,
    /// The response headers (`--response-timeout-s`).
    Response,
    /// The first token, from the request's start (`--first-token-timeout-s`).
    FirstToken,
    /// The gap between two tokens (`--idle-timeout-s`).
    Idle,
    /// Opening the connection.
    Connect,
}

impl TimeoutPhase {
    /// The phase's name in messages and exports (`request`, `response`, `first_token`,
    /// `idle`, `connect`).
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutPhase::Request => "request",
            TimeoutPhase::Response => "response",
            TimeoutPhase::FirstToken => "first_token",
            TimeoutPhase::Idle => "idle",
            TimeoutPhase::Connect => "connect",
        }
    }
}

impl std::fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Seconds since the Unix epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, the form
/// HTTP requires senders to use); `None` for anything else.
fn http_date_unix_s(v: &str) -> Option<u64> {
    let mut parts = v.split_whitespace();
    let (_, day, month, year, time, zone) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if zone != "GMT" || parts.next().is_some() {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let mut hms = time.split(':').map(|x| x.parse::<i64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if !(1..=31).contains(&day)
        || !(0..24).contains(&h)
        || !(0..60).contains(&m)
        || !(0..61).contains(&s)
    {
        return None;
    }
    let days = crate::civil::days_from_civil(year, month, day);
    u64::try_from(days * 86_400 + h * 3600 + m * 60 + s).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let with = |v: &str| Error::Status {
            status: 429,
            body_excerpt: String::new(),
            headers: vec![("retry-after".into(), v.into())],
        };
        let secs = std::time::Duration::from_secs;
        assert_eq!(with("1").retry_after(0), Some(secs(1)));
        assert_eq!(
            with(" 2.5 ").retry_after(0),
            Some(std::time::Duration::from_millis(2500))
        );
        // 784111777 is Sun, 06 Nov 1994 08:49:37 GMT
        let date = with("Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(date.retry_after(784_111_770), Some(secs(7)));
        assert_eq!(date.retry_after(784_111_800), Some(secs(0)));
        assert_eq!(with("soon").retry_after(0), None);
        assert_eq!(with("-3").retry_after(0), None);
        assert_eq!(Error::status_code(503, "").retry_after(0), None);
    }

    #[test]
    fn numeric_codes_from_statuses_and_error_objects() {
        let server = |c: Option<&str>| Error::Server {
            code: c.map(str::to_owned),
            message: "x".into(),
        };
        assert_eq!(Error::status_code(503, "").numeric_code(), Some(503));
        assert_eq!(server(Some("429")).numeric_code(), Some(429));
        assert_eq!(server(Some("overloaded")).numeric_code(), None);
        assert_eq!(server(None).numeric_code(), None);
    }

    use super::*;

    #[test]
    fn redact_replaces_echoed_secrets_everywhere() {
        let key = "sk-live-0123456789";
        let e = Error::Status {
            status: 401,
            body_excerpt: format!("invalid key {key} (Bearer {key})"),
            headers: vec![("www-authenticate".into(), format!("Bearer {key}"))],
        }
        .redact(&[key, "abc"]);
        let text = e.to_string();
        assert!(!text.contains(key), "{text}");
        assert!(text.contains("invalid key [redacted]"), "{text}");
        let e = Error::Server {
            code: None,
            message: format!("echo {key}"),
        }
        .redact(&[key]);
        assert_eq!(e.to_string(), "server error: echo [redacted]");
        // Short values are not secrets worth blanking words for.
        let e = Error::malformed("a bad chunk").redact(&["bad"]);
        assert!(e.to_string().contains("a bad chunk"));
    }

    #[test]
    fn kinds_and_display() {
        let e = Error::status_code(503, "busy");
        assert_eq!(e.kind(), ErrorKind::HttpStatus);
        assert_eq!(e.status(), Some(503));
        assert_eq!(e.to_string(), "HTTP 503: busy");
        let e = Error::Status {
            status: 400,
            body_excerpt: String::new(),
            headers: vec![("retry-after".into(), "5".into())],
        };
        assert_eq!(
            e.to_string(),
            "HTTP 400: empty body (the server gave no reason) [retry-after: 5]"
        );
        let e = Error::Server {
            code: Some("overloaded".into()),
            message: "try later".into(),
        };
        assert_eq!(e.to_string(), "server error (overloaded): try later");
        assert!(Error::Timeout {
            phase: TimeoutPhase::Request,
            after_ms: 5
        }
        .is_timeout());
        assert_eq!(
            serde_json::to_string(&ErrorKind::MalformedResponse).unwrap(),
            "\"malformed_response\""
        );
    }
}
