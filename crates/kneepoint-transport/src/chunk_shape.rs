//! The shape of a stream's chunks: after the first few, a server sends the same bytes around a
//! different piece of text (`{"id":"…","object":"chat.completion.chunk",…,"delta":{"content":"`
//! *text* `"},"finish_reason":null}]}`). A chunk whose bytes match the last plain chunk's
//! around its text is that chunk with the new text, and is read by comparing the two ends and
//! scanning the text, about a tenth of a full read's instructions (callgrind: ~2,900 per
//! 190-byte chunk read in full).
//!
//! Why it gives the full reader's answer: the reader is a deterministic left-to-right pass. Up
//! to the text, the bytes (hence its state) are those of the learned chunk. The text is a plain
//! string (no quote, backslash or control byte, checked), so the reader stops at the quote
//! that opens the learned suffix, and from there the bytes are again the learned chunk's. The
//! only difference is the text itself, which only becomes the event's text. A differential test
//! checks this against the full reader over generated streams and mutations.

use std::ops::Range;

use kneepoint_core::{Chunk, ResponseEvent};

use crate::fast_chunk::{read_chunk, stop_at, TextKind};

/// The last plain chunk of one stream and where its text was.
#[derive(Debug, Default)]
pub(crate) struct ChunkShape {
    learned: String,
    text: Range<usize>,
    kind: Option<TextKind>,
}

