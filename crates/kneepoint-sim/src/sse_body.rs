//! The streamed (SSE) response body: tokens as the engine emits them, with optional faults.

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Frame;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::fault::Fault;
use crate::live::TokenMsg;
use crate::render::{ResponseMeta, DONE};

/// A deliberate failure.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InjectedFault(pub &'static str);

impl std::fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "injected fault: {}", self.0)
    }
}

impl std::error::Error for InjectedFault {}

/// Where a streamed response is: the role chunk, tokens, then the usage chunk and `[DONE]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Start,
    Tokens,
    Usage,
    Done,
    End,
}

impl Phase {
    /// The phase after the last token: TGI streams end there; others send usage (if asked)
    /// and `[DONE]`.
    pub(crate) fn after_tokens(meta: &ResponseMeta, include_usage: bool) -> Phase {
        if meta.api == crate::request::Api::Tgi {
            Phase::End
        } else if include_usage {
            Phase::Usage
        } else {
            Phase::Done
        }
    }

    /// The frame of a phase without tokens (role, usage, `[DONE]`), advancing the phase;
    /// `None` for the end of the body (and for `Tokens`, which the body itself produces).
    pub(crate) fn frame(&mut self, meta: &ResponseMeta) -> Option<Bytes> {
        match *self {
            Phase::Start => {
                *self = Phase::Tokens;
                (meta.api == crate::request::Api::Chat).then(|| meta.role_event())
            }
            Phase::Usage => {
                *self = Phase::Done;
                Some(meta.usage_event())
            }
            Phase::Done => {
                *self = Phase::End;
                Some(Bytes::from_static(DONE))
            }
            Phase::Tokens | Phase::End => None,
        }
    }
}

/// Streams tokens as the engine emits them.
pub(crate) struct SseBody {
    rx: UnboundedReceiver<TokenMsg>,
    meta: ResponseMeta,
    include_usage: bool,
    phase: Phase,
    fault: Option<Fault>,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    stall_for: Duration,
    sent_tokens: u32,
}

impl SseBody {
    pub(crate) fn new(
        rx: UnboundedReceiver<TokenMsg>,
        meta: ResponseMeta,
        include_usage: bool,
        fault: Option<Fault>,
        stall_for: Duration,
    ) -> Self {
        SseBody {
            rx,
            meta,
            include_usage,
            phase: Phase::Start,
            fault,
            stall: None,
            stall_for,
            sent_tokens: 0,
        }
    }

    /// What to send for token `t`, with faults applied; `None` ends the body here.
    fn token_frame(&mut self, t: TokenMsg) -> Result<Option<Bytes>, InjectedFault> {
        self.sent_tokens += 1;
        let half = (self.meta.output_tokens / 2).max(1);
        match self.fault {
            Some(Fault::ResetMidStream) if self.sent_tokens > 2 || t.finished => {
                return Err(InjectedFault("connection reset mid-stream"))
            }
            Some(Fault::InvalidJson)
                if self.sent_tokens == 2 || (t.finished && self.sent_tokens < 2) =>
            {
                return Ok(Some(Bytes::from_static(
                    b"data: {\"choices\": [{\"delta\": {\"content\": oops\n\n",
                )));
            }
            Some(Fault::InvalidUtf8)
                if self.sent_tokens == 2 || (t.finished && self.sent_tokens < 2) =>
            {
                return Ok(Some(Bytes::from_static(
                    b"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n",
                )));
            }
            Some(Fault::OverlongLine)
                if self.sent_tokens == 2 || (t.finished && self.sent_tokens < 2) =>
            {
                let mut line = Vec::with_capacity((1 << 20) + 16);
                line.extend_from_slice(b"data: ");
                line.resize((1 << 20) + 8, b'x');
                line.extend_from_slice(b"\n\n");
                return Ok(Some(Bytes::from(line)));
            }
            Some(Fault::DoneWithoutFinish) if self.sent_tokens >= half => {
                // Cut short: the last chunk carries no finish_reason, then [DONE].
                self.phase = Phase::Done;
                return Ok(Some(self.meta.token_event(t.index, false)));
            }
            _ => {}
        }
        if t.finished {
            self.phase = match self.fault {
                Some(Fault::NoDone) => Phase::End,
                _ => Phase::after_tokens(&self.meta, self.include_usage),
            };
        }
        Ok(Some(self.meta.token_event(t.index, t.finished)))
    }
}

impl hyper::body::Body for SseBody {
    type Data = Bytes;
    type Error = InjectedFault;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, InjectedFault>>> {
        let this = self.get_mut();
        let data = |b: Bytes| Poll::Ready(Some(Ok(Frame::data(b))));
        if let Some(sleep) = this.stall.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.stall = None;
            this.fault = None;
        }
        match this.phase {
            Phase::Tokens => match this.rx.poll_recv(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Some(t)) => {
                    let frame = this.token_frame(t);
                    if this.fault == Some(Fault::Stall) && this.sent_tokens == 1 {
                        this.stall = Some(Box::pin(tokio::time::sleep(this.stall_for)));
                    }
                    match frame {
                        Ok(Some(b)) => data(b),
                        Ok(None) => Poll::Ready(None),
                        Err(e) => Poll::Ready(Some(Err(e))),
                    }
                }
                // The engine went away mid-stream: end the body without [DONE].
                Poll::Ready(None) => Poll::Ready(None),
            },
            Phase::Start => match this.phase.frame(&this.meta) {
                Some(b) => data(b),
                None => Pin::new(this).poll_frame(cx),
            },
            _ => match this.phase.frame(&this.meta) {
                Some(b) => data(b),
                None => Poll::Ready(None),
            },
        }
    }
}
