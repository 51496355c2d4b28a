//! The SageMaker runtime transport (feature `sagemaker`): `InvokeEndpoint` and
//! `InvokeEndpointWithResponseStream` over kneepoint's hyper client, SigV4-signed with
//! `aws-sigv4`, credentials from the standard AWS chain, response streams decoded with
//! `aws-smithy-eventstream`.
//!
//! ```
//! use kneepoint_core::{Request, Transport};
//! use kneepoint_transport::sagemaker::{
//!     BodyFormat, SageMakerConfig, SageMakerTransport, StaticCredentials,
//! };
//! use aws_credential_types::Credentials;
//!
//! let mut config = SageMakerConfig::new("my-endpoint", "us-east-1");
//! config.body = BodyFormat::Tgi;
//! config.headers.inference_component = Some("my-ic".into());
//! let creds = StaticCredentials(Credentials::new("AKID", "secret", None, None, "doc"));
//! let transport = SageMakerTransport::new(config, std::sync::Arc::new(creds)).unwrap();
//! let mut request = Request::text(1, "Hello");
//! request.max_output_tokens = Some(16);
//! let body = transport.payload(&request).unwrap();
//! assert_eq!(body["inputs"], "Hello");
//! assert_eq!(body["parameters"]["max_new_tokens"], 16);
//! ```

mod body;
mod codec;
mod config;
mod control;
mod credentials;
mod errors;
pub mod eventstream;
pub mod sign;

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{Method, Uri};
use http_body_util::{BodyExt, Full, Limited};
use kneepoint_core::{async_trait, Error as RequestError, EventStream, Request, Transport};

pub use body::invoke_body;
pub use codec::{parse_payload, JsonLinesCodec, PayloadCodec, SseCodec};
pub use config::{BodyFormat, CodecFactory, CodecKind, InvokeHeaders, SageMakerConfig};
pub use control::{ApiError, SageMakerApi};
pub use credentials::{AwsCredentialChain, CredentialSource, StaticCredentials};
pub use errors::status_error;

use crate::client::{https_client, send_error, HttpClient};
use crate::openai::{read_limited, ERROR_EXCERPT_BYTES};
use crate::receive_clock::{stamps_of, StampChunks};
use crate::request_id::RequestIds;
use crate::sse::excerpt;
use crate::Error;
use eventstream::EventStreamBody;

/// The SageMaker runtime transport.
#[derive(Clone)]
pub struct SageMakerTransport {
    config: SageMakerConfig,
    uri: Uri,
    url: String,
    target: String,
    host: String,
    credentials: Arc<dyn CredentialSource>,
    ids: RequestIds,
    client: HttpClient,
}

