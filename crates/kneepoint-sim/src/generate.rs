//! One generation request: parsed, admitted to the engine (or answered at once in the
//! zero-latency and fixed modes), and answered, streamed or whole.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use kneepoint_core::TokenCounter;
use rand::Rng;
use rand_distr::{Distribution, Exp};
use tokio::sync::mpsc::unbounded_channel;

use crate::engine::SeqSpec;
use crate::fault::Fault;
use crate::live::{Command, Submission};
use crate::request::{parse_request, Api, GenRequest};
use crate::respond::{error, full, json_response, Body, FaultTag, ResetMarker};
use crate::sse_body::SseBody;
use crate::state::State;

/// Runs one generation request (already routed and read) and answers it (a streamed answer
/// carries the injected fault, if any, as a [`FaultTag`]). `stream` overrides the body's `stream` flag (SageMaker decides
/// by the operation).
pub(crate) async fn generate(
    state: Arc<State>,
    api: Api,
    body: &[u8],
    (hint, client_request_id): (Option<usize>, Option<String>),
    stream: Option<bool>,
    arrival: Instant,
) -> Response<Body> {
    // kneepoint's own client may say how many tokens the prompt has; counting is then skipped
    // (it costs ~1 ms per 1k tokens of CPU the client needs on a shared machine).
    let counter: &dyn TokenCounter = match hint {
        Some(_) => &SkipCounter,
        None => state.counter.as_ref(),
    };
    let mut gen = match parse_request(api, body, counter) {
        Ok(g) => g,
        Err(m) => return error(StatusCode::BAD_REQUEST, "BadRequestError", &m),
    };
    if let Some(s) = stream {
        gen.stream = s;
    }
    if let Some(n) = hint {
        gen.prompt_tokens = u32::try_from(n).unwrap_or(u32::MAX);
    }
    let (output_tokens, finish_reason) = match output_length(&state, &gen) {
        Ok(x) => x,
        Err(m) => return error(StatusCode::BAD_REQUEST, "BadRequestError", &m),
    };
    let spec = SeqSpec {
        prompt_tokens: gen.prompt_tokens,
        output_tokens,
    };
    let total = u64::from(spec.prompt_tokens) + u64::from(spec.output_tokens);
    if total > u64::from(state.profile.max_model_len) {
        let m = crate::engine::Rejection::TooLong {
            tokens: total,
            max_model_len: state.profile.max_model_len,
        };
        return error(StatusCode::BAD_REQUEST, "BadRequestError", &m.to_string());
    }
    let fault = state.profile.faults.as_ref().and_then(|plan| {
        let mut rng = state.lengths.lock().ok()?;
        plan.pick(rng.random(), rng.random())
    });
    if let Some(r) = fault.and_then(|f| fault_response(f, gen.stream)) {
        return r;
    }
    let id = state.next_id.fetch_add(1, Ordering::Relaxed);
    if state.profile.instant {
        return crate::modes::instant_response(&state, api, id, &gen, output_tokens, finish_reason);
    }
    let mut meta = crate::modes::response_meta(
        &state,
        api,
        id,
        spec.prompt_tokens,
        output_tokens,
        finish_reason,
    );
    meta.items = gen.items;
    if let Some(timing) = state.profile.fixed {
        let schedule = crate::fixed::Schedule::new(
            timing,
            state.profile.time_scale,
            arrival,
            id,
            client_request_id,
            (state.truth.clone(), state.clock),
        );
        return crate::modes::fixed_response(schedule, meta, &gen).await;
    }
    let (tx, rx) = unbounded_channel();
    let submitted = submit(
        &state,
        Submission {
            id,
            client_request_id,
            spec,
            arrival,
            tokens: tx,
        },
    );
    if !submitted {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "engine stopped",
        );
    }
    if gen.stream {
        let stall = std::time::Duration::from_millis(
            state.profile.faults.as_ref().map_or(0, |f| f.stall_ms),
        );
        let mut r =
            Response::new(SseBody::new(rx, meta, gen.include_usage, fault, stall).boxed_unsync());
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/event-stream"),
        );
        r.extensions_mut().insert(FaultTag(fault));
        r
    } else {
        let mut rx = rx;
        while let Some(t) = rx.recv().await {
            if t.finished {
                return json_response(StatusCode::OK, meta.whole());
            }
        }
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "generation aborted",
        )
    }
}

/// The answer an injected fault gives before any generation (`None` for a fault that strikes
/// in the stream, on a streamed request).
fn fault_response(fault: Fault, streamed: bool) -> Option<Response<Body>> {
    match fault {
        Fault::Http429 => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "RateLimitError",
                "injected fault: too many requests",
            );
            r.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
            Some(r)
        }
        Fault::Http500 => Some(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "injected fault",
        )),
        Fault::Http503 => Some(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "injected fault",
        )),
        Fault::WrongContentType => {
            let mut r = Response::new(full(Bytes::from_static(
                b"<html><body>gateway</body></html>",
            )));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/html"),
            );
            Some(r)
        }
        f if f == Fault::ResetBeforeHeaders || (f.in_stream() && !streamed) => {
            let mut r = Response::new(full(Bytes::new()));
            r.extensions_mut().insert(ResetMarker);
            Some(r)
        }
        _ => None,
    }
}

/// Counts nothing: used when the client's hint gives the prompt's length.
struct SkipCounter;

impl TokenCounter for SkipCounter {
    fn count(&self, _text: &str) -> usize {
        0
    }

    fn name(&self) -> &str {
        "client-hint"
    }
}

/// Decides how many tokens to generate and the finish reason.
fn output_length(state: &State, gen: &GenRequest) -> Result<(u32, &'static str), String> {
    let max = gen.max_tokens.unwrap_or(state.profile.default_max_tokens);
    if max == 0 {
        return Err("max_tokens must be at least 1".into());
    }
    if let Some(min) = gen.min_tokens {
        if min > max {
            return Err(format!("min_tokens ({min}) must be ≤ max_tokens ({max})"));
        }
    }
    if gen.ignore_eos {
        return Ok((max, "length"));
    }
    let mean = f64::from(state.profile.natural_output_mean);
    let natural = match (Exp::new(1.0 / mean), state.lengths.lock()) {
        (Ok(d), Ok(mut rng)) => d.sample(&mut *rng).ceil().max(1.0) as u32,
        _ => state.profile.natural_output_mean,
    };
    let n = natural.max(gen.min_tokens.unwrap_or(1)).min(max);
    Ok((n, if n == max { "length" } else { "stop" }))
}

/// Sends `s` to the engine with the fewest requests in flight (the first of equals), as
/// vLLM's data-parallel front end does; false when the engine has stopped.
fn submit(state: &State, s: Submission) -> bool {
    let Some(engine) = state
        .engines
        .iter()
        .min_by_key(|e| e.in_flight.load(Ordering::Acquire))
    else {
        return false;
    };
    engine.in_flight.fetch_add(1, Ordering::AcqRel);
    let sent = engine
        .commands
        .lock()
        .is_ok_and(|e| e.send(Command::Submit(s)).is_ok());
    if !sent {
        engine.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
    sent
}
