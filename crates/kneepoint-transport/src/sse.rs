//! An incremental Server-Sent Events parser (the WHATWG `text/event-stream` rules).
//!
//! Hand-written rather than taken from a crate: the parser sits on the hot path of every
//! streamed token, must work on raw byte chunks split anywhere (including inside a `\r\n` or a
//! UTF-8 sequence), must bound the length of a line, and must report invalid UTF-8 as an error
//! instead of replacing it. The available crates either own the HTTP client, or decode lossily.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
}

impl SseEvent {
    fn from_ref(e: SseEventRef<'_>) -> Self {
        SseEvent {
            event: e.event.map(str::to_owned),
            data: e.data.to_owned(),
            id: e.id.map(str::to_owned),
        }
    }
}

/// One dispatched event, borrowed from the parser's buffers: valid during the callback of
/// [`SseParser::push_each`], which allocates nothing per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEventRef<'a> {
    /// The `event:` field, if any.
    pub event: Option<&'a str>,
    /// The `data:` lines joined by `\n`.
    pub data: &'a str,
    /// The `id:` field, if any.
    pub id: Option<&'a str>,
}

/// Why the byte stream is not valid SSE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// A line longer than the configured limit.
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// An event's data was not UTF-8.
    InvalidUtf8 {
        /// A lossy excerpt of the bytes.
        excerpt: String,
    },
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::LineTooLong { limit } => write!(f, "SSE line longer than {limit} bytes"),
            SseError::InvalidUtf8 { excerpt } => {
                write!(f, "invalid UTF-8 in SSE event: {excerpt:?}")
            }
        }
    }
}

impl std::error::Error for SseError {}

/// Incremental parser: feed byte chunks with [`SseParser::push`], collect events.
#[derive(Debug)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
    skip_lf: bool,
    max_line: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new(1 << 20)
    }
}

