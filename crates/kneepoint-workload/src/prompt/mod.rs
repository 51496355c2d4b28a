//! Prompts with an exact token count. The fast path ([`chunks`]) joins corpus chunks whose
//! counts were learnt once, so a prompt costs a few nanoseconds per token; tokenizers whose
//! counts do not add up that way keep the first method: windows of the corpus's tokens,
//! decoded, re-encoded the way they are sent, and adjusted until the count is exact.

mod chunks;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::corpus::corpus;
use crate::tokenizer::Tokenizer;
use crate::Error;
use chunks::Chunks;

/// Distinct shared prefixes whose counts are remembered (a trace's prefixes are mostly new).
const PREFIX_CACHE: usize = 64;

/// Builds exact-length prompts from the corpus with one tokenizer.
pub struct PromptBuilder {
    tokenizer: Arc<dyn Tokenizer>,
    ids: Vec<u32>,
    used_offsets: HashSet<usize>,
    chunks: Option<Chunks>,
    /// Token counts of recent prefixes and of their trailing whitespace.
    prefixes: HashMap<String, (usize, usize)>,
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
        let chunks = Chunks::learn(tokenizer.as_ref(), corpus(), ids.len())?;
        let mut b = PromptBuilder {
            tokenizer,
            ids,
            used_offsets: HashSet::new(),
            chunks,
            prefixes: HashMap::new(),
        };
        if b.chunks.is_some() && !b.fast_path_checks()? {
            b.chunks = None;
        }
        b.used_offsets.clear();
        b.prefixes.clear();
        Ok(b)
    }

    /// Whether this builder joins learnt chunks (`true`) or re-encodes every prompt.
    pub fn is_fast(&self) -> bool {
        self.chunks.is_some()
    }

    /// The one check of the fast path against the tokenizer itself: sample prompts, alone and
    /// after a prefix that ends with a blank line, encoded and counted.
    fn fast_path_checks(&mut self) -> Result<bool, Error> {
        let mut rng = StdRng::seed_from_u64(0x0063_6865_636b);
        let prefix = format!("{}\n\n", self.exact("", 40, &mut rng)?.trim_end());
        for (pre, n) in [("", 1u32), ("", 2), ("", 17), ("", 1024), ("", 3001)]
            .into_iter()
            .chain([(prefix.as_str(), 60u32), (prefix.as_str(), 700)])
        {
            let body = self.exact(pre, n, &mut rng)?;
            if self.tokenizer.count(&format!("{pre}{body}"))? != n as usize {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The count of `prefix` and of its trailing whitespace, remembered for recent prefixes.
    fn prefix_counts(&mut self, prefix: &str) -> Result<(usize, usize), Error> {
        if let Some(&c) = self.prefixes.get(prefix) {
            return Ok(c);
        }
        let ws = &prefix[prefix.trim_end().len()..];
        let c = (
            self.tokenizer.count(prefix)?,
            if ws.is_empty() {
                0
            } else {
                self.tokenizer.count(ws)?
            },
        );
        if self.prefixes.len() >= PREFIX_CACHE {
            self.prefixes.clear();
        }
        self.prefixes.insert(prefix.to_owned(), c);
        Ok(c)
    }

    /// The fast path: `None` when the chunks cannot reach the target (the caller falls back).
    fn exact_fast<R: Rng + ?Sized>(
        &mut self,
        prefix: &str,
        n: usize,
        rng: &mut R,
    ) -> Result<Option<String>, Error> {
        let Some(len) = self.chunks.as_ref().map(Chunks::len) else {
            return Ok(None);
        };
        let (p, ws_count) = self.prefix_counts(prefix)?;
        if p > n {
            return Err(Error::ExactLength {
                target: n as u32,
                reason: format!("the shared prefix alone has {p} tokens"),
            });
        }
        let ws = &prefix[prefix.trim_end().len()..];
        for _ in 0..4 {
            let start = self.offset(rng, len);
            let (Some(chunks), tok) = (self.chunks.as_ref(), &self.tokenizer) else {
                return Ok(None);
            };
            let body = chunks.body(start, n - p, |word, lead| {
                if prefix.is_empty() {
                    return Ok(lead);
                }
                Ok(tok.count(&format!("{ws}{word}"))?.saturating_sub(ws_count))
            })?;
            if body.is_some() {
                return Ok(body);
            }
        }
        Ok(None)
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
    fn offset<R: Rng + ?Sized>(&mut self, rng: &mut R, len: usize) -> usize {
        for _ in 0..32 {
            let o = rng.random_range(0..len);
            if self.used_offsets.insert(o) {
                return o;
            }
        }
        rng.random_range(0..len)
    }

    /// Text `body` such that `prefix + body` encodes to exactly `tokens` tokens.
    pub fn exact<R: Rng + ?Sized>(
        &mut self,
        prefix: &str,
        tokens: u32,
        rng: &mut R,
    ) -> Result<String, Error> {
        let n = tokens as usize;
        // The fast path takes a prefix that ends in whitespace (shared prefixes and trace
        // blocks end with a blank line), so the prompt's first word starts a new pre-token.
        if prefix.is_empty() || prefix.ends_with(|c: char| c.is_whitespace()) {
            if let Some(body) = self.exact_fast(prefix, n, rng)? {
                return Ok(body);
            }
        }
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
            let start = self.offset(rng, self.ids.len());
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
