//! A scriptable in-process model for tests of code built on kneepoint: a [`MockTransport`] that
//! streams tokens at a pace that slows with the number of requests sharing it (as a
//! continuous-batching server does), and a [`Handle`] (as in `tower-test`) that changes its
//! behaviour while it runs, makes requests fail, and reports what it was sent.
//!
//! Latency comes from Tokio's timer, so verdicts in tests should rest on counts and orderings
//! (or on wide margins), not on exact times.
//!
//! # Example
//! ```
//! use futures_util::StreamExt;
//! use kneepoint_core::{Request, Transport};
//! use kneepoint_testkit::{MockTransport, Model};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let (transport, handle) = MockTransport::new(Model::instant(3));
//! handle.fail_next(1, 503);
//! assert!(transport.send(&Request::text(0, "hi")).await.is_err());
//! let events: Vec<_> = transport.send(&Request::text(1, "hi")).await.unwrap().collect().await;
//! assert_eq!(events.len(), 5); // three chunks, the usage and the finish reason
//! assert_eq!(handle.sent(), 2);
//! # });
//! ```

pub mod postgres;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kneepoint_core::{Chunk, Error, EventStream, Request, ResponseEvent, Transport, Usage};

/// How the mock model answers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Model {
    /// Time to the first token with nothing else in flight.
    pub ttft: Duration,
    /// Gap between tokens with nothing else in flight.
    pub itl: Duration,
    /// Each other request in flight stretches both by this fraction (0.05: 20 requests in
    /// flight double them).
    pub slowdown_per_request: f64,
    /// Output tokens when the request gives no `max_output_tokens`.
    pub default_output_tokens: u32,
    /// Report usage (prompt and completion tokens) at the end.
    pub usage: bool,
}

impl Model {
    /// A model that answers at once with `tokens` tokens.
    pub fn instant(tokens: u32) -> Self {
        Model {
            ttft: Duration::ZERO,
            itl: Duration::ZERO,
            slowdown_per_request: 0.0,
            default_output_tokens: tokens,
            usage: true,
        }
    }

    /// A model with the given unloaded TTFT and inter-token gap, slowed by
    /// `slowdown_per_request` per other request in flight.
    pub fn paced(ttft: Duration, itl: Duration, slowdown_per_request: f64) -> Self {
        Model {
            ttft,
            itl,
            slowdown_per_request,
            default_output_tokens: 16,
            usage: true,
        }
    }
}

#[derive(Debug)]
struct State {
    model: Model,
    failures: VecDeque<u16>,
    fail_every: Option<(u64, u16)>,
    sent: Vec<Request>,
}

/// A transport answering from a [`Model`]; cheap to clone (clones share the model and handle).
#[derive(Debug, Clone)]
pub struct MockTransport {
    state: Arc<Mutex<State>>,
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

/// Steers a [`MockTransport`] and reports what it was sent.
#[derive(Debug, Clone)]
pub struct Handle {
    state: Arc<Mutex<State>>,
    peak: Arc<AtomicUsize>,
}

impl MockTransport {
    /// A transport answering from `model`, and its handle.
    pub fn new(model: Model) -> (Self, Handle) {
        let state = Arc::new(Mutex::new(State {
            model,
            failures: VecDeque::new(),
            fail_every: None,
            sent: Vec::new(),
        }));
        let peak = Arc::new(AtomicUsize::new(0));
        let handle = Handle {
            state: state.clone(),
            peak: peak.clone(),
        };
        let transport = MockTransport {
            state,
            in_flight: Arc::new(AtomicUsize::new(0)),
            peak,
        };
        (transport, handle)
    }
}

fn locked<R>(state: &Mutex<State>, f: impl FnOnce(&mut State) -> R) -> R {
    match state.lock() {
        Ok(mut s) => f(&mut s),
        Err(poisoned) => f(&mut poisoned.into_inner()),
    }
}

impl Handle {
    /// Answers from `model` from now on (requests in flight keep their pace).
    pub fn set_model(&self, model: Model) {
        locked(&self.state, |s| s.model = model);
    }

    /// The next `n` requests fail with HTTP `status`.
    pub fn fail_next(&self, n: usize, status: u16) {
        locked(&self.state, |s| {
            s.failures.extend(std::iter::repeat_n(status, n))
        });
    }

