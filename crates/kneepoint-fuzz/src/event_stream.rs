//! Event-stream framing and `PayloadPart` reassembly into the SageMaker payload codecs.

use kneepoint_core::ResponseEvent;
use kneepoint_transport::sagemaker::eventstream::{encode, interpret, payload_part, FrameReader};
use kneepoint_transport::sagemaker::{JsonLinesCodec, PayloadCodec, SseCodec};

const MAX_FRAME: usize = 4096;
const MAX_LINE: usize = 512;

type Outcome = (Vec<ResponseEvent>, Option<String>);

fn codecs() -> [Box<dyn PayloadCodec>; 2] {
    [
        Box::new(SseCodec::new(MAX_LINE)),
        Box::new(JsonLinesCodec::new(MAX_LINE)),
    ]
}

/// Feeds framed bytes in `parts` through a frame reader and `codec`, to the end of the stream.
fn decode(parts: &[&[u8]], codec: &mut dyn PayloadCodec) -> Outcome {
    let mut reader = FrameReader::new(MAX_FRAME);
    let mut messages = Vec::new();
    let mut events = Vec::new();
    for part in parts {
        messages.clear();
        let pushed = reader.push(part, &mut messages);
        for m in &messages {
            if let Err(e) = interpret(m, codec, &mut events) {
                return (events, Some(e.to_string()));
            }
        }
        if let Err(e) = pushed {
            return (events, Some(e.to_string()));
        }
    }
    if reader.has_partial() {
        return (events, Some("truncated frame".into()));
    }
    let end = codec.end(&mut events).err().map(|e| e.to_string());
    (events, end)
}

/// The payload bytes fed straight to `codec` in `parts`, no framing.
fn direct(parts: &[&[u8]], codec: &mut dyn PayloadCodec) -> Outcome {
    let mut events = Vec::new();
    for part in parts {
        if let Err(e) = codec.push(part, &mut events) {
            return (events, Some(e.to_string()));
        }
    }
    let end = codec.end(&mut events).err().map(|e| e.to_string());
    (events, end)
}

/// Two modes, chosen by the first byte. Odd: the body is a payload cut into `PayloadPart`s
/// (sizes from the control bytes), framed validly, and the frames are read back in pieces; the
/// events must equal those of the payload fed to the codec directly (reassembly loses nothing
/// wherever parts and reads are cut). Even: the body is raw frame bytes (bad CRCs, lengths,
/// headers), read whole and in pieces with the same outcome.
pub fn event_stream(data: &[u8]) {
    let (parts, body) = crate::split::pieces(data);
    if data.first().is_some_and(|b| b % 2 == 1) {
        let mut framed = Vec::new();
        for part in &parts {
            framed.extend(encode(&payload_part(part.to_vec())).expect("a payload part encodes"));
        }
        // Read the frames back in pieces of other sizes (the parts reversed).
        let mut reads = Vec::new();
        let mut at = 0;
        for size in parts.iter().rev().map(|p| p.len() * 3 + 1).cycle() {
            if at >= framed.len() {
                break;
            }
            let end = (at + size).min(framed.len());
            reads.push(&framed[at..end]);
            at = end;
        }
        for (mut a, mut b) in codecs().into_iter().zip(codecs()) {
            let want = direct(&[body], a.as_mut());
            let got = decode(&reads, b.as_mut());
            assert_eq!(want, got, "payload reassembly changed the events");
        }
    } else {
        for (mut a, mut b) in codecs().into_iter().zip(codecs()) {
            let whole = decode(&[body], a.as_mut());
            let split = decode(&parts, b.as_mut());
            assert_eq!(whole.0, split.0, "frames decoded differently when split");
            assert_eq!(
                whole.1.is_some(),
                split.1.is_some(),
                "{whole:?} vs {split:?}"
            );
        }
    }
}
