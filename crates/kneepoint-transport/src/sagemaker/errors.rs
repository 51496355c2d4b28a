//! SageMaker runtime error responses as failures users recognise: `ValidationError` (400),
//! `ModelError` (424, with the container's own status and message), `ThrottlingException` and
//! `ModelNotReadyException` (429), `InternalFailure` / `ServiceUnavailable` (5xx).

use http::HeaderMap;
use kneepoint_core::Error;
use serde_json::Value;

use crate::sse::excerpt;

/// The error type from `x-amzn-ErrorType` (`ModelError:http://...`) or the body's `__type`.
fn error_type(headers: &HeaderMap, body: &Value) -> Option<String> {
    let from_header = headers
        .get("x-amzn-errortype")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(':').next().unwrap_or(s).to_owned());
    from_header.or_else(|| {
        body.get("__type")
            .or_else(|| body.get("code"))
            .and_then(Value::as_str)
            .map(|s| s.rsplit('#').next().unwrap_or(s).to_owned())
    })
}

fn default_type(status: u16) -> &'static str {
    match status {
        400 => "ValidationError",
        403 => "AccessDeniedException",
        404 => "ResourceNotFound",
        424 => "ModelError",
        429 => "ThrottlingException",
        503 => "ServiceUnavailable",
        s if s >= 500 => "InternalFailure",
        _ => "Error",
    }
}

/// The failure for a non-success response (`body` may be cut short).
pub fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> Error {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let kind = error_type(headers, &json).unwrap_or_else(|| default_type(status).to_owned());
    let text = |k: &str| json.get(k).and_then(Value::as_str).map(str::to_owned);
    let message = text("message")
        .or_else(|| text("Message"))
        .unwrap_or_else(|| excerpt(body));
    let mut detail = format!("{kind}: {message}");
    if kind == "ModelError" {
        if let Some(code) = json.get("OriginalStatusCode").and_then(Value::as_u64) {
            detail.push_str(&format!(" (container status {code}"));
            if let Some(m) = text("OriginalMessage") {
                let short: String = m.chars().take(300).collect();
                detail.push_str(&format!(": {short}"));
            }
            detail.push(')');
        }
        if let Some(arn) = text("LogStreamArn") {
            detail.push_str(&format!("; logs: {arn}"));
        }
    }
    Error::Status {
        status,
        body_excerpt: detail.chars().take(1024).collect(),
        headers: crate::client::explaining_headers(headers),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn err(status: u16, header: Option<&str>, body: &str) -> String {
        let mut h = HeaderMap::new();
        if let Some(t) = header {
            h.insert("x-amzn-errortype", t.parse().unwrap());
        }
        let e = status_error(status, &h, body.as_bytes());
        assert_eq!(e.status(), Some(status));
        e.to_string()
    }

    #[test]
    fn classes_users_recognise() {
        let v = err(
            400,
            Some("ValidationError:http://internal.amazon.com/coral/com.amazon.coral.validate/"),
            r#"{"message":"Endpoint x of account y not found."}"#,
        );
        assert!(v.contains("HTTP 400: ValidationError: Endpoint x"), "{v}");
        let m = err(
            424,
            Some("ModelError:http://internal.amazon.com/coral/com.amazon.sagemaker/"),
            r#"{"ErrorCode":"CLIENT_ERROR_FROM_MODEL","LogStreamArn":"arn:aws:logs:x","Message":"Received client error (400) from primary","OriginalMessage":"{\"object\":\"error\",\"message\":\"max_tokens too large\"}","OriginalStatusCode":400}"#,
        );
        assert!(m.contains("ModelError: Received client error"), "{m}");
        assert!(
            m.contains("container status 400") && m.contains("max_tokens too large"),
            "{m}"
        );
        assert!(m.contains("logs: arn:aws:logs:x"));
        let t = err(
            429,
            None,
            r#"{"__type":"com.amazon.coral#ThrottlingException","message":"Rate exceeded"}"#,
        );
        assert!(t.contains("ThrottlingException: Rate exceeded"), "{t}");
        let n = err(
            429,
            Some("ModelNotReadyException"),
            r#"{"message":"not ready"}"#,
        );
        assert!(n.contains("ModelNotReadyException: not ready"));
        let s = err(503, None, "<html>busy</html>");
        assert!(s.contains("ServiceUnavailable: <html>busy</html>"), "{s}");
        assert!(err(500, None, "").contains("InternalFailure"));
    }
}
