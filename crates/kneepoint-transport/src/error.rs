//! Errors raised while configuring a transport. Failures of individual requests are
//! [`kneepoint_core::Error`]s instead, recorded per request.

/// A transport could not be built from its configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The base URL or path does not form a valid http(s) URL.
    #[error("invalid endpoint URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given (credentials are never part of it).
        url: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A header name or value is not valid HTTP.
    #[error("invalid header {name:?}: {reason}")]
    InvalidHeader {
        /// The header name.
        name: String,
        /// Why it was rejected (the value is not echoed: it may be a secret).
        reason: String,
    },
    /// AWS credentials could not be found or fetched.
    #[error("AWS credentials: {reason}")]
    Credentials {
        /// What went wrong (never a secret).
        reason: String,
    },
    /// A CA bundle, client certificate or key could not be used.
    #[error("TLS setup{}: {reason}", path.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default())]
    TlsConfig {
        /// The file at fault, when one is.
        path: Option<std::path::PathBuf>,
        /// What was wrong with it (never key material).
        reason: String,
    },
    /// A set of routes that cannot spread requests (none, or weights that are not positive).
    #[error("invalid routes: {reason}")]
    InvalidRoutes {
        /// What is wrong with them.
        reason: String,
    },
    /// An S3 call failed (uploading an archive).
    #[error("S3 {operation} of {key:?} failed: {reason}")]
    S3 {
        /// The API call.
        operation: &'static str,
        /// The object key.
        key: String,
        /// What went wrong (never a secret).
        reason: String,
    },
    /// The TLS configuration could not be built.
    #[error("TLS setup failed")]
    Tls {
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
