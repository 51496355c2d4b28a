//! Payload codecs: how the bytes inside a response stream's `PayloadPart`s (reassembled across
//! parts) become response events. One JSON object or SSE event may be split across parts, or
//! several may share one; codecs buffer accordingly.

use kneepoint_core::{Chunk, Error, ResponseEvent, Usage};
use serde::Deserialize;

use crate::parse::parse_body;
use crate::sse::{excerpt, SseEvent, SseParser};

/// Turns a stream of payload bytes into response events. Implement it for a container whose
/// streaming format kneepoint does not know, and set it with
/// [`SageMakerConfig::custom_codec`](crate::sagemaker::SageMakerConfig::custom_codec).
pub trait PayloadCodec: Send {
    /// Takes the next bytes (any split) and appends the events they complete.
    fn push(&mut self, bytes: &[u8], out: &mut Vec<ResponseEvent>) -> Result<(), Error>;
    /// The stream ended cleanly: flush what is buffered, or fail if it is cut short.
    fn end(&mut self, out: &mut Vec<ResponseEvent>) -> Result<(), Error>;
}

#[derive(Deserialize)]
struct TgiToken {
    #[serde(default)]
    text: String,
    #[serde(default)]
    special: bool,
}

#[derive(Deserialize)]
struct TgiDetails {
    finish_reason: Option<String>,
    generated_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct TgiChunk {
    token: Option<TgiToken>,
    generated_text: Option<String>,
    details: Option<TgiDetails>,
    error: Option<String>,
    error_type: Option<String>,
}

fn finish_tgi(details: Option<TgiDetails>, out: &mut Vec<ResponseEvent>) {
    if let Some(d) = details {
        if let Some(n) = d.generated_tokens {
            out.push(ResponseEvent::Usage(Usage::new(None, Some(n))));
        }
        out.push(ResponseEvent::Finish {
            reason: d.finish_reason,
        });
    }
}

fn tgi_error(c: &TgiChunk) -> Option<Error> {
    c.error.as_ref().map(|m| Error::Server {
        code: c.error_type.clone(),
        message: m.clone(),
    })
}

/// Parses one JSON document of a payload: an OpenAI chunk or body, or a TGI / LMI one
/// (`{"token": {...}, "details": ...}` streamed; `{"generated_text": ...}` or a one-element
/// array of it whole).
pub fn parse_payload(data: &str, out: &mut Vec<ResponseEvent>) -> Result<(), Error> {
    let t = data.trim_start();
    let tgi_like =
        t.starts_with('[') || t.contains("\"generated_text\"") || t.starts_with("{\"token\"");
    if !tgi_like {
        return parse_body(data, out);
    }
    let malformed = |e| crate::serde_body::unreadable("payload", data, e);
    if t.starts_with('[') {
        let whole: Vec<TgiChunk> = serde_json::from_str(data).map_err(malformed)?;
        for c in whole {
            if let Some(e) = tgi_error(&c) {
                return Err(e);
            }
            if let Some(text) = c.generated_text.filter(|s| !s.is_empty()) {
                out.push(ResponseEvent::Chunk(Chunk::content(text)));
            }
            finish_tgi(c.details, out);
        }
        return Ok(());
    }
    let c: TgiChunk = serde_json::from_str(data).map_err(malformed)?;
    if let Some(e) = tgi_error(&c) {
        return Err(e);
    }
    match c.token {
        // Streamed: one token per chunk; the final one carries the details (and the whole
        // text again, which is not new output).
        Some(tok) => {
            if !tok.special && !tok.text.is_empty() {
                out.push(ResponseEvent::Chunk(
                    Chunk::content(tok.text).with_tokens(Some(1)),
                ));
            }
        }
        None => {
            if let Some(text) = c.generated_text.filter(|s| !s.is_empty()) {
                out.push(ResponseEvent::Chunk(Chunk::content(text)));
            }
        }
    }
    finish_tgi(c.details, out);
    Ok(())
}

/// Server-sent events inside the payload (the vLLM and TGI containers). `[DONE]` ends the
/// stream; the event stream's end is the end too, so a missing `[DONE]` is not an error (a
/// missing finish reason still is, in the runner).
#[derive(Debug)]
pub struct SseCodec {
    parser: SseParser,
    scratch: Vec<SseEvent>,
    done: bool,
}

impl SseCodec {
    /// A codec accepting lines up to `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        SseCodec {
            parser: SseParser::new(max_line),
            scratch: Vec::new(),
            done: false,
        }
    }
}

