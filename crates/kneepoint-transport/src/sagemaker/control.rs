//! SageMaker's control plane (`api.sagemaker.<region>.amazonaws.com`): signed JSON calls
//! (`X-Amz-Target: SageMaker.<Operation>`, `application/x-amz-json-1.1`) on the transports'
//! HTTP client, for creating, describing and deleting models, endpoint configurations and
//! endpoints. Hand-signed with `aws-sigv4` like the runtime's calls rather than through the
//! AWS SDK crate, whose SageMaker client alone compiles for minutes; only the handful of
//! operations a benchmark needs are called, with `serde_json` bodies.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use serde_json::Value;

use crate::client::{https_client, HttpClient};
use crate::sagemaker::sign::{sign_request, SignOptions, SERVICE};
use crate::sagemaker::CredentialSource;
use crate::{ConnectOptions, Error};

/// A failed control-plane call: the operation, the HTTP status and the service's error code
/// and message (never a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
#[non_exhaustive]
pub struct ApiError {
    /// The operation (`CreateEndpoint`...).
    pub operation: String,
    /// The HTTP status (0: no answer).
    pub status: u16,
    /// The error code (`ValidationException`, `ResourceLimitExceeded`,
    /// `SignatureDoesNotMatch`...).
    pub code: Option<String>,
    /// The service's message.
    pub message: String,
}

impl ApiError {
    /// Whether the error says the named resource does not exist (a delete of something
    /// already deleted).
    pub fn is_not_found(&self) -> bool {
        self.message.trim_start().starts_with("Could not find")
            || self.code.as_deref() == Some("ResourceNotFound")
    }
}

impl ApiError {
    fn describe(&self) -> String {
        let mut s = format!("SageMaker {} failed", self.operation);
        if self.status > 0 {
            s.push_str(&format!(" (HTTP {})", self.status));
        }
        if let Some(c) = &self.code {
            s.push_str(&format!(": {c}"));
        }
        if !self.message.is_empty() {
            s.push_str(&format!(": {}", self.message));
        }
        s
    }

    /// Whether calling again may succeed: no answer, throttled, or a server error (not a
    /// failure of this client before anything was sent).
    pub fn is_transient(&self) -> bool {
        (self.status == 0 && !self.is_local())
            || self.status == 429
            || self.status >= 500
            || self.is_throttled()
    }

    /// Whether the service throttled the call (nothing was done: safe to repeat any call).
    pub fn is_throttled(&self) -> bool {
        self.status == 429 || self.code.as_deref().is_some_and(|c| c.contains("Throttl"))
    }

    /// Whether the call failed here before it was sent (credentials, signing, the URL): the
    /// service did nothing.
    pub fn is_local(&self) -> bool {
        self.code.as_deref() == Some(LOCAL)
    }
}

/// The error code of a call that failed before it was sent.
const LOCAL: &str = "ClientError";

/// A client of SageMaker's control plane in one region.
pub struct SageMakerApi {
    client: HttpClient,
    credentials: Arc<dyn CredentialSource>,
    region: String,
    url: String,
    timeout: Duration,
}

