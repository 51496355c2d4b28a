//! The body of `InvokeEndpointWithResponseStream`: AWS event-stream frames
//! (`application/vnd.amazon.eventstream`), decoded with `aws-smithy-eventstream` (prelude and
//! message CRCs checked), `PayloadPart` bytes handed to a payload codec, exceptions turned into
//! classified failures.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{HeaderValue, Message};
use bytes::BytesMut;
use futures_core::Stream;
use hyper::body::{Body as _, Incoming};
use kneepoint_core::{Error, ResponseEvent};

use crate::sagemaker::codec::PayloadCodec;

fn header<'a>(m: &'a Message, name: &str) -> Option<&'a str> {
    m.headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| match h.value() {
            HeaderValue::String(s) => Some(s.as_str()),
            _ => None,
        })
}

/// Decodes event-stream frames from bytes fed in any split.
pub struct FrameReader {
    buf: BytesMut,
    decoder: MessageFrameDecoder,
    mid_frame: bool,
    max_frame: usize,
}

impl FrameReader {
    /// A reader refusing frames larger than `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        FrameReader {
            buf: BytesMut::new(),
            decoder: MessageFrameDecoder::new(),
            mid_frame: false,
            max_frame,
        }
    }

    /// Adds bytes and returns every message they complete.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Message>) -> Result<(), Error> {
        self.buf.extend_from_slice(bytes);
        loop {
            let before = self.buf.len();
            match self.decoder.decode_frame(&mut self.buf) {
                Ok(DecodedFrame::Complete(m)) => {
                    self.mid_frame = false;
                    out.push(m);
                }
                Ok(DecodedFrame::Incomplete) => {
                    if self.buf.len() != before {
                        self.mid_frame = true;
                    }
                    if self.buf.len() > self.max_frame {
                        return Err(Error::malformed(format!(
                            "an event-stream frame is larger than {} bytes",
                            self.max_frame
                        )));
                    }
                    return Ok(());
                }
                Err(e) => {
                    return Err(Error::MalformedResponse {
                        message: format!("invalid event-stream frame: {e}"),
                        source: Some(Box::new(e)),
                    })
                }
            }
        }
    }

    /// True when bytes of an unfinished frame are buffered.
    pub fn has_partial(&self) -> bool {
        self.mid_frame || !self.buf.is_empty()
    }
}

/// What one event-stream message means.
pub fn interpret(
    m: &Message,
    codec: &mut dyn PayloadCodec,
    out: &mut Vec<ResponseEvent>,
) -> Result<(), Error> {
    match header(m, ":message-type") {
        Some("event") => match header(m, ":event-type") {
            Some("PayloadPart") => codec.push(m.payload(), out),
            // Other event types (none defined today) are skipped.
            _ => Ok(()),
        },
        Some("exception") => {
            let kind = header(m, ":exception-type").unwrap_or("exception");
            let body: serde_json::Value = serde_json::from_slice(m.payload()).unwrap_or_default();
            let text = |k: &str| body.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            let message = text("Message")
                .or_else(|| text("message"))
                .unwrap_or_else(|| String::from_utf8_lossy(m.payload()).into_owned());
            let code = match text("ErrorCode") {
                Some(c) => format!("{kind}: {c}"),
                None => kind.to_owned(),
            };
            Err(Error::Server {
                code: Some(code),
                message,
            })
        }
        Some("error") => Err(Error::Server {
            code: header(m, ":error-code").map(str::to_owned),
            message: header(m, ":error-message").unwrap_or("").to_owned(),
        }),
        other => Err(Error::malformed(format!(
            "event-stream message of unknown type {other:?}"
        ))),
    }
}

/// The response stream of one request.
pub(crate) struct EventStreamBody {
    body: Incoming,
    frames: FrameReader,
    codec: Box<dyn PayloadCodec>,
    messages: Vec<Message>,
    events: Vec<ResponseEvent>,
    pending: VecDeque<Result<ResponseEvent, Error>>,
    finished: bool,
}

impl EventStreamBody {
    pub(crate) fn new(body: Incoming, codec: Box<dyn PayloadCodec>, max_frame: usize) -> Self {
        EventStreamBody {
            body,
            frames: FrameReader::new(max_frame),
            codec,
            messages: Vec::new(),
            events: Vec::new(),
            pending: VecDeque::new(),
            finished: false,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        if let Err(e) = self.frames.push(bytes, &mut self.messages) {
            self.fail(e);
            return;
        }
        for m in std::mem::take(&mut self.messages) {
            if self.finished {
                break;
            }
            let r = interpret(&m, self.codec.as_mut(), &mut self.events);
            self.pending.extend(self.events.drain(..).map(Ok));
            if let Err(e) = r {
                self.fail(e);
            }
        }
    }

    fn fail(&mut self, e: Error) {
        if !self.finished {
            self.pending.push_back(Err(e));
            self.finished = true;
        }
    }

    fn end_of_body(&mut self) {
        if self.finished {
            return;
        }
        if self.frames.has_partial() {
            self.fail(Error::malformed(
                "response stream ended in the middle of a frame",
            ));
            return;
        }
        let r = self.codec.end(&mut self.events);
        self.pending.extend(self.events.drain(..).map(Ok));
        match r {
            Ok(()) => self.finished = true,
            Err(e) => self.fail(e),
        }
    }
}

impl Stream for EventStreamBody {
    type Item = Result<ResponseEvent, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(item) = this.pending.pop_front() {
                return Poll::Ready(Some(item));
            }
            if this.finished {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.end_of_body(),
                Poll::Ready(Some(Err(e))) => this.fail(crate::client::lost(e)),
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.feed(&data);
                    }
                }
            }
        }
    }
}

