//! tiktoken's `o200k_base` (the GPT-4o family's encoding), bundled by `tiktoken-rs`: no files,
//! no network.

use tiktoken_rs::CoreBPE;

use crate::tokenizer::Tokenizer;
use crate::Error;

/// The built-in tokenizer.
pub struct BuiltinTokenizer {
    bpe: CoreBPE,
    name: String,
}

impl std::fmt::Debug for BuiltinTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl BuiltinTokenizer {
    /// `o200k_base`.
    pub fn o200k_base() -> Result<Self, Error> {
        let bpe = tiktoken_rs::o200k_base().map_err(|e| Error::Tokenizer {
            name: "builtin:o200k_base".into(),
            reason: e.to_string(),
        })?;
        Ok(BuiltinTokenizer {
            bpe,
            name: "builtin:o200k_base".into(),
        })
    }
}

impl Tokenizer for BuiltinTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>, Error> {
        Ok(self.bpe.encode_ordinary(text))
    }

    fn decode(&self, ids: &[u32]) -> Result<String, Error> {
        self.bpe.decode(ids).map_err(|e| Error::Tokenizer {
            name: self.name.clone(),
            reason: format!("cannot decode {} tokens: {e}", ids.len()),
        })
    }

    fn name(&self) -> &str {
        &self.name
    }
}
