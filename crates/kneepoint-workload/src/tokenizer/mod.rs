//! Tokenizers: the built-in offline one (tiktoken's `o200k_base`, as AIPerf's `builtin`) and
//! Hugging Face `tokenizer.json` files, loaded from a path or resolved offline from the local
//! Hugging Face cache. Prompts are counted the way they are sent: no special tokens.

#[cfg(feature = "builtin-tokenizer")]
mod builtin;
#[cfg(feature = "hf-tokenizer")]
mod hf;
#[cfg(feature = "builtin-tokenizer")]
mod o200k_split;
mod pieces;

use std::sync::Arc;

#[cfg(feature = "builtin-tokenizer")]
pub use builtin::BuiltinTokenizer;
#[cfg(feature = "hf-tokenizer")]
pub use hf::{hf_cache_candidates, HfTokenizer};

use crate::Error;
pub use pieces::{pieces, PIECE_BYTES};

/// Encodes and decodes text without special tokens.
pub trait Tokenizer: Send + Sync {
    /// Token ids of `text`.
    fn encode(&self, text: &str) -> Result<Vec<u32>, Error>;
    /// Text of `ids`.
    fn decode(&self, ids: &[u32]) -> Result<String, Error>;
    /// A short name for reports (`builtin:o200k_base`, a path, a model id).
    fn name(&self) -> &str;
    /// Tokens in `text`.
    fn count(&self, text: &str) -> Result<usize, Error> {
        Ok(self.encode(text)?.len())
    }
}

/// Loads a tokenizer from a spec: `builtin` (or empty) for tiktoken's `o200k_base`, a path to a
/// `tokenizer.json` (or a directory holding one), or a Hugging Face model id (`org/name`)
/// resolved offline from the local cache (`HF_HUB_CACHE`, `HF_HOME/hub`,
/// `~/.cache/huggingface/hub`). Each kind needs its feature (`builtin-tokenizer`,
/// `hf-tokenizer`, both on by default); without it the spec is refused with the feature's name.
pub fn load_tokenizer(spec: &str) -> Result<Arc<dyn Tokenizer>, Error> {
    let spec = spec.trim();
    if spec.is_empty() || spec == "builtin" || spec == "o200k_base" {
        return builtin();
    }
    hugging_face(spec)
}

#[cfg(feature = "builtin-tokenizer")]
fn builtin() -> Result<Arc<dyn Tokenizer>, Error> {
    Ok(Arc::new(BuiltinTokenizer::o200k_base()?))
}

#[cfg(not(feature = "builtin-tokenizer"))]
fn builtin() -> Result<Arc<dyn Tokenizer>, Error> {
    Err(Error::Tokenizer {
        name: "builtin".into(),
        reason: "kneepoint-workload was built without its `builtin-tokenizer` feature".into(),
    })
}

#[cfg(not(feature = "hf-tokenizer"))]
fn hugging_face(spec: &str) -> Result<Arc<dyn Tokenizer>, Error> {
    Err(Error::Tokenizer {
        name: spec.into(),
        reason: "kneepoint-workload was built without its `hf-tokenizer` feature".into(),
    })
}

#[cfg(feature = "hf-tokenizer")]
fn hugging_face(spec: &str) -> Result<Arc<dyn Tokenizer>, Error> {
    let path = std::path::Path::new(spec);
    if path.is_file() {
        return Ok(Arc::new(HfTokenizer::from_file(path)?));
    }
    if path.is_dir() {
        return Ok(Arc::new(HfTokenizer::from_file(
            &path.join("tokenizer.json"),
        )?));
    }
    Ok(Arc::new(HfTokenizer::from_cache(spec)?))
}

/// Adapts a [`Tokenizer`] to the runner's [`kneepoint_core::TokenCounter`], so output text is
/// counted with the same tokenizer as the prompts.
#[derive(Clone)]
pub struct TokenizerCounter(pub Arc<dyn Tokenizer>);

impl std::fmt::Debug for TokenizerCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenizerCounter({})", self.0.name())
    }
}

impl kneepoint_core::TokenCounter for TokenizerCounter {
    /// Long texts are counted in pieces of at most [`PIECE_BYTES`], so that memory and time
    /// stay bounded whatever the text's shape (see [`pieces`]).
    fn count(&self, text: &str) -> usize {
        // A text the tokenizer cannot encode falls back to the word estimate.
        pieces(text, PIECE_BYTES)
            .map(|p| {
                self.0
                    .count(p)
                    .unwrap_or_else(|_| kneepoint_core::approx_token_count(p))
            })
            .sum()
    }

    fn name(&self) -> &str {
        self.0.name()
    }
}
