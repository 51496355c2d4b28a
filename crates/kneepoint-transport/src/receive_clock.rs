//! When the bytes of a connection last reached this host.
//!
//! A client that stamps a token when its own task gets to it measures its scheduler as well as
//! the server: the connection task must wake up for the socket, then wake the request's task,
//! and on a virtual machine each wake-up can take a millisecond at the tail.
//! [`StampedTcpStream`](crate::StampedTcpStream) takes the time at the bottom instead: on Linux
//! the kernel's receive time of the data each read returns (`SO_TIMESTAMPNS`, delivered with
//! `recvmsg`), elsewhere the time the read returned. Each read publishes its time on the connection's [`ReceiveClock`], which the
//! transports read when they hand an event over.
//!
//! The time is that of the newest segment a read consumed, so an event stamped with the clock
//! after its frame was delivered is never stamped before its bytes arrived; it is stamped late
//! only when newer bytes were read before the event was handed over (the client was already
//! behind by then).

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use futures_core::Stream;
use kneepoint_core::{Error, ResponseEvent};

/// The receive time of a connection's latest read, shared between the connection's IO and the
/// responses it carries. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ReceiveClock(Arc<AtomicU64>);

/// The origin the clock's nanoseconds count from (set before the first clock is used).
fn anchor() -> Instant {
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    *ANCHOR.get_or_init(Instant::now)
}

impl ReceiveClock {
    /// A clock that has seen no read yet.
    pub fn new() -> Self {
        let _ = anchor();
        ReceiveClock::default()
    }

    /// When the latest read's bytes arrived; `None` before the first read.
    pub fn latest(&self) -> Option<Instant> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            ns => Some(anchor() + std::time::Duration::from_nanos(ns - 1)),
        }
    }

    /// Records that a read's bytes arrived at `at`. Times never go backwards.
    pub fn record(&self, at: Instant) {
        let ns = at.saturating_duration_since(anchor()).as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX - 1) + 1;
        self.0.fetch_max(ns, Ordering::AcqRel);
    }
}

/// The clock of the connection that carried `response` (set by the client's connector).
pub(crate) fn stamps_of<B>(response: &http::Response<B>, sent: Instant) -> Stamps {
    Stamps {
        clock: response.extensions().get::<ReceiveClock>().cloned(),
        connection: response
            .extensions()
            .get::<crate::conn_setup::SetupHandle>()
            .map(|h| {
                let c = h.claim(sent);
                let waited = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
                c.with_waiting(waited.saturating_sub(c.total_ns()))
            }),
    }
}

/// What a response's connection tells: its receive clock and how it was set up.
#[derive(Default)]
pub(crate) struct Stamps {
    clock: Option<ReceiveClock>,
    connection: Option<kneepoint_core::ConnectionTimings>,
}

/// Sets each chunk's `received` time from the connection's clock as the inner stream yields it
/// (a chunk that already has one keeps it), after yielding the connection's setup, when known.
pub(crate) struct StampChunks<S> {
    inner: S,
    clock: Option<ReceiveClock>,
    connection: Option<kneepoint_core::ConnectionTimings>,
}

impl<S> StampChunks<S> {
    /// Stamps `inner`'s chunks with the clock; without one the chunks pass unchanged.
    pub(crate) fn new(inner: S, stamps: Stamps) -> Self {
        StampChunks {
            inner,
            clock: stamps.clock,
            connection: stamps.connection,
        }
    }
}

impl<S> Stream for StampChunks<S>
where
    S: Stream<Item = Result<ResponseEvent, Error>> + Unpin,
{
    type Item = Result<ResponseEvent, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(c) = this.connection.take() {
            return Poll::Ready(Some(Ok(ResponseEvent::Connection(c))));
        }
        let item = std::task::ready!(Pin::new(&mut this.inner).poll_next(cx));
        Poll::Ready(match item {
            Some(Ok(ResponseEvent::Chunk(mut c))) => {
                if c.received.is_none() {
                    c.received = this.clock.as_ref().and_then(ReceiveClock::latest);
                }
                Some(Ok(ResponseEvent::Chunk(c)))
            }
            other => other,
        })
    }
}

/// The instant of a kernel receive time (`CLOCK_REALTIME`, as seconds and nanoseconds since the
/// Unix epoch): now, less how long ago it was. A time in the future or more than a minute ago
/// (the wall clock was stepped) gives now.
#[cfg(target_os = "linux")]
pub(crate) fn instant_of_realtime(secs: i64, nanos: i64) -> Instant {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let now = Instant::now();
    let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) else {
        return now;
    };
    let Ok(wall) = SystemTime::now().duration_since(UNIX_EPOCH) else {
        return now;
    };
    match wall.checked_sub(Duration::new(secs, nanos)) {
        Some(age) if age < Duration::from_secs(60) => now.checked_sub(age).unwrap_or(now),
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_clock_keeps_the_newest_time() {
        let c = ReceiveClock::new();
        assert_eq!(c.latest(), None);
        let t = Instant::now();
        c.record(t + Duration::from_millis(5));
        c.record(t);
        let got = c.latest().unwrap();
        assert!(got >= t + Duration::from_millis(5) - Duration::from_nanos(1));
        assert!(got <= t + Duration::from_millis(5));
        let shared = c.clone();
        shared.record(t + Duration::from_millis(9));
        assert!(c.latest().unwrap() > t + Duration::from_millis(8));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn realtime_stamps_become_instants() {
        use std::time::{SystemTime, UNIX_EPOCH};
        let first = Instant::now();
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let ago = wall - Duration::from_millis(20);
        let before = Instant::now();
        let t = instant_of_realtime(ago.as_secs() as i64, ago.subsec_nanos() as i64);
        let after = Instant::now();
        // 20 ms before the wall-clock read, which came between `first` and `before`; early
        // by however long the conversion was descheduled between its two clock reads (a
        // busy machine's slack, bounded here at 250 ms), never late.
        assert!(t <= before - Duration::from_millis(19), "{:?}", before - t);
        assert!(
            t >= first - Duration::from_millis(270),
            "{:?}",
            first.saturating_duration_since(t)
        );
        // The future, an hour ago and nonsense all give now.
        let future = wall + Duration::from_secs(5);
        let t = instant_of_realtime(future.as_secs() as i64, 0);
        assert!(t >= after);
        let t = instant_of_realtime(wall.as_secs() as i64 - 3600, 0);
        assert!(t >= after);
        assert!(instant_of_realtime(-1, 0) >= after);
    }
}
