//! The hot path of streaming: one OpenAI-compatible stream chunk
//! (`{"id":…,"choices":[{"delta":{"content":"…"},"finish_reason":null}],…}`) read in one pass
//! over its bytes, without serde's per-field machinery or an allocation per skipped string.
//!
//! Hand-written because the chunk decoder is most of the client's CPU per token: through
//! `serde_json`'s derive it cost about 5,100 instructions per 190-byte chunk (callgrind), half
//! of a 256-token stream's client cost. This reader is deliberately narrow: it answers only
//! for chunks that are plain JSON objects with `choices` (and keys it skips), no escape in any
//! string, no `usage` (but `null`), `error`, pooling data or whole `message`, no duplicate key, nesting
//! under 64 levels. For anything else it says `None` and [`crate::parse::parse_body`] (for a
//! stream's chunks, `parse_stream_chunk`) decodes the chunk with `serde_json` as before, so every answer it gives is the one serde would give
//! (a differential test over generated and mutated chunks checks this).

use kneepoint_core::{Chunk, ResponseEvent};

/// Deepest nesting the skipper follows before handing the chunk to serde.
const MAX_DEPTH: usize = 64;

/// Bytes that end a plain string's scan: the closing quote, an escape, a control character.
static STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// The first byte of `b` that [`STOP`] marks, eight bytes at a time (the classic "has a zero
/// byte" bit trick, whose lowest set bit is exact), the tail by table.
pub(crate) fn stop_at(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let mut i = 0;
    while let Some(w) = b.get(i..i + 8) {
        let mut x = [0u8; 8];
        x.copy_from_slice(w);
        let x = u64::from_le_bytes(x);
        let hit = zero(x ^ (ONES * u64::from(b'"')))
            | zero(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
        if hit != 0 {
            return Some(i + (hit.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b[i..].iter().position(|&c| STOP[c as usize]).map(|k| i + k)
}

/// What a skipped scalar value was: the reader checks its grammar and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skipped {
    /// A number (JSON's grammar).
    Number,
    /// A plain string's contents (between its quotes).
    Str,
}

/// Where a skipped scalar value lay in a chunk's bytes (a string: its contents), and which.
pub(crate) type Hole = (std::ops::Range<usize>, Skipped);

struct Reader<'a, 'h> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    /// When set, every scalar value [`Reader::skip`] passes over is noted here.
    holes: Option<&'h mut Vec<Hole>>,
}

/// The length of the JSON number at the start of `b` (no whitespace before it).
pub(crate) fn number_len(b: &[u8]) -> Option<usize> {
    if b.first().is_none_or(|c| !matches!(c, b'-' | b'0'..=b'9')) {
        return None;
    }
    let mut r = Reader {
        s: "",
        b,
        i: 0,
        holes: None,
    };
    r.number().map(|()| r.i)
}

/// `None`: not a chunk this reader answers for (serde decides).
type R<T> = Option<T>;

impl<'a> Reader<'a, '_> {
    fn ws(&mut self) {
        while let Some(c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> R<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> R<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string without escapes or control characters, borrowed (the opening quote next).
    /// Strings here are short (keys, ids, one token's text): a table lookup per byte beats a
    /// vectorised search's setup.
    fn string(&mut self) -> R<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let end = start + stop_at(&self.b[start..])?;
        if self.b[end] != b'"' {
            return None;
        }
        self.i = end + 1;
        // Both ends are ASCII quotes: the slice is on character boundaries.
        self.s.get(start..end)
    }

    fn literal(&mut self, word: &[u8]) -> R<()> {
        self.ws();
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// `null` (→ `None`) or a string.
    fn nullable_string(&mut self) -> R<Option<&'a str>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            Some(None)
        } else {
            self.string().map(Some)
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.i - start
    }

    /// A number by JSON's grammar.
    fn number(&mut self) -> R<()> {
        self.ws();
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match self.b.get(self.i)? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            (self.digits() > 0).then_some(())?;
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            (self.digits() > 0).then_some(())?;
        }
        Some(())
    }

    /// Skips any value.
    fn skip(&mut self, depth: usize) -> R<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let (range, kind) = match self.peek()? {
            b'"' => {
                // The contents, between the opening quote here and the closing one.
                let start = self.i + 1;
                self.string()?;
                (start..self.i - 1, Skipped::Str)
            }
            b'{' => return self.object(|r, _| r.skip(depth + 1)),
            b'[' => return self.array(|r| r.skip(depth + 1)),
            b't' => return self.literal(b"true"),
            b'f' => return self.literal(b"false"),
            b'n' => return self.literal(b"null"),
            _ => {
                let from = self.i;
                self.number()?;
                (from..self.i, Skipped::Number)
            }
        };
        if let Some(holes) = self.holes.as_deref_mut() {
            holes.push((range, kind));
        }
        Some(())
    }

    /// An array, each element read by `each`.
    fn array(&mut self, mut each: impl FnMut(&mut Self) -> R<()>) -> R<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            each(self)?;
            if !self.more(b']')? {
                return Some(());
            }
        }
    }

    /// After a member: `true` past a comma (another follows), `false` past `close`.
    fn more(&mut self, close: u8) -> R<bool> {
        let c = self.peek()?;
        (c == b',' || c == close).then(|| {
            self.i += 1;
            c == b','
        })
    }

    /// An object, each value read by `each` with its key (unknown keys, even repeated, are
    /// skipped by `each`, as serde's derive skips them).
    fn object(&mut self, mut each: impl FnMut(&mut Self, &'a str) -> R<()>) -> R<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            each(self, key)?;
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }
}