impl PayloadCodec for SseCodec {
    fn push(&mut self, bytes: &[u8], out: &mut Vec<ResponseEvent>) -> Result<(), Error> {
        if self.done {
            return Ok(());
        }
        // Events completed before a parse error in the same bytes still count.
        let parsed = self.parser.push(bytes, &mut self.scratch);
        for ev in self.scratch.drain(..) {
            let data = ev.data.trim();
            if data == "[DONE]" {
                self.done = true;
                break;
            }
            if ev.event.as_deref() == Some("error") && !data.starts_with('{') {
                return Err(Error::Server {
                    code: None,
                    message: data.to_owned(),
                });
            }
            parse_payload(data, out)?;
        }
        if self.done {
            // Whatever follows `[DONE]` is ignored, however the bytes were split.
            return Ok(());
        }
        parsed.map_err(|e| Error::MalformedResponse {
            message: e.to_string(),
            source: Some(Box::new(e)),
        })
    }

    fn end(&mut self, _out: &mut Vec<ResponseEvent>) -> Result<(), Error> {
        if !self.done && self.parser.has_partial() {
            return Err(Error::malformed(
                "response stream ended in the middle of an SSE event",
            ));
        }
        Ok(())
    }
}

/// One JSON document per line (LMI's `jsonlines` output, custom containers).
#[derive(Debug)]
pub struct JsonLinesCodec {
    buf: Vec<u8>,
    max_line: usize,
}

impl JsonLinesCodec {
    /// A codec accepting lines up to `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        JsonLinesCodec {
            buf: Vec::new(),
            max_line,
        }
    }

    fn too_long(&self) -> Error {
        Error::malformed(format!(
            "a JSON line is longer than {} bytes",
            self.max_line
        ))
    }

    fn line(&self, line: &[u8], out: &mut Vec<ResponseEvent>) -> Result<(), Error> {
        let text = std::str::from_utf8(line).map_err(|_| {
            Error::malformed(format!("invalid UTF-8 in a JSON line: {}", excerpt(line)))
        })?;
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        // Tolerate an SSE-style prefix on each line.
        let text = text.strip_prefix("data:").map_or(text, str::trim);
        if text == "[DONE]" {
            return Ok(());
        }
        parse_payload(text, out)
    }
}