    /// Every `k`th request (by arrival) fails with HTTP `status`; `k` = 0 stops it.
    pub fn fail_every(&self, k: u64, status: u16) {
        locked(&self.state, |s| {
            s.fail_every = (k > 0).then_some((k, status))
        });
    }

    /// Requests received so far.
    pub fn sent(&self) -> usize {
        locked(&self.state, |s| s.sent.len())
    }

    /// The requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        locked(&self.state, |s| s.sent.clone())
    }

    /// The most requests that were ever in flight at once.
    pub fn peak_in_flight(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

/// Decrements the in-flight count when a response ends (or is dropped).
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[async_trait::async_trait]
impl Transport for MockTransport {
    async fn send(&self, request: &Request) -> Result<EventStream, Error> {
        let (model, failure) = locked(&self.state, |s| {
            s.sent.push(request.clone());
            let n = s.sent.len() as u64;
            let failure = s.failures.pop_front().or(match s.fail_every {
                Some((k, status)) if n.is_multiple_of(k) => Some(status),
                _ => None,
            });
            (s.model.clone(), failure)
        });
        if let Some(status) = failure {
            return Err(Error::Status {
                status,
                body_excerpt: "failure scripted by the test".into(),
                headers: Vec::new(),
            });
        }
        let others = self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.peak.fetch_max(others + 1, Ordering::Relaxed);
        let guard = InFlight(self.in_flight.clone());
        let stretch = 1.0 + model.slowdown_per_request * others as f64;
        let tokens = request
            .max_output_tokens
            .unwrap_or(model.default_output_tokens);
        let prompt_tokens = request.input_tokens;
        let step = move |d: Duration| d.mul_f64(stretch);
        let stream = futures_util::stream::unfold(0u32, move |i| {
            let model = model.clone();
            async move {
                if i < tokens {
                    let wait = if i == 0 {
                        step(model.ttft)
                    } else {
                        step(model.itl)
                    };
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    Some((Ok(ResponseEvent::Chunk(Chunk::content(" tok"))), i + 1))
                } else if i == tokens && model.usage {
                    let usage = Usage::new(prompt_tokens, Some(tokens));
                    Some((Ok(ResponseEvent::Usage(usage)), i + 1))
                } else if i <= tokens + 1 {
                    let finish = ResponseEvent::Finish {
                        reason: Some("length".into()),
                    };
                    Some((Ok(finish), tokens + 2))
                } else {
                    None
                }
            }
        });
        let stream = futures_util::StreamExt::map(stream, move |e| {
            let _keep = &guard;
            e
        });
        Ok(Box::pin(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[tokio::test]
    async fn streams_the_requested_tokens_with_usage_and_finish() {
        let (t, h) = MockTransport::new(Model::instant(2));
        let mut r = Request::text(0, "x");
        r.max_output_tokens = Some(5);
        let events: Vec<_> = t.send(&r).await.unwrap().collect().await;
        let chunks = events
            .iter()
            .filter(|e| matches!(e, Ok(ResponseEvent::Chunk(_))))
            .count();
        assert_eq!(chunks, 5);
        assert!(matches!(
            events.last(),
            Some(Ok(ResponseEvent::Finish { .. }))
        ));
        assert!(events
            .iter()
            .any(|e| matches!(e, Ok(ResponseEvent::Usage(u)) if u.completion_tokens == Some(5))));
        assert_eq!(h.sent(), 1);
    }

    #[tokio::test]
    async fn scripted_failures_and_peak_in_flight() {
        let (t, h) = MockTransport::new(Model::instant(1));
        h.fail_every(2, 429);
        let a = t.send(&Request::text(0, "x")).await.unwrap();
        let b = t.send(&Request::text(1, "x")).await;
        assert!(matches!(b, Err(Error::Status { status: 429, .. })));
        let c = t.send(&Request::text(2, "x")).await.unwrap();
        assert_eq!(h.peak_in_flight(), 2, "a and c are both open");
        drop((a, c));
        let _d = t.send(&Request::text(3, "x")).await;
        assert_eq!(
            h.requests().iter().map(|r| r.id).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
    }
}
