//! A deadline on a stream's next item that seldom touches tokio's timer.
//!
//! `tokio::time::timeout` around every `next()` registers a timer whenever the stream is not
//! ready and removes it when the item comes: on a paced stream, where nearly every token finds
//! the stream waiting, that is a trip to the timer wheel (and its lock) per token. Here one
//! timer serves the whole stream: it is armed once and left alone while items keep coming; when
//! it fires before the current deadline (items kept moving the deadline on), it is re-armed to
//! that deadline, and only a deadline earlier than the armed one re-arms it at once. The
//! deadline itself is exact: an item that arrives before it is never refused, and the elapsed
//! verdict is given only once the current deadline has passed.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, Sleep};

/// The deadline passed with no item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

/// One stream's deadline timer, reused for every item.
#[derive(Debug, Default)]
pub(crate) struct LazyDeadline {
    sleep: Option<Pin<Box<Sleep>>>,
}

impl LazyDeadline {
    /// The stream's next item (`None` at its end), or [`Elapsed`] once `left` (counted from now,
    /// on tokio's clock, as `tokio::time::timeout` counts) has passed without one.
    pub(crate) async fn next<S: Stream + Unpin>(
        &mut self,
        stream: &mut S,
        left: Duration,
    ) -> Result<Option<S::Item>, Elapsed> {
        let due = Instant::now() + left;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(item) = stream.poll_next_unpin(cx) {
                return Poll::Ready(Ok(item));
            }
            let sleep = self
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
            if due < sleep.deadline() {
                sleep.as_mut().reset(due);
            }
            loop {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if Instant::now() >= due {
                    return Poll::Ready(Err(Elapsed));
                }
                // Fired for an earlier deadline that items have since moved on.
                sleep.as_mut().reset(due);
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paced(gaps_ms: &'static [u64]) -> impl Stream<Item = u64> + Unpin {
        Box::pin(
            futures_util::stream::iter(gaps_ms.iter().copied()).then(|g| async move {
                tokio::time::sleep(Duration::from_millis(g)).await;
                g
            }),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn items_within_the_deadline_pass_and_a_late_one_is_refused() {
        // Each gap is under 100 ms, their sum far over it: the deadline is per item.
        let mut s = paced(&[90, 90, 90, 150, 10]);
        let mut d = LazyDeadline::default();
        let limit = Duration::from_millis(100);
        for want in [90, 90, 90] {
            assert_eq!(d.next(&mut s, limit).await, Ok(Some(want)));
        }
        let t0 = Instant::now();
        assert_eq!(d.next(&mut s, limit).await, Err(Elapsed));
        assert_eq!(
            t0.elapsed(),
            limit,
            "the verdict comes at the deadline, not later"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_shorter_deadline_than_the_armed_one_applies_at_once() {
        let mut s = paced(&[10, 500]);
        let mut d = LazyDeadline::default();
        assert_eq!(d.next(&mut s, Duration::from_secs(60)).await, Ok(Some(10)));
        let t0 = Instant::now();
        assert_eq!(
            d.next(&mut s, Duration::from_millis(200)).await,
            Err(Elapsed)
        );
        assert_eq!(t0.elapsed(), Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn the_end_of_the_stream_is_not_a_timeout() {
        let mut s = paced(&[5]);
        let mut d = LazyDeadline::default();
        let limit = Duration::from_millis(50);
        assert_eq!(d.next(&mut s, limit).await, Ok(Some(5)));
        assert_eq!(d.next(&mut s, limit).await, Ok(None));
    }
}