/// Known keys seen in one object, as bits: a repeated one goes to serde (its derive refuses
/// a duplicate field).
#[derive(Default)]
struct Seen(u32);

impl Seen {
    fn first(&mut self, bit: u32) -> R<()> {
        (self.0 & bit == 0).then(|| self.0 |= bit)
    }
}

/// The fields of one choice that make its events.
#[derive(Default)]
struct ChoiceFields<'a> {
    content: Option<&'a str>,
    reasoning_content: Option<&'a str>,
    reasoning: Option<&'a str>,
    text: Option<&'a str>,
    finish_reason: Option<&'a str>,
}

fn delta<'a>(r: &mut Reader<'a, '_>, c: &mut ChoiceFields<'a>) -> R<()> {
    if r.peek()? == b'n' {
        return r.literal(b"null");
    }
    let mut seen = Seen::default();
    r.object(|r, key| {
        match key {
            "content" => {
                seen.first(1)?;
                c.content = r.nullable_string()?;
            }
            "reasoning_content" => {
                seen.first(2)?;
                c.reasoning_content = r.nullable_string()?;
            }
            "reasoning" => {
                seen.first(4)?;
                c.reasoning = r.nullable_string()?;
            }
            _ => r.skip(3)?,
        }
        Some(())
    })
}

fn choice<'a>(r: &mut Reader<'a, '_>, out: &mut Vec<ChoiceFields<'a>>) -> R<()> {
    let mut c = ChoiceFields::default();
    let mut seen = Seen::default();
    r.object(|r, key| match key {
        "delta" => {
            seen.first(1)?;
            delta(r, &mut c)
        }
        // A whole response, not a stream chunk: serde reads it.
        "message" => None,
        "text" => {
            seen.first(2)?;
            c.text = r.nullable_string()?;
            Some(())
        }
        "finish_reason" => {
            seen.first(4)?;
            c.finish_reason = r.nullable_string()?;
            Some(())
        }
        _ => r.skip(2),
    })?;
    out.push(c);
    Some(())
}

/// The events of a stream chunk, appended to `out`; `false` (and `out` untouched) when the
/// chunk is not one this reader answers for.
pub(crate) fn parse_chunk(data: &str, out: &mut Vec<ResponseEvent>) -> bool {
    read_chunk(data, out).is_some()
}

/// Which text a plain chunk carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextKind {
    /// The answer (`delta.content`, or a completion's `text`).
    Answer,
    /// The reasoning (`delta.reasoning_content` or `delta.reasoning`).
    Reasoning,
}

