//! The SSE parser and the OpenAI chunk parser behind it.

use kneepoint_core::ResponseEvent;
use kneepoint_transport::sse::{SseError, SseEvent, SseParser};

/// A small line limit, so the fuzzer reaches the over-long-line path.
const MAX_LINE: usize = 256;

fn run(parts: &[&[u8]]) -> (Vec<SseEvent>, Option<SseError>, bool) {
    let mut parser = SseParser::new(MAX_LINE);
    let mut events = Vec::new();
    for part in parts {
        if let Err(e) = parser.push(part, &mut events) {
            return (events, Some(e), true);
        }
    }
    (events, None, parser.has_partial())
}

/// Parses the body whole and in pieces: the same events, the same error, the same partial
/// state; then the events' data go through the OpenAI chunk parser, one after another as a
/// stream's chunks (read by their shape) and each alone, with the same answers.
pub fn sse_stream(data: &[u8]) {
    let (parts, body) = crate::split::pieces(data);
    let whole = run(&[body]);
    let split = run(&parts);
    assert_eq!(whole, split, "SSE parsed differently when split");
    // The stream's chunks read one after another by their shape agree with each read alone.
    let chunks: Vec<&str> = whole.0.iter().map(|ev| ev.data.as_str()).collect();
    assert!(
        kneepoint_transport::stream_chunks_agree(&chunks),
        "a chunk read by its stream's shape disagrees with a full read: {chunks:?}"
    );
    for ev in &whole.0 {
        assert!(ev.data.len() <= body.len(), "event longer than its input");
        if ev.data.trim() == "[DONE]" {
            continue;
        }
        let mut out: Vec<ResponseEvent> = Vec::new();
        let _ = kneepoint_transport::parse_body(&ev.data, &mut out);
    }
}
