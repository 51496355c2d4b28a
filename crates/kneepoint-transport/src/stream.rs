//! The event stream of one streamed (SSE) response.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use hyper::body::{Body as _, Incoming};
use kneepoint_core::{Error, ResponseEvent};

use crate::parse::parse_body;
use crate::sse::{SseError, SseEvent, SseParser};

/// Reads an SSE body frame by frame and yields events as soon as each is parsed.
pub(crate) struct SseStream {
    body: Incoming,
    parser: SseParser,
    scratch: Vec<SseEvent>,
    events: Vec<ResponseEvent>,
    pending: VecDeque<Result<ResponseEvent, Error>>,
    finished: bool,
}

impl SseStream {
    pub(crate) fn new(body: Incoming, max_line: usize) -> Self {
        SseStream {
            body,
            parser: SseParser::new(max_line),
            scratch: Vec::new(),
            events: Vec::new(),
            pending: VecDeque::new(),
            finished: false,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        // Events completed before a parse error in the same read still count.
        let parsed = self.parser.push(bytes, &mut self.scratch);
        for ev in std::mem::take(&mut self.scratch) {
            if self.finished {
                break;
            }
            let data = ev.data.trim();
            if data == "[DONE]" {
                self.finished = true;
                break;
            }
            if ev.event.as_deref() == Some("error") && !data.starts_with('{') {
                self.fail(Error::Server {
                    code: None,
                    message: data.to_owned(),
                });
                break;
            }
            match parse_body(data, &mut self.events) {
                Ok(()) => self.pending.extend(self.events.drain(..).map(Ok)),
                Err(e) => self.fail(e),
            }
        }
        if let Err(e) = parsed {
            self.fail(sse_error(e));
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
                Poll::Ready(Some(Err(e))) => this.fail(Error::Disconnected {
                    message: e.to_string(),
                    source: Some(Box::new(e)),
                }),
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.feed(&data);
                    }
                }
            }
        }
    }
}
