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

use crate::fault::Fault;
use crate::sse_body::InjectedFault;

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
) -> Response<super::server::Body> {
    let mut r = super::server::json_response(status, Bytes::from(body.to_string()));
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
) -> Option<Response<super::server::Body>> {
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
    resp: Response<super::server::Body>,
    original: Bytes,
) -> Response<super::server::Body> {
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
    inner: super::server::Body,
    fault: Option<Fault>,
    frames: u32,
    ended: bool,
}

impl EventStreamBody {
    pub(crate) fn new(inner: super::server::Body, fault: Option<Fault>) -> Self {
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
