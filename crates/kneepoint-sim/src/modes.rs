//! The simulator's two measuring modes, which skip the engine model: `instant` (the whole
//! response at once, rendered once per shape) and `fixed` (each token on a fixed schedule,
//! stamped for `GET /truth`); and the response metadata both share with the engine's path.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;

use crate::render::ResponseMeta;
use crate::request::{Api, GenRequest};
use crate::respond::{full, json_response, Body};
use crate::state::State;

/// What a response's chunks say about the request (ids, model, lengths, finish reason).
pub(crate) fn response_meta(
    state: &State,
    api: Api,
    id: u64,
    prompt_tokens: u32,
    output_tokens: u32,
    finish_reason: &'static str,
) -> ResponseMeta {
    ResponseMeta {
        api,
        id,
        model_json: state.model_json.clone(),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        prompt_tokens,
        output_tokens,
        items: 1,
        reasoning_tokens: if api == Api::Chat {
            state.profile.reasoning_tokens(output_tokens)
        } else {
            0
        },
        finish_reason,
    }
}

/// Zero-latency mode: the whole response at once, rendered once per shape and then reused
/// (the ids inside are those of the first request of that shape).
pub(crate) fn instant_response(
    state: &State,
    api: Api,
    id: u64,
    gen: &GenRequest,
    output_tokens: u32,
    finish_reason: &'static str,
) -> Response<Body> {
    let key = (
        api,
        gen.stream,
        gen.include_usage,
        gen.prompt_tokens,
        output_tokens,
        finish_reason,
    );
    // Pooling answers depend on the number of inputs too: rendered each time.
    let cached = state
        .rendered
        .lock()
        .ok()
        .filter(|_| !api.is_pooling())
        .and_then(|c| c.get(&key).cloned());
    let body = cached.unwrap_or_else(|| {
        let mut meta = response_meta(
            state,
            api,
            id,
            gen.prompt_tokens,
            output_tokens,
            finish_reason,
        );
        meta.items = gen.items;
        let bytes = if gen.stream {
            let mut b = Vec::new();
            if api == Api::Chat {
                b.extend_from_slice(&meta.role_event());
            }
            for i in 0..output_tokens {
                b.extend_from_slice(&meta.token_event(i, i + 1 == output_tokens));
            }
            if gen.include_usage {
                b.extend_from_slice(&meta.usage_event());
            }
            b.extend_from_slice(b"data: [DONE]\n\n");
            Bytes::from(b)
        } else {
            meta.whole()
        };
        if let (Ok(mut c), false) = (state.rendered.lock(), api.is_pooling()) {
            c.insert(key, bytes.clone());
        }
        bytes
    });
    let mut r = Response::new(full(body));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(if gen.stream {
            "text/event-stream"
        } else {
            "application/json"
        }),
    );
    r
}

/// Fixed-latency mode: a stream on the request's own schedule, or the whole body once its last
/// token is due.
pub(crate) async fn fixed_response(
    schedule: crate::fixed::Schedule,
    meta: ResponseMeta,
    gen: &GenRequest,
) -> Response<Body> {
    if gen.stream {
        let body = crate::fixed::FixedBody::new(schedule, meta, gen.include_usage);
        let mut r = Response::new(body.boxed_unsync());
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/event-stream"),
        );
        return r;
    }
    let last = meta.output_tokens.saturating_sub(1);
    tokio::time::sleep_until(schedule.due(last).into()).await;
    let now = Instant::now();
    schedule.record(&meta, &[now]);
    json_response(StatusCode::OK, meta.whole())
}
