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
        // A check that fails, or errs, leaves the builder on the re-encoding path.
        if b.chunks.is_some() && !b.fast_path_checks().unwrap_or(false) {
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
        let Some(body) = self.exact_fast("", 40, &mut rng)? else {
            return Ok(false);
        };
        let prefix = format!("{}\n\n", body.trim_end());
        for (pre, n) in [("", 1usize), ("", 2), ("", 17), ("", 1024), ("", 3001)]
            .into_iter()
            .chain([(prefix.as_str(), 60), (prefix.as_str(), 700)])
        {
            let Some(body) = self.exact_fast(pre, n, &mut rng)? else {
                return Ok(false);
            };
            if self.tokenizer.count(&format!("{pre}{body}"))? != n {
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
        // The fast path takes no prefix or one that ends with a blank line (shared prefixes,
        // trace blocks and earlier turns do, and the one-time checks try that join), so the
        // prompt's first word starts a new pre-token.
        if prefix.is_empty() || prefix.ends_with("\n\n") {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Three bytes to a token, across word boundaries: chunk counts do not add up, so the
    /// builder must fall back to re-encoding and still be exact.
    struct Triples;

    impl Tokenizer for Triples {
        fn encode(&self, text: &str) -> Result<Vec<u32>, Error> {
            let id = |c: &[u8]| {
                c.iter()
                    .enumerate()
                    .fold((c.len() as u32) << 24, |v, (i, b)| {
                        v | (u32::from(*b) << (8 * i))
                    })
            };
            Ok(text.as_bytes().chunks(3).map(id).collect())
        }

        fn decode(&self, ids: &[u32]) -> Result<String, Error> {
            let bytes = ids
                .iter()
                .flat_map(|id| (0..(id >> 24)).map(move |i| (id >> (8 * i)) as u8))
                .collect();
            String::from_utf8(bytes).map_err(|e| Error::Tokenizer {
                name: "triples".into(),
                reason: e.to_string(),
            })
        }

        fn name(&self) -> &str {
            "triples"
        }
    }

    #[test]
    fn a_tokenizer_whose_chunks_do_not_add_up_keeps_the_exact_slow_path() {
        let tok: Arc<dyn Tokenizer> = Arc::new(Triples);
        let mut b = PromptBuilder::new(tok.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!b.is_fast());
        let mut rng = StdRng::seed_from_u64(3);
        for n in [1u32, 5, 64, 700] {
            let body = b.exact("", n, &mut rng).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(tok.count(&body).ok(), Some(n as usize));
            let prefix = "A shared opening.\n\n";
            let body = b
                .exact(prefix, n + 8, &mut rng)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                tok.count(&format!("{prefix}{body}")).ok(),
                Some(n as usize + 8)
            );
        }
    }
}