impl ChunkShape {
    /// The text of `data` when `data` is the learned chunk with other plain, non-empty text.
    fn text_of<'a>(&self, data: &'a str) -> Option<&'a str> {
        self.kind?;
        let (prefix, suffix) = (
            self.learned.get(..self.text.start)?,
            self.learned.get(self.text.end..)?,
        );
        let end = data.len().checked_sub(suffix.len())?;
        if end <= prefix.len() || !data.starts_with(prefix) || !data.ends_with(suffix) {
            return None;
        }
        let text = data.get(prefix.len()..end)?;
        stop_at(text.as_bytes()).is_none().then_some(text)
    }

    /// Appends the events of one chunk's `data` to `out`, as
    /// [`parse_chunk`](crate::fast_chunk::parse_chunk) does, learning its shape when it is
    /// plain; `false` (and `out` untouched) when the full reader declines the chunk.
    pub(crate) fn parse(&mut self, data: &str, out: &mut Vec<ResponseEvent>) -> bool {
        if let (Some(text), Some(kind)) = (self.text_of(data), self.kind) {
            out.push(ResponseEvent::Chunk(match kind {
                TextKind::Answer => Chunk::content(text),
                TextKind::Reasoning => Chunk::reasoning(text),
            }));
            return true;
        }
        match read_chunk(data, out) {
            None => false,
            Some(span) => {
                self.kind = span.as_ref().map(|s| s.1);
                if let Some((text, _)) = span {
                    self.learned.clear();
                    self.learned.push_str(data);
                    self.text = text;
                }
                true
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::fast_chunk::parse_chunk;
    use rand::{Rng, SeedableRng};

    fn full(data: &str) -> Option<Vec<ResponseEvent>> {
        let mut v = Vec::new();
        parse_chunk(data, &mut v).then_some(v)
    }

    fn shaped(shape: &mut ChunkShape, data: &str) -> Option<Vec<ResponseEvent>> {
        let mut v = Vec::new();
        shape.parse(data, &mut v).then_some(v)
    }

    fn chunk(id: &str, delta: &str, finish: &str) -> String {
        format!(
            r#"{{"id":"{id}","object":"chat.completion.chunk","created":1796163411,"model":"m","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
        )
    }

    #[test]
    fn a_streams_chunks_are_read_by_shape_after_the_first() {
        let mut shape = ChunkShape::default();
        let first = chunk("c1", r#"{"role":"assistant","content":""}"#, "null");
        assert_eq!(shaped(&mut shape, &first), full(&first));
        assert!(shape.kind.is_none(), "an empty text teaches nothing");
        for word in [" the", " model", " é日本", " a"] {
            let c = chunk("c1", &format!(r#"{{"content":"{word}"}}"#), "null");
            assert_eq!(shaped(&mut shape, &c), full(&c), "{c}");
            assert_eq!(shape.kind, Some(TextKind::Answer));
            assert_eq!(shape.text_of(&c), Some(word));
        }
        // What the shape must not answer for: the full reader reads each.
        for c in [
            chunk("c1", r#"{"content":"a\"b"}"#, "null"),
            chunk("c1", r#"{"content":"a\nb"}"#, "null"),
            chunk("c1", r#"{"content":""}"#, "null"),
            chunk("c1", r#"{"content":" x"}"#, r#""stop""#),
            chunk("c2", r#"{"content":" x"}"#, "null"),
            chunk("c1", r#"{"content":" x","content":" y"}"#, "null"),
            chunk("c1", r#"{"content":"x"},"x":{"content":"y"}"#, "null"),
        ] {
            let mut s = ChunkShape::default();
            shaped(&mut s, &chunk("c1", r#"{"content":"w"}"#, "null"));
            assert!(s.kind.is_some());
            assert_eq!(s.text_of(&c), None, "{c}");
            assert_eq!(shaped(&mut s, &c), full(&c), "{c}");
        }
        // A completion's text and a reasoning delta have shapes too.
        for (learn, next, want) in [
            (
                r#"{"choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null}]}"#,
                r#"{"choices":[{"index":0,"text":" bc","logprobs":null,"finish_reason":null}]}"#,
                Chunk::content(" bc"),
            ),
            (
                r#"{"choices":[{"delta":{"reasoning":"hm"},"finish_reason":null}]}"#,
                r#"{"choices":[{"delta":{"reasoning":" so"},"finish_reason":null}]}"#,
                Chunk::reasoning(" so"),
            ),
        ] {
            let mut s = ChunkShape::default();
            shaped(&mut s, learn);
            assert!(s.text_of(next).is_some(), "{next}");
            assert_eq!(shaped(&mut s, next), Some(vec![ResponseEvent::Chunk(want)]));
            assert_eq!(shaped(&mut s, next), full(next));
        }
        // A chunk the full reader declines is declined, and the shape is kept.
        let before = shape.learned.clone();
        assert_eq!(shaped(&mut shape, r#"{"choices":[],"usage":{}}"#), None);
        assert_eq!(shape.learned, before);
    }

    /// Random streams, chunks mutated after the shape is learned: the shaped reader always
    /// gives the full reader's answer.
    #[test]
    fn shaped_reads_never_disagree_with_full_reads() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        let alphabet = b"{}[]\":,0123456789 \\ncontentx\x01";
        let (mut by_shape, mut total) = (0, 0);
        for _ in 0..4_000 {
            let mut shape = ChunkShape::default();
            let word = |rng: &mut rand::rngs::StdRng| -> String {
                (0..rng.random_range(1..6))
                    .map(|_| char::from(b"ab \xe9"[rng.random_range(0..4)]))
                    .collect()
            };
            // The answer, either reasoning field, the answer beside null reasoning, or a
            // completion's text.
            let field = [
                r#"{"content":"@"}"#,
                r#"{"reasoning_content":"@"}"#,
                r#"{"reasoning":"@","content":null}"#,
                r#"{"reasoning_content":null,"content":"@"}"#,
                // A completion's `text` beside an empty delta.
                r#"{},"text":"@""#,
            ][rng.random_range(0..5)];
            let delta = |rng: &mut rand::rngs::StdRng| field.replace('@', &word(rng));
            let learn = chunk("c", &delta(&mut rng), "null");
            shaped(&mut shape, &learn);
            for _ in 0..4 {
                let mut b = chunk("c", &delta(&mut rng), "null").into_bytes();
                for _ in 0..rng.random_range(0..3) {
                    let at = rng.random_range(0..=b.len());
                    match rng.random_range(0..3) {
                        0 if at < b.len() => {
                            b.remove(at);
                        }
                        1 if at < b.len() => {
                            b[at] = alphabet[rng.random_range(0..alphabet.len())];
                        }
                        _ => b.insert(at, alphabet[rng.random_range(0..alphabet.len())]),
                    }
                }
                let Ok(c) = String::from_utf8(b) else {
                    continue;
                };
                total += 1;
                by_shape += usize::from(shape.text_of(&c).is_some());
                assert_eq!(shaped(&mut shape, &c), full(&c), "{c}");
            }
        }
        assert!(
            by_shape > 2_000 && by_shape < total,
            "{by_shape} of {total}"
        );
    }
}