/// Where a plain chunk's one piece of text lies in its bytes, and which text it is.
pub(crate) type TextSpan = (std::ops::Range<usize>, TextKind);

/// [`parse_chunk`], saying where a plain chunk's text lies: `None` when declined; else
/// `Some(span)`, with `span` set when the chunk is one choice whose only event is one
/// non-empty string's text (no other text, no finish reason).
pub(crate) fn read_chunk(data: &str, out: &mut Vec<ResponseEvent>) -> Option<Option<TextSpan>> {
    read_chunk_noting(data, out, None)
}

/// [`read_chunk`], also noting in `holes` (cleared first) where each skipped scalar value
/// lay, in order: what [`crate::chunk_shape::ChunkShape`] lets the next chunks vary.
pub(crate) fn read_chunk_noting(
    data: &str,
    out: &mut Vec<ResponseEvent>,
    mut holes: Option<&mut Vec<Hole>>,
) -> Option<Option<TextSpan>> {
    if let Some(h) = holes.as_deref_mut() {
        h.clear();
    }
    let mut choices: Vec<ChoiceFields<'_>> = Vec::new();
    let mut r = Reader {
        s: data,
        b: data.as_bytes(),
        i: 0,
        holes,
    };
    let mut seen = Seen::default();
    let read = r.object(|r, key| match key {
        "choices" => {
            seen.first(1)?;
            r.array(|r| choice(r, &mut choices))
        }
        // `"usage":null` on every chunk (some servers send it): no usage, as if absent.
        "usage" if r.peek()? == b'n' => {
            seen.first(4)?;
            r.literal(b"null")
        }
        // Errors, usage and pooling answers go to serde.
        "usage" | "error" | "data" | "results" | "message" => None,
        "object" => {
            seen.first(2)?;
            (r.string()? != "error").then_some(())
        }
        _ => r.skip(1),
    });
    r.ws();
    if read.is_none() || r.i != r.b.len() {
        return None;
    }
    let span = match choices.as_slice() {
        [c] if c.finish_reason.is_none() => {
            let only = match (c.content, c.text, c.reasoning_content, c.reasoning) {
                (Some(t), None, None, None) | (None, Some(t), None, None) => {
                    Some((t, TextKind::Answer))
                }
                (None, None, Some(t), None) | (None, None, None, Some(t)) => {
                    Some((t, TextKind::Reasoning))
                }
                _ => None,
            };
            only.filter(|(t, _)| !t.is_empty()).map(|(t, kind)| {
                // A subslice of `data`: its offset is the distance between the two pointers.
                let start = (t.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize);
                (start..start + t.len(), kind)
            })
        }
        _ => None,
    };
    let mut finish = None;
    for c in choices {
        let mut chunk = Chunk::content(c.content.unwrap_or_default());
        chunk.reasoning = c
            .reasoning_content
            .or(c.reasoning)
            .unwrap_or_default()
            .to_owned();
        if let Some(t) = c.text {
            chunk.text.push_str(t);
        }
        if chunk.has_tokens() {
            out.push(ResponseEvent::Chunk(chunk));
        }
        if let Some(reason) = c.finish_reason {
            finish = Some(reason);
        }
    }
    if let Some(reason) = finish {
        out.push(ResponseEvent::Finish {
            reason: Some(reason.to_owned()),
        });
    }
    Some(span)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The fast reader, when it answers, gives serde's answer; returns whether it answered.
    fn agrees(data: &str) -> bool {
        let mut fast = vec![ResponseEvent::Pooled { items: 9 }];
        let answered = parse_chunk(data, &mut fast);
        if !answered {
            assert_eq!(fast.len(), 1, "a declined chunk left events: {data}");
            return false;
        }
        let mut slow = vec![ResponseEvent::Pooled { items: 9 }];
        let serde = crate::serde_body::parse_with_serde(data, &mut slow);
        assert!(
            serde.is_ok(),
            "fast read {data:?} that serde refuses: {serde:?}"
        );
        assert_eq!(fast, slow, "{data}");
        true
    }

    const ANSWERED: &[&str] = &[
        r#"{"id":"cmpl-1","object":"chat.completion.chunk","created":1796163411,"model":"m","choices":[{"index":0,"delta":{"content":" so"},"finish_reason":null}]}"#,
        r#"{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"choices":[{"delta":{"reasoning_content":"hmm","content":null}}]}"#,
        r#"{"choices":[{"delta":{"reasoning":"r","reasoning_content":null}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"length","stop_reason":null,"token_ids":[1,2,-3.5e+2]}]}"#,
        r#"{"choices":[{"text":" hi","finish_reason":null}]}"#,
        r#"{"choices":[{"delta":{"content":"a"},"text":"b"},{"delta":null,"finish_reason":"stop"}]}"#,
        r#" {"choices":[],"system_fingerprint":"fp","x":{"y":[true,false,null,{"z":0.5}]}} "#,
        r#"{"choices":[{"delta":{"content":"日本語 ü"}}],"object":"chat.completion.chunk"}"#,
        r#"{"id":"a","id":"b","choices":[{"index":0,"index":1,"delta":{"x":1,"x":2,"content":"c"}}]}"#,
        r#"{}"#,
        r#"{"choices":[{"delta":{"content":" x"},"finish_reason":null}],"usage":null}"#,
    ];

    const DECLINED: &[&str] = &[
        r#"{"choices":[{"delta":{"content":"line\nbreak"}}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#,
        r#"{"error":{"message":"overloaded","code":503}}"#,
        r#"{"object":"error","message":"bad"}"#,
        r#"{"choices":[{"message":{"content":"all"},"finish_reason":"stop"}]}"#,
        r#"{"data":[{"embedding":[0.1]}]}"#,
        r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
        r#"{"choices":[],"choices":[]}"#,
        r#"{"choices":[],"usage":null,"usage":null}"#,
        r#"{"choices":[],"usage":nul}"#,
        r#"{"choices":null}"#,
        r#"{"choices":[{"delta":{"content":5}}]}"#,
        r#"{"choices":[{"index":01}]}"#,
        r#"{"choices":[]} x"#,
        r#"{"choices":[{"delta":{"content":"a"}}]"#,
        r#"[]"#,
        "",
    ];

    #[test]
    fn common_chunks_are_read_as_serde_reads_them() {
        for c in ANSWERED {
            assert!(agrees(c), "declined {c}");
        }
        for c in DECLINED {
            assert!(!agrees(c), "answered {c}");
        }
    }

    #[test]
    fn the_word_scan_finds_the_first_stop_byte() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for _ in 0..20_000 {
            let n = rng.random_range(0..40);
            let b: Vec<u8> = (0..n)
                .map(|_| match rng.random_range(0..20) {
                    0 => b'"',
                    1 => b'\\',
                    2 => rng.random_range(0..0x20),
                    _ => rng.random_range(0x20..=0xff),
                })
                .collect();
            assert_eq!(
                stop_at(&b),
                b.iter().position(|&c| STOP[c as usize]),
                "{b:?}"
            );
        }
    }

    /// Mutated chunks: whatever the fast reader still answers, serde answers the same.
    #[test]
    fn mutated_chunks_never_disagree_with_serde() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let alphabet = b"{}[]\":,0123456789.eE+- \\nultrfase\x01abc";
        let mut answered = 0;
        for round in 0..60_000 {
            let base = ANSWERED[round % ANSWERED.len()].as_bytes();
            let mut b = base.to_vec();
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(0..=b.len());
                match rng.random_range(0..3) {
                    0 if at < b.len() => {
                        b.remove(at);
                    }
                    1 if at < b.len() => b[at] = alphabet[rng.random_range(0..alphabet.len())],
                    _ => b.insert(at, alphabet[rng.random_range(0..alphabet.len())]),
                }
            }
            if let Ok(s) = std::str::from_utf8(&b) {
                answered += usize::from(agrees(s));
            }
        }
        assert!(answered > 1000, "only {answered} mutants were read at all");
    }
}