impl PayloadCodec for JsonLinesCodec {
    fn push(&mut self, bytes: &[u8], out: &mut Vec<ResponseEvent>) -> Result<(), Error> {
        self.buf.extend_from_slice(bytes);
        while let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
            if i > self.max_line {
                return Err(self.too_long());
            }
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            self.line(&line, out)?;
        }
        if self.buf.len() > self.max_line {
            return Err(self.too_long());
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<ResponseEvent>) -> Result<(), Error> {
        let rest = std::mem::take(&mut self.buf);
        self.line(&rest, out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn texts(events: &[ResponseEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                ResponseEvent::Chunk(c) => Some(c.text.as_str()),
                _ => None,
            })
            .collect()
    }

    const SSE: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

    #[test]
    fn an_unreadable_tgi_payload_says_why() {
        for (payload, starts) in [
            (
                r#"[{"generated_text":5}]"#,
                "a JSON payload of an unexpected shape (invalid type: integer `5`",
            ),
            (r#"[{"generated_text":"#, "invalid JSON payload (EOF"),
        ] {
            let e = parse_payload(payload, &mut Vec::new()).unwrap_err();
            assert!(e.to_string().contains(starts), "{payload}: {e}");
        }
    }

    #[test]
    fn sse_split_at_every_byte_gives_the_same_events() {
        for cut in 1..SSE.len() {
            let mut c = SseCodec::new(1 << 16);
            let mut out = Vec::new();
            c.push(&SSE.as_bytes()[..cut], &mut out).unwrap();
            c.push(&SSE.as_bytes()[cut..], &mut out).unwrap();
            c.end(&mut out).unwrap();
            assert_eq!(texts(&out), "Hello", "cut at {cut}");
            assert!(out.contains(&ResponseEvent::Finish {
                reason: Some("stop".into())
            }));
        }
    }

    #[test]
    fn sse_cut_mid_event_is_malformed_and_no_done_is_fine() {
        let mut c = SseCodec::new(1 << 16);
        let mut out = Vec::new();
        c.push(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"ch",
            &mut out,
        )
        .unwrap();
        assert!(c.end(&mut out).is_err());
        let mut c = SseCodec::new(1 << 16);
        c.push(b"data: {\"choices\":[]}\n\n", &mut out).unwrap();
        assert!(c.end(&mut out).is_ok());
    }

    #[test]
    fn tgi_stream_tokens_and_details() {
        let mut c = SseCodec::new(1 << 16);
        let mut out = Vec::new();
        let s = "data:{\"token\":{\"id\":1,\"text\":\" a\",\"logprob\":0,\"special\":false},\"generated_text\":null,\"details\":null}\n\ndata:{\"token\":{\"id\":2,\"text\":\"</s>\",\"special\":true},\"generated_text\":\" a\",\"details\":{\"finish_reason\":\"length\",\"generated_tokens\":2}}\n\n";
        c.push(s.as_bytes(), &mut out).unwrap();
        assert_eq!(texts(&out), " a");
        assert!(out.contains(&ResponseEvent::Finish {
            reason: Some("length".into())
        }));
        assert!(out.contains(&ResponseEvent::Usage(Usage::new(None, Some(2)))));
    }

    /// Found by the `event_stream` fuzz target: the codecs give the same events and outcome
    /// however the payload is cut.
    #[test]
    fn events_before_an_error_count_and_done_ends_the_stream_in_any_split() {
        let good = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
        let mut bytes = good.to_vec();
        bytes.extend_from_slice(b"data: \xff\n\n");
        let mut c = SseCodec::new(1024);
        let mut out = Vec::new();
        assert!(c.push(&bytes, &mut out).is_err());
        assert_eq!(texts(&out), "hi");

        let mut after_done = good.to_vec();
        after_done.extend_from_slice(b"data: [DONE]\n\n\xff\xfe");
        for cut in [after_done.len(), good.len() + 5] {
            let mut c = SseCodec::new(1024);
            let mut out = Vec::new();
            c.push(&after_done[..cut], &mut out).unwrap();
            c.push(&after_done[cut..], &mut out).unwrap();
            c.end(&mut out).unwrap();
            assert_eq!(texts(&out), "hi");
        }

        // A complete JSON line over the limit fails whether it came whole or in pieces.
        let line = format!("{{\"token\":{{\"text\":\"{}\"}}}}\n", "x".repeat(40));
        let mut whole = JsonLinesCodec::new(32);
        assert!(whole.push(line.as_bytes(), &mut Vec::new()).is_err());
        let mut split = JsonLinesCodec::new(32);
        let (a, b) = line.as_bytes().split_at(20);
        split.push(a, &mut Vec::new()).unwrap();
        assert!(split.push(b, &mut Vec::new()).is_err());
    }

    #[test]
    fn whole_tgi_bodies_and_errors() {
        let mut out = Vec::new();
        parse_payload(r#"[{"generated_text":"hi there"}]"#, &mut out).unwrap();
        assert_eq!(texts(&out), "hi there");
        let e = parse_payload(
            r#"{"error":"overloaded","error_type":"overloaded","generated_text":null}"#,
            &mut out,
        );
        assert_eq!(e.unwrap_err().kind(), kneepoint_core::ErrorKind::Server);
    }

    #[test]
    fn json_lines_split_and_unterminated_last_line() {
        let body = "{\"choices\":[{\"text\":\"x\"}]}\n{\"choices\":[{\"text\":\"y\",\"finish_reason\":\"stop\"}]}";
        for cut in 1..body.len() {
            let mut c = JsonLinesCodec::new(1 << 16);
            let mut out = Vec::new();
            c.push(&body.as_bytes()[..cut], &mut out).unwrap();
            c.push(&body.as_bytes()[cut..], &mut out).unwrap();
            c.end(&mut out).unwrap();
            assert_eq!(texts(&out), "xy");
        }
        let mut c = JsonLinesCodec::new(8);
        assert!(c.push(b"{\"aaaaaaaaaaaaaa", &mut Vec::new()).is_err());
    }
}
