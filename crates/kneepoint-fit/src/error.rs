//! The crate's error type.

/// What went wrong while reading a model's configuration or a catalog, or planning.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model's `config.json` is not JSON (or not an object).
    #[error("the model config is not a JSON object: {source}")]
    ConfigJson {
        /// The parser's complaint.
        #[source]
        source: serde_json::Error,
    },
    /// A field the plan needs is missing or has the wrong type.
    #[error("the model config has no usable `{field}`: {reason}")]
    ConfigField {
        /// The field (or the fields tried).
        field: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The weights' format is not one this planner can size.
    #[error("unsupported weight format {format:?}: {reason}")]
    WeightFormat {
        /// The format named by the config or the caller.
        format: String,
        /// What to do instead.
        reason: String,
    },
    /// An instance catalog could not be read.
    #[error("the instance catalog is not valid {format}: {reason}")]
    Catalog {
        /// TOML or JSON.
        format: &'static str,
        /// The parser's complaint.
        reason: String,
    },
    /// An instance type is not in the catalog.
    #[error("instance type {name:?} is not in the catalog (known: {known})")]
    UnknownInstance {
        /// The name asked for.
        name: String,
        /// The names the catalog has.
        known: String,
    },
    /// A setting is out of range.
    #[error("invalid {field}: {reason}")]
    InvalidSetting {
        /// The setting.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The knee rule refused the predicted curve.
    #[error("the predicted curve could not be judged: {source}")]
    Knee {
        /// The planner's error.
        #[source]
        source: kneepoint_planner::Error,
    },
}
