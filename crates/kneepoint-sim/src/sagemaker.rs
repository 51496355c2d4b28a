//! The SageMaker runtime protocol on the simulator: `POST /endpoints/{name}/invocations` and
//! `/invocations-response-stream`, SigV4 signatures checked against a configured test key,
//! container errors wrapped the way SageMaker wraps them (`ModelError`, 424), and streamed
//! responses framed as AWS event streams (`PayloadPart` events, each SSE event split across two
//! parts so that clients must reassemble), with the stream faults of this protocol.

use std::pin::Pin;
use std::task::{Context, Poll};

use aws_credential_types::Credentials;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use hyper::body::Frame;
use kneepoint_transport::sagemaker::eventstream::{encode, exception, payload_part};
use kneepoint_transport::sagemaker::sign::{verify_request, VerifyError};

use std::sync::Arc;
use std::time::Instant;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use crate::fault::Fault;
use crate::generate::generate;
use crate::request::Api;
use crate::respond::{error, full, request_hints, Body, FaultTag, ResetMarker, MAX_REQUEST_BYTES};
use crate::sse_body::InjectedFault;
use crate::state::State;

/// Which SageMaker operation a path names: `Some((endpoint, streaming))`.
pub(crate) fn route(path: &str) -> Option<(&str, bool)> {
    let rest = path.strip_prefix("/endpoints/")?;
    let (name, op) = rest.split_once('/')?;
    match op {
        "invocations" => Some((name, false)),
        "invocations-response-stream" => Some((name, true)),
        _ => None,
    }
}

fn aws_error(
    status: StatusCode,
    kind: &str,
    body: serde_json::Value,
) -> Response<crate::respond::Body> {
    let mut r = crate::respond::json_response(status, Bytes::from(body.to_string()));
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{kind}:http://internal.amazon.com/coral/com.amazon.sagemaker/"
    )) {
        r.headers_mut().insert("x-amzn-errortype", v);
    }
    r
}

/// Checks the request's signature; the refusal to send when it fails.
pub(crate) fn check_signature(
    key: &Credentials,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Option<Response<crate::respond::Body>> {
    let h: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    match verify_request(method, url, &h, body, key) {
        Ok(()) => None,
        Err(VerifyError::Missing) => Some(aws_error(
            StatusCode::FORBIDDEN,
            "MissingAuthenticationTokenException",
            serde_json::json!({"message": "Missing Authentication Token"}),
        )),
        Err(VerifyError::UnknownKey) => Some(aws_error(
            StatusCode::FORBIDDEN,
            "UnrecognizedClientException",
            serde_json::json!({"message": "The security token included in the request is invalid."}),
        )),
        Err(VerifyError::Mismatch) | Err(VerifyError::Malformed(_)) => Some(aws_error(
            StatusCode::FORBIDDEN,
            "InvalidSignatureException",
            serde_json::json!({"message": "The request signature we calculated does not match the signature you provided."}),
        )),
    }
}

/// Rewrites a container error the way the SageMaker front end does.
pub(crate) fn wrap_error(
    resp: Response<crate::respond::Body>,
    original: Bytes,
) -> Response<crate::respond::Body> {
    let status = resp.status();
    match status.as_u16() {
        429 => aws_error(
            StatusCode::TOO_MANY_REQUESTS,
            "ThrottlingException",
            serde_json::json!({"message": "Rate exceeded (injected fault)"}),
        ),
        503 => aws_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            serde_json::json!({"message": "The service is unavailable (injected fault)"}),
        ),
        s => {
            let (code, what) = if s < 500 {
                ("CLIENT_ERROR_FROM_MODEL", "client")
            } else {
                ("SERVER_ERROR_FROM_MODEL", "server")
            };
            let text = String::from_utf8_lossy(&original).into_owned();
            aws_error(
                StatusCode::FAILED_DEPENDENCY,
                "ModelError",
                serde_json::json!({
                    "ErrorCode": code,
                    "Message": format!("Received {what} error ({s}) from primary with message \"{text}\". See the log stream for more information."),
                    "OriginalMessage": text,
                    "OriginalStatusCode": s,
                    "LogStreamArn": "arn:aws:logs:us-east-1:000000000000:log-group:/aws/sagemaker/Endpoints/kneepoint-sim",
                }),
            )
        }
    }
}

/// The streamed body of `InvokeEndpointWithResponseStream`: the container's SSE bytes as
/// event-stream `PayloadPart`s.
pub(crate) struct EventStreamBody {
    inner: crate::respond::Body,
    fault: Option<Fault>,
    frames: u32,
    ended: bool,
}

