//! A paced streamed answer: each event is rendered and stamped when its time comes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The body of one paced answer: the role chunk and first token after the TTFT, then one
/// token every ITL (each due time counted from the request, so a late send does not shift the
/// rest), then the usage chunk with `[DONE]`.
pub struct Paced {
    id: u64,
    created: u64,
    osl: usize,
    start: Instant,
    ttft: Duration,
    itl: Duration,
    /// The next event: 0 the role chunk, 1..=osl token k-1, osl+1 the usage chunk.
    next: usize,
    sleep: Pin<Box<Sleep>>,
}

impl Paced {
    pub fn new(id: u64, created: u64, osl: usize, ttft: Duration, itl: Duration) -> Self {
        let start = Instant::now();
        Paced {
            id,
            created,
            osl,
            start,
            ttft,
            itl,
            next: 0,
            sleep: Box::pin(tokio::time::sleep_until(start + ttft)),
        }
    }

    /// When event `n` is due: the role chunk and the first token at the TTFT, token k (0-based)
    /// k ITLs later, the usage chunk with the last token.
    fn due(&self, n: usize) -> Instant {
        let k = n.saturating_sub(1).min(self.osl.saturating_sub(1));
        self.start + self.ttft + self.itl * k as u32
    }
}

impl Body for Paced {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.next > self.osl + 1 {
            return Poll::Ready(None);
        }
        if self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let sent = crate::unix_now().as_nanos();
        let k = match self.next {
            0 => None,
            n => Some(n - 1),
        };
        let mut text = crate::event(self.id, self.created, k, self.osl, Some(sent));
        // The role chunk goes out with the first token; the usage chunk with the last.
        if self.next == 0 || self.next == self.osl {
            self.next += 1;
            let k = self.next - 1;
            text.push_str(&crate::event(
                self.id,
                self.created,
                Some(k),
                self.osl,
                Some(sent),
            ));
        }
        self.next += 1;
        let due = self.due(self.next);
        self.sleep.as_mut().reset(due);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(text)))))
    }

    fn is_end_stream(&self) -> bool {
        self.next > self.osl + 1
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
