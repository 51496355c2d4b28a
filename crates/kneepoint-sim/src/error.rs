//! The simulator's error type.

/// Why the simulator could not start or was misconfigured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No built-in profile has this name.
    #[error("unknown simulator profile {name:?} (known: calibrated, fast)")]
    UnknownProfile {
        /// The name asked for.
        name: String,
    },
    /// A profile parameter is out of range.
    #[error("invalid simulator profile: {field} {reason}")]
    InvalidProfile {
        /// The parameter.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The engine thread could not be started.
    #[error("cannot start the engine thread")]
    Thread {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The options ask for a protocol this build leaves out.
    #[error("{what} needs kneepoint-sim's `{feature}` feature")]
    FeatureOff {
        /// What was asked for.
        what: &'static str,
        /// The cargo feature that provides it.
        feature: &'static str,
    },
}
