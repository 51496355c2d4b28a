//! The fast path to an exact-length prompt: the corpus cut once into chunks that each start a
//! word (a space, then a letter), each chunk's token count learnt once, and a prompt built by
//! joining chunks until their counts add up to the target. Nothing is re-encoded per prompt
//! except the join with a shared prefix (its trailing whitespace and the first word).
//!
//! This holds for tokenizers whose pre-tokenizer splits text before a space that starts a word
//! (tiktoken's regexes, GPT-2 style byte-level BPE, SentencePiece's metaspace): the count of a
//! join is then the sum of its chunks' counts. [`Chunks::learn`] checks that on the whole
//! corpus, and the prompt builder checks sample prompts once by encoding them; a tokenizer that
//! fails either check keeps the decode-and-re-encode path.

use std::collections::HashMap;

use crate::tokenizer::Tokenizer;
use crate::Error;

/// One chunk: a byte range of the corpus, its token count in running text, and the count of
/// the same chunk with its leading space removed, as a prompt's first word is written.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u32,
    end: u32,
    count: u16,
    lead: u16,
}

/// The corpus cut into word-starting chunks, with their token counts.
#[derive(Debug)]
pub(crate) struct Chunks {
    text: &'static str,
    spans: Vec<Span>,
}

/// Pairs of chunks that were not neighbours checked by [`Chunks::learn`].
const JOIN_CHECKS: usize = 256;
/// Chunks looked at for a prompt's first word before giving up (a target below every word's
/// count after this prefix).
const HEAD_TRIES: usize = 64;

/// Where a chunk ends: before a space that follows a non-space and precedes a letter.
fn boundaries(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len() / 5);
    for i in 1..b.len().saturating_sub(1) {
        if b[i] == b' ' && !b[i - 1].is_ascii_whitespace() && b[i + 1].is_ascii_alphabetic() {
            out.push(i);
        }
    }
    out
}

fn small(n: usize) -> Option<u16> {
    u16::try_from(n).ok()
}

impl Chunks {
    /// Cuts `text` (whose whole encoding has `whole` tokens) and counts each distinct chunk
    /// once. `None` when the chunks' counts do not add up to the whole (the tokenizer does not
    /// split where the chunks do), when a chunk is too long, or when no chunk is one token
    /// (nothing to finish a prompt exactly with).
    pub(crate) fn learn(
        tok: &dyn Tokenizer,
        text: &'static str,
        whole: usize,
    ) -> Result<Option<Chunks>, Error> {
        let cuts = boundaries(text);
        let Some(&first_cut) = cuts.first() else {
            return Ok(None);
        };
        let mut known: HashMap<&str, (u16, u16)> = HashMap::new();
        let mut spans = Vec::with_capacity(cuts.len());
        // The last chunk ends before the corpus's trailing whitespace, so that a prompt that
        // wraps round joins it to the first chunk as any two chunks join.
        let end = text.trim_end().len();
        let mut total = tok.count(&text[..first_cut])?;
        if end < text.len() {
            total += tok.count(&text[end..])?;
        }
        let ends = cuts.iter().skip(1).copied().chain([end]);
        for (start, end) in cuts.iter().copied().zip(ends) {
            let piece = &text[start..end];
            let (count, lead) = match known.get(piece) {
                Some(&c) => c,
                None => {
                    let c = (small(tok.count(piece)?), small(tok.count(&piece[1..])?));
                    let (Some(count), Some(lead)) = c else {
                        return Ok(None);
                    };
                    known.insert(piece, (count, lead));
                    (count, lead)
                }
            };
            total += usize::from(count);
            let (Ok(start), Ok(end)) = (u32::try_from(start), u32::try_from(end)) else {
                return Ok(None);
            };
            spans.push(Span {
                start,
                end,
                count,
                lead,
            });
        }
        let fills = spans.iter().any(|s| s.count == 1);
        if total != whole || !fills || spans.iter().any(|s| s.count == 0 || s.lead == 0) {
            return Ok(None);
        }
        let chunks = Chunks { text, spans };
        Ok(chunks.joins_add_up(tok)?.then_some(chunks))
    }

    /// Prompts join chunks that were not neighbours in the corpus (after passing over one that
    /// would overshoot, or wrapping round from the last to the first): a spread of such pairs
    /// must count as the sum of their parts.
    fn joins_add_up(&self, tok: &dyn Tokenizer) -> Result<bool, Error> {
        let n = self.spans.len();
        let pairs = (0..JOIN_CHECKS).map(|k| (k * 7919 % n, (k * 104_729 + 1) % n));
        for (i, j) in [(n - 1, 0)].into_iter().chain(pairs) {
            let (a, b) = (self.piece(i), self.piece(j));
            let sum = usize::from(self.spans[i].count) + usize::from(self.spans[j].count);
            if tok.count(&format!("{a}{b}"))? != sum {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// How many chunks there are (a prompt may start at any of them).
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    fn piece(&self, i: usize) -> &'static str {
        let s = self.spans[i];
        &self.text[s.start as usize..s.end as usize]
    }

    /// A body of exactly `target` tokens starting at chunk `start` (its first word without the
    /// leading space). `first` gives the first chunk's count as it will be sent: with no prefix
    /// its `lead` count, after a prefix what the join adds. Chunks that would overshoot are
    /// passed over, so the body ends exactly on the target. `None` when the corpus holds no way
    /// to reach it (a target below every first word's count).
    pub(crate) fn body(
        &self,
        start: usize,
        target: usize,
        mut first: impl FnMut(&'static str, usize) -> Result<usize, Error>,
    ) -> Result<Option<String>, Error> {
        let n = self.spans.len();
        if target == 0 {
            return Ok(Some(String::new()));
        }
        if n == 0 {
            return Ok(None);
        }
        // The first word: the first chunk from `start` on that fits.
        let mut at = start % n;
        let mut head = None;
        for _ in 0..n.min(HEAD_TRIES) {
            let word = &self.piece(at)[1..];
            let k = first(word, usize::from(self.spans[at].lead))?;
            if k >= 1 && k <= target {
                head = Some((word, k));
                break;
            }
            at = (at + 1) % n;
        }
        let Some((word, mut have)) = head else {
            return Ok(None);
        };
        let mut out = String::with_capacity(target.min(1 << 20) * 6);
        out.push_str(word);
        // The rest: running chunks, each counted as learnt; a full lap without progress means
        // no chunk fits (impossible while a one-token chunk exists, which `learn` checked).
        let mut idle = 0usize;
        while have < target {
            at = (at + 1) % n;
            let s = self.spans[at];
            let k = usize::from(s.count);
            if have + k <= target {
                out.push_str(&self.text[s.start as usize..s.end as usize]);
                have += k;
                idle = 0;
            } else {
                idle += 1;
                if idle > n {
                    return Ok(None);
                }
            }
        }
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_start_at_a_space_before_a_letter_after_a_non_space() {
        let text = "One two, three.\n\nFour  five 6 seven";
        let cuts = boundaries(text);
        let starts: Vec<&str> = cuts.iter().map(|&c| &text[c..c + 2]).collect();
        assert_eq!(starts, vec![" t", " t", " s"]);
        // "  five" (two spaces) and " 6" start no chunk.
        assert!(!cuts.contains(&text.find(" five").unwrap_or(0)));
    }
}