/// Encodes one event-stream message (for the simulator and tests).
pub fn encode(message: &Message) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(message, &mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// A `PayloadPart` event carrying `bytes`.
pub fn payload_part(bytes: impl Into<bytes::Bytes>) -> Message {
    use aws_smithy_types::event_stream::Header;
    Message::new(bytes.into())
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("event".into()),
        ))
        .add_header(Header::new(
            ":event-type",
            HeaderValue::String("PayloadPart".into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/octet-stream".into()),
        ))
}

/// A modelled exception (`ModelStreamError`, `InternalStreamFailure`) with its JSON payload.
pub fn exception(kind: &str, message: &str, error_code: Option<&str>) -> Message {
    use aws_smithy_types::event_stream::Header;
    let mut body = serde_json::json!({ "Message": message });
    if let Some(c) = error_code {
        body["ErrorCode"] = serde_json::Value::String(c.to_owned());
    }
    Message::new(body.to_string().into_bytes())
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("exception".into()),
        ))
        .add_header(Header::new(
            ":exception-type",
            HeaderValue::String(kind.to_owned().into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::sagemaker::codec::SseCodec;

    fn run(bytes: &[u8], split: &[usize]) -> Result<Vec<ResponseEvent>, Error> {
        let mut frames = FrameReader::new(1 << 20);
        let mut codec = SseCodec::new(1 << 16);
        let mut out = Vec::new();
        let mut msgs = Vec::new();
        let mut at = 0;
        for &cut in split.iter().chain(std::iter::once(&bytes.len())) {
            frames.push(&bytes[at..cut], &mut msgs)?;
            for m in msgs.drain(..) {
                interpret(&m, &mut codec, &mut out)?;
            }
            at = cut;
        }
        if frames.has_partial() {
            return Err(Error::malformed("partial"));
        }
        codec.end(&mut out)?;
        Ok(out)
    }

    fn text(events: &[ResponseEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                ResponseEvent::Chunk(c) => Some(c.text.clone()),
                _ => None,
            })
            .collect()
    }

    /// SSE events whose bytes are split across PayloadParts at odd places.
    fn stream() -> Vec<u8> {
        let sse = "data: {\"choices\":[{\"delta\":{\"content\":\"one\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\" two\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        let b = sse.as_bytes();
        let mut out = Vec::new();
        for part in [&b[..7], &b[7..60], &b[60..61], &b[61..]] {
            out.extend(encode(&payload_part(part.to_vec())).unwrap());
        }
        out
    }

    #[test]
    fn payload_split_across_frames_and_frames_split_across_reads() {
        let s = stream();
        assert_eq!(text(&run(&s, &[]).unwrap()), "one two");
        for cut in 1..s.len() {
            assert_eq!(
                text(&run(&s, &[cut]).unwrap()),
                "one two",
                "read split at {cut}"
            );
        }
    }

    #[test]
    fn a_corrupted_crc_is_a_clear_failure() {
        let mut s = stream();
        let n = s.len();
        s[n - 1] ^= 0xff; // last message CRC
        let e = run(&s, &[]).unwrap_err();
        assert_eq!(e.kind(), kneepoint_core::ErrorKind::MalformedResponse);
        assert!(e.to_string().contains("event-stream"), "{e}");
        let mut s = stream();
        s[5] ^= 0x01; // first prelude
        assert!(run(&s, &[]).is_err());
    }

    #[test]
    fn model_stream_error_carries_its_code() {
        let mut s = encode(&payload_part(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n".to_vec(),
        ))
        .unwrap();
        s.extend(
            encode(&exception(
                "ModelStreamError",
                "the model crashed",
                Some("500"),
            ))
            .unwrap(),
        );
        let e = run(&s, &[]).unwrap_err();
        assert_eq!(e.kind(), kneepoint_core::ErrorKind::Server);
        let text = e.to_string();
        assert!(
            text.contains("ModelStreamError: 500") && text.contains("crashed"),
            "{text}"
        );
        let s = encode(&exception("InternalStreamFailure", "try again", None)).unwrap();
        assert!(run(&s, &[])
            .unwrap_err()
            .to_string()
            .contains("InternalStreamFailure"));
    }

    #[test]
    fn a_truncated_frame_is_detected() {
        let s = stream();
        let mut frames = FrameReader::new(1 << 20);
        frames.push(&s[..s.len() - 3], &mut Vec::new()).unwrap();
        assert!(frames.has_partial());
    }
}