impl EventStreamBody {
    pub(crate) fn new(inner: crate::respond::Body, fault: Option<Fault>) -> Self {
        EventStreamBody {
            inner,
            fault,
            frames: 0,
            ended: false,
        }
    }

    fn frame(&mut self, data: &[u8]) -> Result<Bytes, InjectedFault> {
        self.frames += 1;
        let mut out = Vec::with_capacity(data.len() + 128);
        if self.frames == 2 && self.fault == Some(Fault::ModelStreamError) {
            let m = exception(
                "ModelStreamError",
                "the model container stopped the stream (injected fault)",
                Some("ModelError"),
            );
            out.extend(encode(&m).map_err(|_| InjectedFault("encoding failed"))?);
            self.ended = true;
            return Ok(Bytes::from(out));
        }
        // Split every event in two parts: clients must reassemble.
        let mid = data.len() / 2;
        for part in [&data[..mid], &data[mid..]] {
            if part.is_empty() {
                continue;
            }
            let mut enc = encode(&payload_part(part.to_vec()))
                .map_err(|_| InjectedFault("encoding failed"))?;
            if self.frames == 2 && self.fault == Some(Fault::EventStreamBadCrc) {
                if let Some(last) = enc.last_mut() {
                    *last ^= 0x5a;
                }
            }
            out.extend(enc);
        }
        Ok(Bytes::from(out))
    }
}

impl hyper::body::Body for EventStreamBody {
    type Data = Bytes;
    type Error = InjectedFault;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, InjectedFault>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Some(Ok(f))) => match f.into_data() {
                Ok(d) => Poll::Ready(Some(this.frame(&d).map(Frame::data))),
                Err(_) => Poll::Ready(Some(Ok(Frame::data(Bytes::new())))),
            },
        }
    }
}

/// Answers one SageMaker invocation: checks the signature and endpoint name, generates, and
/// wraps errors and streams the way SageMaker does.
pub(crate) async fn respond(
    state: Arc<State>,
    req: hyper::Request<Incoming>,
    name: String,
    streaming: bool,
    arrival: Instant,
) -> Response<Body> {
    let (client_request_id, hint) = request_hints(req.headers());
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let host = req
        .headers()
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost")
        .to_owned();
    let url = format!("http://{host}{}", req.uri().path());
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "ValidationError",
                "unreadable body",
            )
        }
    };
    if let Some(key) = &state.options.sigv4 {
        let creds = aws_credential_types::Credentials::new(
            key.access_key_id.clone(),
            key.secret_access_key.clone(),
            None,
            None,
            "kneepoint-sim",
        );
        if let Some(r) = check_signature(&creds, "POST", &url, &headers, &body) {
            return r;
        }
    }
    if state
        .options
        .endpoint_name
        .as_ref()
        .is_some_and(|n| *n != name)
    {
        let mut r = error(
            StatusCode::BAD_REQUEST,
            "ValidationError",
            &format!("Endpoint {name} of account 000000000000 not found."),
        );
        r.headers_mut().insert(
            "x-amzn-errortype",
            http::HeaderValue::from_static(
                "ValidationError:http://internal.amazon.com/coral/com.amazon.coral.validate/",
            ),
        );
        return r;
    }
    let api = Api::detect(&body);
    let resp = generate(
        state,
        api,
        &body,
        (hint, client_request_id),
        Some(streaming),
        arrival,
    )
    .await;
    let fault = resp.extensions().get::<FaultTag>().and_then(|f| f.0);
    if resp.extensions().get::<ResetMarker>().is_some() {
        return resp;
    }
    if !resp.status().is_success() {
        let original = resp
            .into_body()
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let status = http::StatusCode::from_u16(
            serde_json::from_slice::<serde_json::Value>(&original)
                .ok()
                .and_then(|v| v.get("code").and_then(serde_json::Value::as_u64))
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(500),
        )
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut shell = Response::new(full(Bytes::new()));
        *shell.status_mut() = status;
        return wrap_error(shell, original);
    }
    let is_sse = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if streaming && is_sse {
        let (mut parts, body) = resp.into_parts();
        parts.headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/vnd.amazon.eventstream"),
        );
        parts.headers.insert(
            "x-amzn-sagemaker-content-type",
            http::HeaderValue::from_static("text/event-stream"),
        );
        let body = EventStreamBody::new(body, fault).boxed_unsync();
        return Response::from_parts(parts, body);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(
            route("/endpoints/my-ep/invocations"),
            Some(("my-ep", false))
        );
        assert_eq!(
            route("/endpoints/my-ep/invocations-response-stream"),
            Some(("my-ep", true))
        );
        assert_eq!(route("/endpoints/my-ep/other"), None);
        assert_eq!(route("/v1/chat/completions"), None);
    }
}
