//! The plumbing every answer of the simulator shares: the body type, JSON and error
//! responses, the markers a fault leaves on a response, and the hints a request carries.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

use crate::fault::Fault;
use crate::render::error_body;
use crate::sse_body::InjectedFault;

pub(crate) type Body = UnsyncBoxBody<Bytes, InjectedFault>;

pub(crate) const MAX_REQUEST_BYTES: usize = 64 << 20;

pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

pub(crate) fn json_response(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

pub(crate) fn error(status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    json_response(status, error_body(status.as_u16(), kind, message))
}

/// Marks a response that must not be sent: the connection is dropped instead.
#[derive(Clone, Copy)]
pub(crate) struct ResetMarker;

/// The fault injected into a streamed response (carried to the SageMaker framing).
#[derive(Clone, Copy)]
pub(crate) struct FaultTag(
    #[cfg_attr(not(feature = "sagemaker"), allow(dead_code))] pub(crate) Option<Fault>,
);

/// Reads the headers a generation needs: the client's request id and input-length hint.
pub(crate) fn request_hints(headers: &http::HeaderMap) -> (Option<String>, Option<usize>) {
    let id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let hint = headers
        .get("x-kneepoint-input-tokens")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    (id, hint)
}
