//! The workload crate's error type.

use std::path::PathBuf;

/// A workload could not be configured or produce requests.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The audio clips asked for cannot be made.
    #[error("invalid audio: {reason}")]
    InvalidAudio {
        /// Why.
        reason: String,
    },
    /// The images asked for cannot be made.
    #[error("invalid images: {reason}")]
    InvalidImages {
        /// Why.
        reason: String,
    },
    /// A length distribution parameter is out of range.
    #[error("invalid {what} distribution: {reason}")]
    InvalidDistribution {
        /// `input length`, `output length` or `mixture`.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// A tokenizer failed to load, encode or decode.
    #[error("tokenizer {name}: {reason}")]
    Tokenizer {
        /// The tokenizer (name or path).
        name: String,
        /// What went wrong.
        reason: String,
    },
    /// A model id was not found in the local Hugging Face cache.
    #[error("no tokenizer.json for {spec:?} in the local Hugging Face cache; tried: {}", tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    TokenizerNotFound {
        /// The model id.
        spec: String,
        /// Every snapshots folder looked in.
        tried: Vec<PathBuf>,
    },
    /// No prompt of exactly the asked length could be built.
    #[error("cannot build a prompt of exactly {target} tokens: {reason}")]
    ExactLength {
        /// The target.
        target: u32,
        /// Why.
        reason: String,
    },
    /// A dataset file could not be read or has a malformed record.
    #[error("{}{}: {reason}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Dataset {
        /// The file.
        path: PathBuf,
        /// The 1-based line, for line formats (for JSON, where the parser stopped).
        line: Option<usize>,
        /// What is wrong.
        reason: String,
    },
    /// A shared-prefix setting is impossible.
    #[error("invalid shared prefix: {reason}")]
    InvalidPrefix {
        /// Why.
        reason: String,
    },
}