impl SseParser {
    /// A parser that rejects lines longer than `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        SseParser {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            event: None,
            id: None,
            skip_lf: false,
            max_line,
        }
    }

    /// Parses `bytes`, appending every completed event to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        self.push_each(bytes, |e| out.push(SseEvent::from_ref(e)))
    }

    /// Parses `bytes`, calling `on_event` with every completed event as it is dispatched. The
    /// event borrows the parser's reused buffers: the hot path copies nothing per event (the
    /// `data:` buffer keeps its capacity from one event to the next).
    pub fn push_each<F>(&mut self, mut bytes: &[u8], mut on_event: F) -> Result<(), SseError>
    where
        F: FnMut(SseEventRef<'_>),
    {
        let out = &mut on_event;
        // A `\r` ended the previous push: a `\n` opening this one belongs to it. An empty push
        // keeps the question open.
        if self.skip_lf && !bytes.is_empty() {
            self.skip_lf = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while !bytes.is_empty() {
            match memchr::memchr2(b'\n', b'\r', bytes) {
                Some(i) => {
                    if self.line.len() + i > self.max_line {
                        return Err(SseError::LineTooLong {
                            limit: self.max_line,
                        });
                    }
                    let is_cr = bytes[i] == b'\r';
                    if self.line.is_empty() {
                        self.process_line(&bytes[..i], out)?;
                    } else {
                        self.line.extend_from_slice(&bytes[..i]);
                        let line = std::mem::take(&mut self.line);
                        self.process_line(&line, out)?;
                        self.line = line;
                        self.line.clear();
                    }
                    bytes = &bytes[i + 1..];
                    if is_cr {
                        match bytes.first() {
                            Some(b'\n') => bytes = &bytes[1..],
                            Some(_) => {}
                            None => self.skip_lf = true,
                        }
                    }
                }
                None => {
                    if self.line.len() + bytes.len() > self.max_line {
                        return Err(SseError::LineTooLong {
                            limit: self.max_line,
                        });
                    }
                    self.line.extend_from_slice(bytes);
                    bytes = &[];
                }
            }
        }
        Ok(())
    }

    /// True when bytes of an unfinished event are buffered (a stream ending now was truncated).
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }

    fn process_line<F>(&mut self, line: &[u8], out: &mut F) -> Result<(), SseError>
    where
        F: FnMut(SseEventRef<'_>),
    {
        if line.is_empty() {
            return self.dispatch(out);
        }
        if line[0] == b':' {
            return Ok(()); // comment / keep-alive
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => self.event = Some(utf8(value)?.to_owned()),
            b"id" => self.id = Some(utf8(value)?.to_owned()),
            _ => {} // `retry` and unknown fields are ignored
        }
        Ok(())
    }

    fn dispatch<F>(&mut self, out: &mut F) -> Result<(), SseError>
    where
        F: FnMut(SseEventRef<'_>),
    {
        let event = self.event.take();
        if !self.has_data {
            return Ok(());
        }
        self.has_data = false;
        let result = match std::str::from_utf8(&self.data) {
            Ok(data) => {
                out(SseEventRef {
                    event: event.as_deref(),
                    data,
                    id: self.id.as_deref(),
                });
                Ok(())
            }
            Err(_) => Err(SseError::InvalidUtf8 {
                excerpt: excerpt(&self.data),
            }),
        };
        self.data.clear();
        result
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, SseError> {
    std::str::from_utf8(bytes).map_err(|_| SseError::InvalidUtf8 {
        excerpt: excerpt(bytes),
    })
}

/// A short, lossy excerpt of bytes for error messages.
pub(crate) fn excerpt(bytes: &[u8]) -> String {
    const MAX: usize = 200;
    let cut = &bytes[..bytes.len().min(MAX)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if bytes.len() > MAX {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for c in chunks {
            p.push(c, &mut out).unwrap();
        }
        out
    }

    /// Found by the `sse_stream` fuzz target: `\r` ending one read, a lone `\n` as the next
    /// read, then `\n...`: the second `\n` is an empty line (dispatch), not part of `\r\n`.
    #[test]
    fn a_lone_lf_after_a_cr_split_does_not_eat_the_next_line_end() {
        let whole = parse_all(&[b"data: a\r\n\ndata: b\n\n"]);
        let split = parse_all(&[b"data: a\r", b"\n", b"\ndata: b\n\n"]);
        assert_eq!(datas(&whole), ["a", "b"]);
        assert_eq!(split, whole);
        let with_empty = parse_all(&[b"data: a\r", b"", b"\n", b"", b"\n"]);
        assert_eq!(datas(&with_empty), ["a"]);
    }

    fn datas(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn one_event_per_read() {
        let ev = parse_all(&[b"data: {\"a\":1}\n\n"]);
        assert_eq!(datas(&ev), vec!["{\"a\":1}"]);
    }

    #[test]
    fn several_events_in_one_read() {
        let ev = parse_all(&[b"data: a\n\ndata: b\n\ndata: [DONE]\n\n"]);
        assert_eq!(datas(&ev), vec!["a", "b", "[DONE]"]);
    }

    #[test]
    fn event_split_across_reads_at_every_byte() {
        let whole = b"data: {\"x\": \"h\xc3\xa9llo\"}\r\n\r\ndata: two\r\n\r\n";
        for cut in 0..whole.len() {
            let ev = parse_all(&[&whole[..cut], &whole[cut..]]);
            assert_eq!(
                datas(&ev),
                vec!["{\"x\": \"héllo\"}", "two"],
                "cut at {cut}"
            );
        }
        // one byte at a time
        let pieces: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(
            datas(&parse_all(&pieces)),
            vec!["{\"x\": \"héllo\"}", "two"]
        );
    }

    #[test]
    fn crlf_lone_cr_and_lf() {
        let ev = parse_all(&[b"data: a\r\rdata: b\n\ndata: c\r\n\r\n"]);
        assert_eq!(datas(&ev), vec!["a", "b", "c"]);
        // CR at the end of one read, LF at the start of the next, must not be a blank line.
        let ev = parse_all(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(datas(&ev), vec!["a\nb"]);
    }

    #[test]
    fn comments_and_keepalives_are_ignored() {
        let ev = parse_all(&[b": keep-alive\n\n: ping\ndata: x\n: mid comment\n\n"]);
        assert_eq!(datas(&ev), vec!["x"]);
    }

    #[test]
    fn multi_line_data_is_joined() {
        let ev = parse_all(&[b"data: line1\ndata: line2\ndata\ndata:nospace\n\n"]);
        assert_eq!(datas(&ev), vec!["line1\nline2\n\nnospace"]);
    }

    #[test]
    fn event_and_id_fields() {
        let ev = parse_all(&[b"event: error\nid: 7\nretry: 10\ndata: boom\n\n"]);
        assert_eq!(ev[0].event.as_deref(), Some("error"));
        assert_eq!(ev[0].id.as_deref(), Some("7"));
        assert_eq!(ev[0].data, "boom");
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing() {
        assert!(parse_all(&[b"\n\n\r\n", b"event: x\n\n"]).is_empty());
    }

    #[test]
    fn partial_event_is_reported() {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        p.push(b"data: half", &mut out).unwrap();
        assert!(p.has_partial());
        p.push(b"\n\n", &mut out).unwrap();
        assert!(!p.has_partial());
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        let err = p.push(b"data: \xff\xfe\n\n", &mut out).unwrap_err();
        assert!(matches!(err, SseError::InvalidUtf8 { .. }));
    }

    #[test]
    fn over_long_line_is_an_error() {
        let mut p = SseParser::new(16);
        let mut out = Vec::new();
        assert!(p.push(b"data: 0123456789", &mut out).is_ok());
        let err = p.push(b"abcdef", &mut out).unwrap_err();
        assert_eq!(err, SseError::LineTooLong { limit: 16 });
        let mut p = SseParser::new(4);
        assert!(p.push(b"data: x\n", &mut out).is_err());
    }
}
