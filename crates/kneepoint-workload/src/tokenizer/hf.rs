//! Hugging Face `tokenizer.json` files through the `tokenizers` crate (pure Rust: the
//! `fancy-regex` backend, no Oniguruma, no network).

use std::path::{Path, PathBuf};

use crate::tokenizer::Tokenizer;
use crate::Error;

/// A Hugging Face tokenizer.
pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
    name: String,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HfTokenizer({})", self.name)
    }
}

/// Where a model id's `tokenizer.json` may be in the local cache, in search order:
/// `$HF_HUB_CACHE`, `$HF_HOME/hub`, `$XDG_CACHE_HOME/huggingface/hub`,
/// `~/.cache/huggingface/hub`; each as `models--ORG--NAME/snapshots/*/tokenizer.json`.
pub fn hf_cache_candidates(model_id: &str) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(p) = std::env::var_os("HF_HUB_CACHE") {
        roots.push(PathBuf::from(p));
    }
    if let Some(p) = std::env::var_os("HF_HOME") {
        roots.push(PathBuf::from(p).join("hub"));
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME") {
        roots.push(PathBuf::from(p).join("huggingface").join("hub"));
    }
    if let Some(p) = std::env::var_os("HOME") {
        roots.push(
            PathBuf::from(p)
                .join(".cache")
                .join("huggingface")
                .join("hub"),
        );
    }
    let folder = format!("models--{}", model_id.replace('/', "--"));
    roots
        .into_iter()
        .map(|r| r.join(&folder).join("snapshots"))
        .collect()
}

impl HfTokenizer {
    /// Loads a `tokenizer.json`. Its truncation and padding settings are dropped: an
    /// embedding model's file (sentence-transformers' BERT family) often truncates to and pads
    /// to its context, which would make every text count that many tokens.
    pub fn from_file(path: &Path) -> Result<Self, Error> {
        let failed = |e: tokenizers::Error| Error::Tokenizer {
            name: path.display().to_string(),
            reason: e.to_string(),
        };
        let mut inner = tokenizers::Tokenizer::from_file(path).map_err(failed)?;
        inner.with_truncation(None).map_err(failed)?;
        inner.with_padding(None);
        Ok(HfTokenizer {
            inner,
            name: path.display().to_string(),
        })
    }

    /// Resolves `model_id` (`org/name`) in the local Hugging Face cache, offline. The newest
    /// snapshot holding a `tokenizer.json` wins; the error names every folder tried.
    pub fn from_cache(model_id: &str) -> Result<Self, Error> {
        let tried = hf_cache_candidates(model_id);
        for snapshots in &tried {
            let Ok(entries) = std::fs::read_dir(snapshots) else {
                continue;
            };
            let mut found: Vec<(std::time::SystemTime, PathBuf)> = entries
                .flatten()
                .map(|e| e.path().join("tokenizer.json"))
                .filter(|p| p.is_file())
                .map(|p| {
                    let t = std::fs::metadata(&p)
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    (t, p)
                })
                .collect();
            found.sort();
            if let Some((_, path)) = found.pop() {
                let mut t = Self::from_file(&path)?;
                t.name = model_id.to_owned();
                return Ok(t);
            }
        }
        Err(Error::TokenizerNotFound {
            spec: model_id.to_owned(),
            tried,
        })
    }
}

impl Tokenizer for HfTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>, Error> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| Error::Tokenizer {
                name: self.name.clone(),
                reason: e.to_string(),
            })
    }

    fn decode(&self, ids: &[u32]) -> Result<String, Error> {
        self.inner.decode(ids, false).map_err(|e| Error::Tokenizer {
            name: self.name.clone(),
            reason: e.to_string(),
        })
    }

    fn name(&self) -> &str {
        &self.name
    }
}