impl std::fmt::Debug for SageMakerApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SageMakerApi")
            .field("region", &self.region)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl SageMakerApi {
    /// A client for `region`, at `endpoint_url` when given (a local server such as moto's),
    /// else `https://api.sagemaker.<region>.amazonaws.com`.
    pub fn new(
        region: &str,
        endpoint_url: Option<&str>,
        credentials: Arc<dyn CredentialSource>,
        options: &ConnectOptions,
    ) -> Result<Self, Error> {
        let url = match endpoint_url {
            Some(u) => u.trim_end_matches('/').to_owned() + "/",
            None => format!("https://api.sagemaker.{region}.amazonaws.com/"),
        };
        let uri: http::Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| Error::InvalidUrl {
                url: crate::redact_url(&url),
                reason: e.to_string(),
            })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(Error::InvalidUrl {
                url: crate::redact_url(&url),
                reason: "the SageMaker API URL is an http(s)://host[:port] URL".into(),
            });
        }
        Ok(SageMakerApi {
            client: https_client(Some(Duration::from_secs(10)), options, None)?,
            credentials,
            region: region.to_owned(),
            url,
            timeout: Duration::from_secs(60),
        })
    }

    /// A client for `region` (at `endpoint_url` when given) signing with the AWS credential
    /// chain (environment, `~/.aws` files with `profile`, web identity, container or instance
    /// metadata), with default connection options.
    pub async fn from_chain(
        region: &str,
        endpoint_url: Option<&str>,
        profile: Option<&str>,
    ) -> Result<Self, Error> {
        let creds = crate::sagemaker::AwsCredentialChain::load(region, profile).await?;
        SageMakerApi::new(
            region,
            endpoint_url,
            Arc::new(creds),
            &ConnectOptions::default(),
        )
    }

    /// The region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Calls `operation` with `body`; the answer's JSON (`{}` when empty). A transient
    /// failure of an operation that is safe to repeat (anything but `Create*`) is retried
    /// up to three times, 1, 2 and 4 s apart.
    pub async fn call(&self, operation: &str, body: &Value) -> Result<Value, ApiError> {
        let mut pause = Duration::from_secs(1);
        let mut tries = if operation.starts_with("Create") {
            1
        } else {
            4
        };
        loop {
            tries -= 1;
            match self.call_once(operation, body).await {
                Err(e) if tries > 0 && e.is_transient() => {
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                other => return other,
            }
        }
    }

    async fn call_once(&self, operation: &str, body: &Value) -> Result<Value, ApiError> {
        let fail = |status: u16, code: Option<String>, message: String| ApiError {
            operation: operation.to_owned(),
            status,
            code,
            message,
        };
        let payload = Bytes::from(serde_json::to_vec(body).unwrap_or_default());
        let uri: http::Uri = self
            .url
            .parse()
            .map_err(|e: http::uri::InvalidUri| fail(0, Some(LOCAL.into()), e.to_string()))?;
        let host = uri
            .authority()
            .map(|a| a.to_string())
            .ok_or_else(|| fail(0, Some(LOCAL.into()), "no host in the API URL".into()))?;
        let creds = self
            .credentials
            .credentials()
            .await
            .map_err(|e| fail(0, Some(LOCAL.into()), format!("AWS credentials: {e}")))?;
        let target = format!("SageMaker.{operation}");
        let headers = [
            ("host", host.as_str()),
            ("content-type", "application/x-amz-json-1.1"),
            ("x-amz-target", target.as_str()),
        ];
        let signed = sign_request(
            "POST",
            &self.url,
            &headers,
            &payload,
            &creds,
            &self.region,
            SERVICE,
            SystemTime::now(),
            SignOptions::default(),
        )
        .map_err(|e| fail(0, Some(LOCAL.into()), e))?;
        let mut req = http::Request::builder().method("POST").uri(uri);
        for (k, v) in headers.iter().copied() {
            req = req.header(k, v);
        }
        for (k, v) in &signed {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req
            .body(Full::new(payload))
            .map_err(|e| fail(0, Some(LOCAL.into()), e.to_string()))?;
        let exchange = async {
            let resp = self.client.request(req).await.map_err(|e| {
                fail(
                    0,
                    None,
                    crate::client::send_error("SageMaker", e).to_string(),
                )
            })?;
            let status = resp.status().as_u16();
            let text = Limited::new(resp.into_body(), 16 * 1024 * 1024)
                .collect()
                .await
                .map_err(|e| fail(status, None, format!("reading the answer: {e}")))?
                .to_bytes();
            if (200..300).contains(&status) {
                if text.iter().all(u8::is_ascii_whitespace) {
                    return Ok(Value::Object(Default::default()));
                }
                return serde_json::from_slice(&text)
                    .map_err(|e| fail(status, None, format!("the answer is not JSON: {e}")));
            }
            let (code, message) = error_parts(&text);
            Err(fail(status, code, message))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| {
                fail(
                    0,
                    None,
                    format!("no answer within {} s", self.timeout.as_secs()),
                )
            })?
    }
}

/// The error code and message of an error answer: JSON (`__type`, `message`/`Message`) or
/// the XML of an authentication failure (`<Code>`, `<Message>`).
fn error_parts(body: &[u8]) -> (Option<String>, String) {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        let code = v["__type"]
            .as_str()
            .map(|t| t.rsplit('#').next().unwrap_or(t).to_owned());
        let message = v["message"]
            .as_str()
            .or(v["Message"].as_str())
            .unwrap_or_default()
            .to_owned();
        return (code, message);
    }
    let text = String::from_utf8_lossy(body);
    let tag = |t: &str| {
        let open = format!("<{t}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&format!("</{t}>"))? + start;
        Some(text[start..end].to_owned())
    };
    let message = tag("Message").unwrap_or_else(|| text.chars().take(300).collect());
    (tag("Code"), message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_read_from_json_and_from_xml() {
        let (c, m) = error_parts(
            br#"{"__type":"com.amazonaws.sagemaker#ValidationException","Message":"Could not find endpoint 'x'."}"#,
        );
        assert_eq!(c.as_deref(), Some("ValidationException"));
        let e = ApiError {
            operation: "DeleteEndpoint".into(),
            status: 400,
            code: c,
            message: m,
        };
        assert!(e.is_not_found());
        assert_eq!(
            e.to_string(),
            "SageMaker DeleteEndpoint failed (HTTP 400): ValidationException: Could not find endpoint 'x'."
        );
        let (c, m) = error_parts(
            b"<ErrorResponse><Errors><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message></Error></Errors></ErrorResponse>",
        );
        assert_eq!(c.as_deref(), Some("SignatureDoesNotMatch"));
        assert!(m.starts_with("The request signature"));
    }
}
