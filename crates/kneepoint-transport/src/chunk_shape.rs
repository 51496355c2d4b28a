//! The shape of a stream's chunks: after the first few, a server sends the same bytes around a
//! different piece of text (`{"id":"…","object":"chat.completion.chunk",…,"delta":{"content":"`
//! *text* `"},"finish_reason":null}]}`), and around values the reader skips that may change
//! from chunk to chunk (a `"created"` second, a send stamp, OpenAI's `"obfuscation"` padding).
//! A chunk whose bytes match the last plain chunk's everywhere else is that chunk with a new
//! text, and is read by comparing the fixed bytes and scanning the text and the skipped
//! values, about a tenth of a full read's instructions (callgrind: ~2,900 per 190-byte chunk
//! read in full).
//!
//! Why it gives the full reader's answer: the reader is a deterministic left-to-right pass. Up
//! to the first varying value, the bytes (hence its state) are those of the learned chunk. A
//! skipped value (a number by JSON's grammar, or a plain string: no quote, backslash or control
//! byte, both checked) leaves the reader in the same state whatever its digits or letters, so
//! past it the bytes and the state are again the learned chunk's; the text is a plain string
//! too, and only becomes the event's text. So the only difference in the answer is the text
//! itself. A differential test checks this against the full reader over generated streams and
//! mutations, and the fuzz corpus does over every `sse_stream` input (`stream_chunks_agree`).
//!
//! A stream whose chunks differ in more than skipped values (say `logprobs` arrays that change
//! length) misses the shape on every chunk; a miss stops at the first differing byte, so it
//! costs little beside the full read that follows.

use std::ops::Range;

use kneepoint_core::{Chunk, ResponseEvent};

use crate::fast_chunk::{number_len, read_chunk_noting, stop_at, Hole, Skipped, TextKind};

/// More varying values than this and the chunk is read in full each time.
const MAX_HOLES: usize = 16;

/// What fills one gap of the learned chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gap {
    /// A value the reader skips.
    Skipped(Skipped),
    /// The event's text.
    Text,
}

/// The last plain chunk of one stream, and the gaps in it (in order) that the next chunks
/// may fill differently.
#[derive(Debug, Default)]
pub(crate) struct ChunkShape {
    learned: String,
    gaps: Vec<(Range<usize>, Gap)>,
    kind: Option<TextKind>,
    /// Scratch for the full reader's skipped values.
    holes: Vec<Hole>,
}

impl ChunkShape {
    /// The text of `data` when `data` is the learned chunk with other plain, non-empty text
    /// and other skipped values of the same kinds.
    fn text_of<'a>(&self, data: &'a str) -> Option<&'a str> {
        self.kind?;
        let b = data.as_bytes();
        let (mut at, mut from, mut text) = (0, 0, None);
        for (range, gap) in &self.gaps {
            let fixed = self.learned.as_bytes().get(from..range.start)?;
            if !b.get(at..)?.starts_with(fixed) {
                return None;
            }
            at += fixed.len();
            let rest = &b[at..];
            let len = match gap {
                Gap::Skipped(Skipped::Number) => number_len(rest)?,
                Gap::Skipped(Skipped::Str) | Gap::Text => {
                    let end = stop_at(rest)?;
                    (rest[end] == b'"').then_some(end)?
                }
            };
            if *gap == Gap::Text {
                text = Some(data.get(at..at + len).filter(|t| !t.is_empty())?);
            }
            at += len;
            from = range.end;
        }
        let tail = self.learned.as_bytes().get(from..)?;
        (b.get(at..)? == tail).then_some(text?)
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
        match read_chunk_noting(data, out, Some(&mut self.holes)) {
            None => false,
            Some(span) => {
                if let Some((text, kind)) = span.filter(|_| self.holes.len() <= MAX_HOLES) {
                    self.learned.clear();
                    self.learned.push_str(data);
                    self.gaps.clear();
                    self.gaps.extend(
                        self.holes
                            .iter()
                            .map(|(r, k)| (r.clone(), Gap::Skipped(*k))),
                    );
                    // The text is no skipped value: it goes in its place among them.
                    let at = self.gaps.partition_point(|(r, _)| r.start < text.start);
                    self.gaps.insert(at, (text, Gap::Text));
                    self.kind = Some(kind);
                } else {
                    self.kind = None;
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
            chunk("c1", r#"{"content":" x","content":" y"}"#, "null"),
            chunk("c1", r#"{"content":"x"},"x":{"content":"y"}"#, "null"),
        ] {
            let mut s = ChunkShape::default();
            shaped(&mut s, &chunk("c1", r#"{"content":"w"}"#, "null"));
            assert!(s.kind.is_some());
            assert_eq!(s.text_of(&c), None, "{c}");
            assert_eq!(shaped(&mut s, &c), full(&c), "{c}");
        }
        // Skipped values may change from chunk to chunk (an id, a second, a send stamp,
        // padding), as long as each stays a plain string or a number.
        for (learn, next) in [
            (chunk("c1", r#"{"content":"w"}"#, "null"), chunk("c2", r#"{"content":" x"}"#, "null")),
            (
                r#"{"id":"a","created":17,"sent_ns":1796,"obfuscation":"Qx","choices":[{"index":0,"delta":{"content":"w"},"finish_reason":null}]}"#.to_owned(),
                r#"{"id":"a","created":18,"sent_ns":-2.5e3,"obfuscation":"","choices":[{"index":0,"delta":{"content":"yz"},"finish_reason":null}]}"#.to_owned(),
            ),
        ] {
            let mut s = ChunkShape::default();
            shaped(&mut s, &learn);
            assert!(s.text_of(&next).is_some(), "{next}");
            assert_eq!(shaped(&mut s, &next), full(&next), "{next}");
        }
        // ...but not when one becomes another kind of value, or something the reader reads.
        let learn = r#"{"created":17,"object":"chunk","choices":[{"delta":{"content":"w"}}]}"#;
        for next in [
            r#"{"created":"17","object":"chunk","choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"created":1 7,"object":"chunk","choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"created":017,"object":"chunk","choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"created":17.,"object":"chunk","choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"created":null,"object":"chunk","choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"created":17,"object":"error","choices":[{"delta":{"content":"x"}}]}"#,
        ] {
            let mut s = ChunkShape::default();
            shaped(&mut s, learn);
            assert!(s.kind.is_some());
            assert_eq!(s.text_of(next), None, "{next}");
            assert_eq!(shaped(&mut s, next), full(next), "{next}");
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
            // Skipped values that vary per chunk: the id (a string) and the second (a number).
            let chunk = |rng: &mut rand::rngs::StdRng, d: &str| {
                let id = ["c", "c1", "", "xyz"][rng.random_range(0..4)];
                let n = ["1796163411", "0", "-3", "1.5e9", "12"][rng.random_range(0..5)];
                chunk(id, d, "null").replace("1796163411", n)
            };
            let d = delta(&mut rng);
            let learn = chunk(&mut rng, &d);
            shaped(&mut shape, &learn);
            for _ in 0..4 {
                let d = delta(&mut rng);
                let mut b = chunk(&mut rng, &d).into_bytes();
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
