//! The event stream of one streamed (SSE) response.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use hyper::body::{Body as _, Incoming};
use kneepoint_core::{Error, ResponseEvent};

use crate::chunk_shape::ChunkShape;
use crate::parse::{parse_body, parse_stream_chunk};
use crate::sse::{SseError, SseParser};

/// Reads an SSE body frame by frame and yields events as soon as each is parsed.
pub(crate) struct SseStream {
    body: Incoming,
    parser: SseParser,
    /// The shape of this stream's chunks, for reading the next by it.
    shape: ChunkShape,
    events: Vec<ResponseEvent>,
    pending: VecDeque<Result<ResponseEvent, Error>>,
    finished: bool,
}

impl SseStream {
    pub(crate) fn new(body: Incoming, max_line: usize) -> Self {
        SseStream {
            body,
            parser: SseParser::new(max_line),
            shape: ChunkShape::default(),
            events: Vec::new(),
            pending: VecDeque::new(),
            finished: false,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        // Each event is parsed straight from the parser's buffer (no copy per event); events
        // completed before a parse error in the same read still count.
        let SseStream {
            parser,
            shape,
            events,
            pending,
            finished,
            ..
        } = self;
        fn fail(pending: &mut VecDeque<Result<ResponseEvent, Error>>, e: Error, done: &mut bool) {
            if !*done {
                pending.push_back(Err(e));
                *done = true;
            }
        }
        let parsed = parser.push_each(bytes, |ev| {
            if *finished {
                return;
            }
            let data = ev.data.trim();
            if data == "[DONE]" {
                *finished = true;
                return;
            }
            if ev.event == Some("error") {
                // An error event fails the request whatever its data holds: a JSON error
                // object gives its message, anything else is the message itself.
                let e = match parse_body(data, events) {
                    Err(e @ Error::Server { .. }) => e,
                    _ => Error::Server {
                        code: None,
                        message: error_event_message(data),
                    },
                };
                events.clear();
                fail(pending, e, finished);
                return;
            }
            match parse_stream_chunk(data, shape, events) {
                Ok(()) => pending.extend(events.drain(..).map(Ok)),
                Err(e) => fail(pending, e, finished),
            }
        });
        if let Err(e) = parsed {
            fail(pending, sse_error(e), finished);
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
        let why = if self.parser.has_partial() {
            "stream ended in the middle of an event"
        } else {
            "stream ended without [DONE]"
        };
        self.fail(Error::malformed(why));
    }
}

/// The message of an `event: error` whose data is not an error object: its `message` or
/// `detail` field when it is JSON, else its text (an excerpt).
fn error_event_message(data: &str) -> String {
    let v: Option<serde_json::Value> = serde_json::from_str(data).ok();
    let field = v.as_ref().and_then(|v| {
        ["message", "detail"].iter().find_map(|k| {
            v.get(k)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        })
    });
    field.unwrap_or_else(|| {
        let text: String = data.chars().take(200).collect();
        if text.is_empty() {
            "the server sent an error event with no data".into()
        } else {
            text
        }
    })
}

fn sse_error(e: SseError) -> Error {
    Error::MalformedResponse {
        message: e.to_string(),
        source: Some(Box::new(e)),
    }
}

impl Stream for SseStream {
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
