//! Prompts with an exact token count: windows of the corpus's tokens, decoded, re-encoded the
//! way they are sent, and adjusted until the count is exact.

use std::collections::HashSet;
use std::sync::Arc;

use rand::Rng;

use crate::corpus::corpus;
use crate::tokenizer::Tokenizer;
use crate::Error;

/// Builds exact-length prompts from the corpus with one tokenizer.
pub struct PromptBuilder {
    tokenizer: Arc<dyn Tokenizer>,
    ids: Vec<u32>,
    used_offsets: HashSet<usize>,
}

impl std::fmt::Debug for PromptBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PromptBuilder({}, {} corpus tokens)",
            self.tokenizer.name(),
            self.ids.len()
        )
    }
}

impl PromptBuilder {
    /// Tokenizes the corpus once.
    pub fn new(tokenizer: Arc<dyn Tokenizer>) -> Result<Self, Error> {
        let ids = tokenizer.encode(corpus())?;
        if ids.len() < 1024 {
            return Err(Error::Tokenizer {
                name: tokenizer.name().to_owned(),
                reason: format!("the corpus encodes to only {} tokens", ids.len()),
            });
        }
        Ok(PromptBuilder {
            tokenizer,
            ids,
            used_offsets: HashSet::new(),
        })
    }

    /// The tokenizer in use.
    pub fn tokenizer(&self) -> &Arc<dyn Tokenizer> {
        &self.tokenizer
    }

    fn window(&self, start: usize, len: usize) -> Vec<u32> {
        (0..len)
            .map(|i| self.ids[(start + i) % self.ids.len()])
            .collect()
    }

    /// A random offset not used before in this builder (while unused ones remain likely), so
    /// that no two prompts start alike by accident.
    fn offset<R: Rng + ?Sized>(&mut self, rng: &mut R) -> usize {
        for _ in 0..32 {
            let o = rng.random_range(0..self.ids.len());
            if self.used_offsets.insert(o) {
                return o;
            }
        }
        rng.random_range(0..self.ids.len())
    }

    /// Text `body` such that `prefix + body` encodes to exactly `tokens` tokens.
    pub fn exact<R: Rng + ?Sized>(
        &mut self,
        prefix: &str,
        tokens: u32,
        rng: &mut R,
    ) -> Result<String, Error> {
        let n = tokens as usize;
        let p = if prefix.is_empty() {
            0
        } else {
            self.tokenizer.count(prefix)?
        };
        if p > n {
            return Err(Error::ExactLength {
                target: tokens,
                reason: format!("the shared prefix alone has {p} tokens"),
            });
        }
        if p == n {
            return Ok(String::new());
        }
        for _ in 0..24 {
            let start = self.offset(rng);
            let mut len = n - p;
            for _ in 0..12 {
                let body = self.tokenizer.decode(&self.window(start, len))?;
                let body = body.trim_start().to_owned();
                let k = if prefix.is_empty() {
                    self.tokenizer.count(&body)?
                } else {
                    self.tokenizer.count(&format!("{prefix}{body}"))?
                };
                if k == n {
                    return Ok(body);
                }
                let next = len as i64 + n as i64 - k as i64;
                if next < 1 {
                    break;
                }
                len = next as usize;
            }
        }
        Err(Error::ExactLength {
            target: tokens,
            reason: format!(
                "no corpus window re-encodes to exactly {tokens} tokens with {}",
                self.tokenizer.name()
            ),
        })
    }
}
