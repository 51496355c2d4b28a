//! tiktoken's `o200k_base` (the GPT-4o family's encoding), bundled by `tiktoken-rs`: no files,
//! no network.

use std::sync::Mutex;

use foldhash::HashMap;

use tiktoken_rs::CoreBPE;

use crate::tokenizer::o200k_split::split_ascii;
use crate::tokenizer::Tokenizer;
use crate::Error;

/// Pieces whose token counts are remembered, at most, and the longest piece remembered:
/// words, numbers and short runs of spaces or symbols repeat; a long run is counted each time.
/// At most 65,536 × 64 bytes of keys.
const CACHE_PIECES: usize = 1 << 16;
const CACHE_PIECE_BYTES: usize = 64;

/// The built-in tokenizer.
///
/// Counting (`Tokenizer::count`) is exact and faster than encoding: ASCII text is split into
/// tiktoken's pieces by hand (`o200k_split`, which explains why) and each distinct piece's
/// count is remembered, so that answers made of the same words cost a hash lookup per word.
/// The map hashes with `foldhash` (seeded per process, so a server cannot choose colliding
/// pieces ahead of time): std's SipHash cost about 60,000 instructions per 256-token answer.
pub struct BuiltinTokenizer {
    bpe: CoreBPE,
    name: String,
    counts: Mutex<HashMap<Box<str>, u32>>,
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
            counts: Mutex::new(HashMap::default()),
        })
    }

    /// Tokens in ASCII `text`, piece by piece through the cache; `None` for other text.
    fn count_ascii(&self, text: &str) -> Option<usize> {
        let mut total = 0usize;
        let mut missed = Vec::new();
        {
            // A poisoned cache is still a map of correct counts.
            let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            for piece in split_ascii(text)? {
                match counts.get(piece) {
                    Some(&n) => total += n as usize,
                    None => missed.push(piece),
                }
            }
        }
        if missed.is_empty() {
            return Some(total);
        }
        // Encoded outside the lock; a piece is its own only piece, so its tokens are these.
        let found: Vec<(&str, u32)> = missed
            .into_iter()
            .map(|p| (p, self.bpe.encode_ordinary(p).len() as u32))
            .collect();
        total += found.iter().map(|&(_, n)| n as usize).sum::<usize>();
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        for (piece, n) in found {
            if counts.len() >= CACHE_PIECES {
                break;
            }
            if piece.len() <= CACHE_PIECE_BYTES {
                counts.insert(piece.into(), n);
            }
        }
        Some(total)
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

    fn count(&self, text: &str) -> Result<usize, Error> {
        Ok(self
            .count_ascii(text)
            .unwrap_or_else(|| self.bpe.encode_ordinary(text).len()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    /// A deterministic stream of strings dense in what tells the expression's alternatives
    /// apart: cases, contractions, digits, runs of spaces and line breaks, symbols.
    fn tricky(seed: u64, n: usize) -> Vec<String> {
        const PARTS: &[&str] = &[
            "a", "b", "Z", "Q", "hello", "World", "HTTP", "iPhone", "'s", "'S", "'re", "'Ve",
            "'ll", "'d", "'m", "'t", "'x", "'", "0", "7", "12", "12345", " ", "  ", "   ", "\t",
            "\n", "\r\n", "\n\n", " \n", "\x0b", "\x0c", ".", ",", "!?", "/", "//", "(", ")", "-",
            "_", "@", "#", "$", "%", "^", "&", "*", "\"", "`", "~", "|", "\\", "{", "}", "<", ">",
            "=", "+", ";", ":", "\x00", "\x1f", "\x7f",
        ];
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let len = (x % 12) as usize;
                (0..len)
                    .map(|k| {
                        let h = x.rotate_left(5 * k as u32 + 3)
                            ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                        PARTS[(h % PARTS.len() as u64) as usize]
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn counts_agree_with_tiktoken_on_tricky_strings() {
        let t = BuiltinTokenizer::o200k_base().unwrap();
        for (k, s) in tricky(0x5EED, 20_000).iter().enumerate() {
            let want = t.bpe.encode_ordinary(s).len();
            assert_eq!(t.count(s).unwrap(), want, "string {k}: {s:?}");
            // Asked again, from the cache.
            assert_eq!(t.count(s).unwrap(), want, "string {k} again: {s:?}");
        }
    }

    #[test]
    fn pieces_end_where_tokens_end() {
        // No token crosses a piece's edge: every edge is a token boundary of the whole text.
        let t = BuiltinTokenizer::o200k_base().unwrap();
        for s in tricky(0xC0FFEE, 3_000) {
            let ids = t.bpe.encode_ordinary(&s);
            let mut bounds = vec![0usize];
            for id in &ids {
                let bytes = t.bpe.decode_bytes(&[*id]).unwrap();
                bounds.push(bounds.last().unwrap() + bytes.len());
            }
            let mut at = 0;
            for p in split_ascii(&s).unwrap() {
                at += p.len();
                assert!(
                    bounds.contains(&at),
                    "{s:?}: a piece ends at {at}, tokens at {bounds:?}"
                );
            }
        }
    }

    #[test]
    fn counts_agree_on_prose_and_other_scripts() {
        let t = BuiltinTokenizer::o200k_base().unwrap();
        let prose = crate::corpus::corpus();
        for chunk in prose.as_bytes().chunks(997) {
            let s = std::str::from_utf8(chunk).unwrap_or_default();
            assert_eq!(t.count(s).unwrap(), t.bpe.encode_ordinary(s).len());
        }
        for s in [
            "café au lait",
            "日本語のテキスト",
            "naïve 'résumé'",
            "emoji 🙂 ok",
        ] {
            assert_eq!(t.count(s).unwrap(), t.bpe.encode_ordinary(s).len(), "{s}");
        }
    }
}
