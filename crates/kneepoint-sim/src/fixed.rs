//! The fixed-latency mode: each request's tokens follow its own clock (first token `ttft_ms`
//! after arrival, then one every `itl_ms`), independent of load, and the truth is stamped when
//! each token is handed to the connection — so a client's added time can be measured exactly.
//!
//! Tokens are timed with Tokio's timer (millisecond ticks): a token may go out up to a tick
//! late, but the recorded truth is when it actually went out, never when it was scheduled.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::Frame;
use tokio::time::Sleep;

use crate::render::ResponseMeta;
use crate::sse_body::{InjectedFault, Phase};
use crate::truth::{ServerTiming, TruthLog, WallClock};
use crate::FixedTiming;

/// When one request's tokens are due, and where its truth goes.
pub(crate) struct Schedule {
    pub arrival: Instant,
    pub ttft: Duration,
    pub itl: Duration,
    pub server_id: u64,
    pub client_request_id: Option<String>,
    pub log: Arc<Mutex<TruthLog>>,
    pub clock: WallClock,
}

impl Schedule {
    pub(crate) fn new(
        timing: FixedTiming,
        time_scale: f64,
        arrival: Instant,
        server_id: u64,
        client_request_id: Option<String>,
        (log, clock): (Arc<Mutex<TruthLog>>, WallClock),
    ) -> Self {
        let scaled = |ms: f64| crate::live::wall_ms(ms * time_scale);
        Schedule {
            arrival,
            ttft: scaled(timing.ttft_ms),
            itl: scaled(timing.itl_ms),
            server_id,
            client_request_id,
            log,
            clock,
        }
    }

    /// When token `index` is due (never a panic: a time past what the clock holds is as far
    /// as it goes).
    pub(crate) fn due(&self, index: u32) -> Instant {
        self.itl
            .checked_mul(index)
            .and_then(|d| d.checked_add(self.ttft))
            .and_then(|d| self.arrival.checked_add(d))
            .or_else(|| self.arrival.checked_add(crate::live::MAX_WALL))
            .unwrap_or(self.arrival)
    }

    /// Logs the request's truth (before its last token goes out, so that a client which has
    /// read the whole response always finds it), with every token's send time.
    pub(crate) fn record(&self, meta: &ResponseMeta, sends: &[Instant]) {
        let (Some(&first), Some(&last)) = (sends.first(), sends.last()) else {
            return;
        };
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let n = meta.output_tokens;
        let timing = ServerTiming {
            server_id: self.server_id,
            client_request_id: self.client_request_id.clone(),
            prompt_tokens: meta.prompt_tokens,
            output_tokens: n,
            ttft_ms: ms(first - self.arrival),
            itl_ms: (n > 1).then(|| ms(last - first) / f64::from(n - 1)),
            latency_ms: ms(last - self.arrival),
            arrival_unix_ns: self.clock.unix_ns(self.arrival),
            first_token_unix_ns: self.clock.unix_ns(first),
            last_token_unix_ns: self.clock.unix_ns(last),
            token_unix_ns: sends.iter().map(|t| self.clock.unix_ns(*t)).collect(),
        };
        if let Ok(mut log) = self.log.lock() {
            log.push(timing);
        }
    }
}

/// A streamed (SSE) response whose tokens go out on the request's own schedule.
pub(crate) struct FixedBody {
    schedule: Schedule,
    meta: ResponseMeta,
    include_usage: bool,
    sleep: Pin<Box<Sleep>>,
    next: u32,
    /// When each token so far was handed to the connection.
    sends: Vec<Instant>,
    phase: Phase,
}

impl FixedBody {
    pub(crate) fn new(schedule: Schedule, meta: ResponseMeta, include_usage: bool) -> Self {
        let sleep = Box::pin(tokio::time::sleep_until(schedule.due(0).into()));
        let sends = Vec::with_capacity(meta.output_tokens.min(1 << 16) as usize);
        FixedBody {
            schedule,
            meta,
            include_usage,
            sleep,
            next: 0,
            sends,
            phase: Phase::Start,
        }
    }
}

impl hyper::body::Body for FixedBody {
    type Data = Bytes;
    type Error = InjectedFault;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, InjectedFault>>> {
        let this = self.get_mut();
        let data = |b: Bytes| Poll::Ready(Some(Ok(Frame::data(b))));
        match this.phase {
            Phase::Tokens => {
                if this.sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let index = this.next;
                this.sends.push(Instant::now());
                let finished = index + 1 >= this.meta.output_tokens;
                if finished {
                    this.schedule.record(&this.meta, &this.sends);
                    this.phase = Phase::after_tokens(&this.meta, this.include_usage);
                } else {
                    this.next += 1;
                    let due = this.schedule.due(this.next);
                    this.sleep.as_mut().reset(due.into());
                }
                data(this.meta.token_event(index, finished))
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 57 item 19: a fixed-latency timing too long for the clock (`--ttft-ms 1e300`
    /// panicked the request's task) waits a day at most, and no token's due time overflows.
    #[test]
    fn huge_fixed_timings_never_panic() {
        let arrival = Instant::now();
        let schedule = Schedule::new(
            FixedTiming {
                ttft_ms: 1e300,
                itl_ms: 1e300,
            },
            crate::MAX_TIME_SCALE,
            arrival,
            1,
            None,
            (Arc::new(Mutex::new(TruthLog::new(4))), WallClock::now()),
        );
        assert_eq!(schedule.ttft, crate::live::MAX_WALL);
        assert_eq!(schedule.itl, crate::live::MAX_WALL);
        assert!(schedule.due(0) > arrival);
        assert!(schedule.due(u32::MAX) >= schedule.due(1));
    }
}