impl std::fmt::Debug for SageMakerTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SageMakerTransport")
            .field("url", &self.url)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl SageMakerTransport {
    /// Builds the transport. Needs a Tokio runtime when used.
    pub fn new(
        config: SageMakerConfig,
        credentials: Arc<dyn CredentialSource>,
    ) -> Result<Self, Error> {
        config.validate()?;
        let url = config.url();
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| Error::InvalidUrl {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        if !matches!(uri.scheme_str(), Some("http") | Some("https")) {
            return Err(Error::InvalidUrl {
                url,
                reason: "the scheme must be http or https".into(),
            });
        }
        let authority = uri.authority().map(|a| a.to_string()).unwrap_or_default();
        if authority.contains('@') {
            return Err(Error::InvalidUrl {
                url: "[redacted]".into(),
                reason: "credentials in the URL are not supported".into(),
            });
        }
        let mut extra: Vec<(&str, &Option<String>)> = vec![
            ("custom_attributes", &config.headers.custom_attributes),
            ("target_variant", &config.headers.target_variant),
            ("inference_component", &config.headers.inference_component),
        ];
        extra.push(("session_id", &config.headers.session_id));
        for (name, v) in extra {
            if let Some(v) = v {
                HeaderValue::from_str(v).map_err(|_| Error::InvalidHeader {
                    name: name.into(),
                    reason: "the value has characters not allowed in a header".into(),
                })?;
            }
        }
        Ok(SageMakerTransport {
            ids: RequestIds::new(&config.request_id)?,
            client: https_client(config.connect_timeout, &config.connect, Some(&uri))?,
            target: authority.clone(),
            host: authority,
            url,
            uri,
            config,
            credentials,
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &SageMakerConfig {
        &self.config
    }

    /// The headers of one request, before signing.
    fn headers(&self, request: &Request) -> Vec<(&str, String)> {
        let c = &self.config;
        let h = &c.headers;
        let mut out: Vec<(&str, String)> = vec![
            ("host", self.host.clone()),
            ("content-type", c.content_type.clone()),
        ];
        if c.streaming {
            out.push(("x-amzn-sagemaker-accept", c.accept.clone()));
        } else {
            out.push(("accept", c.accept.clone()));
        }
        let optional = [
            ("x-amzn-sagemaker-custom-attributes", &h.custom_attributes),
            ("x-amzn-sagemaker-target-variant", &h.target_variant),
            (
                "x-amzn-sagemaker-target-container-hostname",
                &h.target_container_hostname,
            ),
            (
                "x-amzn-sagemaker-inference-component",
                &h.inference_component,
            ),
            ("x-amzn-sagemaker-session-id", &h.session_id),
            ("x-amzn-sagemaker-inference-id", &h.inference_id),
        ];
        for (name, v) in optional {
            if let Some(v) = v {
                out.push((name, v.clone()));
            }
        }
        if !c.streaming {
            if let Some(m) = &h.target_model {
                out.push(("x-amzn-sagemaker-target-model", m.clone()));
            }
        }
        if let Some(name) = self.ids.header_name() {
            out.push((name.as_str(), self.ids.value(request.id)));
        }
        if c.send_input_token_hint {
            if let Some(n) = request.input_tokens {
                out.push(("x-kneepoint-input-tokens", n.to_string()));
            }
        }
        out
    }

    async fn http_request(
        &self,
        request: &Request,
    ) -> Result<http::Request<Full<Bytes>>, RequestError> {
        let body = serde_json::to_vec(&invoke_body(&self.config, request)).map_err(|e| {
            RequestError::InvalidRequest {
                message: format!("cannot encode the body: {e}"),
            }
        })?;
        let headers = self.headers(request);
        let creds = self.credentials.credentials().await?;
        let borrowed: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let signed = sign::sign_request(
            "POST",
            &self.url,
            &borrowed,
            &body,
            &creds,
            &self.config.region,
            sign::SERVICE,
            SystemTime::now(),
            sign::SignOptions::default(),
        )
        .map_err(|message| RequestError::InvalidRequest { message })?;
        let mut builder = http::Request::builder()
            .method(Method::POST)
            .uri(self.uri.clone());
        let invalid = |name: &str| RequestError::InvalidRequest {
            message: format!("header {name} has characters not allowed in a header"),
        };
        if let Some(h) = builder.headers_mut() {
            for (k, v) in headers.iter().filter(|(k, _)| *k != "host") {
                let value = HeaderValue::from_str(v).map_err(|_| invalid(k))?;
                let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| invalid(k))?;
                h.insert(name, value);
            }
            for (k, v) in &signed {
                let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| invalid(k))?;
                let mut value = HeaderValue::from_str(v).map_err(|_| invalid(k))?;
                value.set_sensitive(true);
                h.insert(name, value);
            }
        }
        builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| RequestError::InvalidRequest {
                message: e.to_string(),
            })
    }

    fn codec(&self) -> Box<dyn PayloadCodec> {
        if let Some(f) = &self.config.custom_codec {
            return f();
        }
        match self.config.codec {
            CodecKind::Sse => Box::new(SseCodec::new(self.config.max_line_bytes)),
            CodecKind::JsonLines => Box::new(JsonLinesCodec::new(self.config.max_line_bytes)),
        }
    }
}

#[async_trait]
impl Transport for SageMakerTransport {
    async fn send(&self, request: &Request) -> Result<EventStream, RequestError> {
        let req = self.http_request(request).await?;
        let sent = std::time::Instant::now();
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| send_error(&self.target, e))?;
        let status = resp.status();
        if !status.is_success() {
            let headers = resp.headers().clone();
            let bytes = match Limited::new(resp.into_body(), ERROR_EXCERPT_BYTES * 16)
                .collect()
                .await
            {
                Ok(c) => c.to_bytes(),
                Err(_) => Bytes::new(),
            };
            return Err(status_error(status.as_u16(), &headers, &bytes));
        }
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let clock = stamps_of(&resp, sent);
        if self.config.streaming {
            if !content_type.starts_with("application/vnd.amazon.eventstream") {
                return Err(RequestError::malformed(format!(
                    "expected an event stream, got content type {content_type:?}"
                )));
            }
            return Ok(Box::pin(StampChunks::new(
                EventStreamBody::new(resp.into_body(), self.codec(), self.config.max_body_bytes),
                clock,
            )));
        }
        let bytes = read_limited(resp.into_body(), self.config.max_body_bytes).await?;
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            RequestError::malformed(format!("invalid UTF-8 body: {}", excerpt(&bytes)))
        })?;
        let mut events = Vec::new();
        // Whole bodies: one JSON document, or JSON lines from some containers.
        let parsed = parse_payload(text, &mut events);
        if parsed.is_err() && text.trim().contains('\n') {
            events.clear();
            let mut codec = JsonLinesCodec::new(self.config.max_line_bytes);
            codec.push(text.as_bytes(), &mut events)?;
            codec.end(&mut events)?;
        } else {
            parsed?;
        }
        Ok(Box::pin(StampChunks::new(
            kneepoint_core::iter_stream(events.into_iter().map(Ok).collect::<Vec<_>>()),
            clock,
        )))
    }

    fn payload(&self, request: &Request) -> Option<serde_json::Value> {
        Some(invoke_body(&self.config, request))
    }

    fn request_id(&self, request: &Request) -> Option<String> {
        self.ids.sent(request.id)
    }
}
