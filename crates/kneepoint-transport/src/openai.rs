//! The OpenAI-compatible transport: `/v1/chat/completions` and `/v1/completions` over hyper.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, Method, Uri};
use http_body_util::{BodyExt, Full, Limited};
use kneepoint_core::{async_trait, Error as RequestError, EventStream, Request, Transport};

use crate::body::{body_bytes, request_body};
use crate::client::{explaining_headers, https_client, send_error, HttpClient};
use crate::config::OpenAiConfig;
use crate::parse::parse_body;
use crate::receive_clock::{stamps_of, StampChunks};
use crate::request_id::RequestIds;
use crate::sse::excerpt;
use crate::stream::SseStream;
use crate::Error;

/// The longest error-body excerpt kept in a record.
pub(crate) const ERROR_EXCERPT_BYTES: usize = 512;

/// A pooled hyper client speaking the OpenAI-compatible API (HTTP and HTTPS via rustls).
#[derive(Clone)]
pub struct OpenAiTransport {
    config: OpenAiConfig,
    uri: Uri,
    target: String,
    headers: HeaderMap,
    ids: RequestIds,
    client: HttpClient,
    /// The API key and header values: never written into a record, even when a server
    /// echoes them back in an error body.
    secrets: std::sync::Arc<Vec<String>>,
}

impl std::fmt::Debug for OpenAiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiTransport")
            .field("uri", &self.uri)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiTransport {
    /// Builds the transport, validating the URL and headers. Needs a Tokio runtime when used.
    pub fn new(config: OpenAiConfig) -> Result<Self, Error> {
        let url = config.url();
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| Error::InvalidUrl {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        match uri.scheme_str() {
            Some("http") | Some("https") => {}
            _ => {
                return Err(Error::InvalidUrl {
                    url,
                    reason: "the scheme must be http or https".into(),
                })
            }
        }
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(Error::InvalidUrl {
                url: "[redacted]".into(),
                reason: "credentials in the URL are not supported; use an API key".into(),
            });
        }
        let target = uri.authority().map(|a| a.to_string()).unwrap_or_default();
        // What the process writes or prints is scrubbed of these from now on.
        kneepoint_core::secrets::register_url(&url);
        for (name, value) in &config.headers {
            kneepoint_core::secrets::register_header(name, value);
        }
        if let crate::ProxySetting::Url(proxy) = &config.connect.proxy {
            kneepoint_core::secrets::register_url(proxy);
        }
        let headers = build_headers(&config)?;
        let ids = RequestIds::new(&config.request_id)?;

        let client = https_client(config.connect_timeout, &config.connect, Some(&uri))?;
        let secrets = config
            .api_key
            .iter()
            .map(|k| k.expose().to_owned())
            .chain(config.headers.iter().map(|(_, v)| v.clone()))
            .collect();
        Ok(OpenAiTransport {
            config,
            uri,
            target,
            headers,
            ids,
            client,
            secrets: std::sync::Arc::new(secrets),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The model ids the server lists at `GET /v1/models` (relative to the base URL), in order.
    /// Doubles as a readiness check before a run.
    pub async fn models(&self) -> Result<Vec<String>, RequestError> {
        let base = self.config.base_url.trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            format!("{base}/models")
        } else {
            format!("{base}/v1/models")
        };
        let uri: Uri =
            url.parse()
                .map_err(|e: http::uri::InvalidUri| RequestError::InvalidRequest {
                    message: e.to_string(),
                })?;
        let mut builder = http::Request::builder().method(Method::GET).uri(uri);
        if let Some(h) = builder.headers_mut() {
            h.extend(
                self.headers
                    .iter()
                    .filter(|(k, _)| *k != CONTENT_TYPE && *k != ACCEPT)
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
        let req =
            builder
                .body(Full::new(Bytes::new()))
                .map_err(|e| RequestError::InvalidRequest {
                    message: e.to_string(),
                })?;
        let resp = self.roundtrip(req).await?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = read_limited(resp.into_body(), self.config.max_body_bytes).await?;
        if !status.is_success() {
            return Err(RequestError::Status {
                status: status.as_u16(),
                body_excerpt: excerpt(&bytes),
                headers: explaining_headers(&headers),
            });
        }
        #[derive(serde::Deserialize)]
        struct List {
            data: Vec<Model>,
        }
        #[derive(serde::Deserialize)]
        struct Model {
            id: String,
        }
        let list: List =
            serde_json::from_slice(&bytes).map_err(|e| RequestError::MalformedResponse {
                message: format!("unexpected /v1/models body: {}", excerpt(&bytes)),
                source: Some(Box::new(e)),
            })?;
        Ok(list.data.into_iter().map(|m| m.id).collect())
    }

    fn http_request(&self, request: &Request) -> Result<http::Request<Full<Bytes>>, RequestError> {
        let bytes =
            body_bytes(&self.config, request).map_err(|e| RequestError::InvalidRequest {
                message: format!("cannot encode the body: {e}"),
            })?;
        let mut builder = http::Request::builder()
            .method(Method::POST)
            .uri(self.uri.clone());
        if let Some(h) = builder.headers_mut() {
            h.extend(self.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
            if let Some(name) = self.ids.header_name() {
                if let Ok(v) = HeaderValue::from_str(&self.ids.value(request.id)) {
                    h.insert(name.clone(), v);
                }
            }
            // The hint counts text only: a request with media lets the server count it all.
            if self.config.send_input_token_hint
                && request.images.is_empty()
                && request.audio.is_empty()
            {
                if let Some(n) = request.input_tokens {
                    h.insert(
                        HeaderName::from_static("x-kneepoint-input-tokens"),
                        HeaderValue::from(n),
                    );
                }
            }
        }
        builder
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| RequestError::InvalidRequest {
                message: e.to_string(),
            })
    }

    /// Sends `req` on the pooled client; failures are classified (connect or disconnected).
    async fn roundtrip(
        &self,
        req: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<hyper::body::Incoming>, RequestError> {
        self.client
            .request(req)
            .await
            .map_err(|e| self.send_error(e))
    }

    fn send_error(&self, e: hyper_util::client::legacy::Error) -> RequestError {
        send_error(&self.target, e)
    }
}

fn build_headers(config: &OpenAiConfig) -> Result<HeaderMap, Error> {
    let mut h = HeaderMap::new();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(
        ACCEPT,
        HeaderValue::from_static(if config.streaming && !config.api.is_pooling() {
            "text/event-stream"
        } else {
            "application/json"
        }),
    );
    if let Some(key) = &config.api_key {
        let mut v = HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
            Error::InvalidHeader {
                name: "authorization".into(),
                reason: "the API key has characters not allowed in a header".into(),
            }
        })?;
        v.set_sensitive(true);
        h.insert(AUTHORIZATION, v);
    }
    for (name, value) in &config.headers {
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| Error::InvalidHeader {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        let mut v = HeaderValue::from_str(value).map_err(|_| Error::InvalidHeader {
            name: name.clone(),
            reason: "the value has characters not allowed in a header".into(),
        })?;
        v.set_sensitive(true);
        h.insert(n, v);
    }
    Ok(h)
}

pub(crate) async fn read_limited(
    body: hyper::body::Incoming,
    limit: usize,
) -> Result<Bytes, RequestError> {
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => {
            if e.is::<http_body_util::LengthLimitError>() {
                Err(RequestError::malformed(format!(
                    "response body larger than {limit} bytes"
                )))
            } else {
                let how = crate::client::how_lost(e.as_ref());
                Err(RequestError::Disconnected {
                    message: format!("{how}: {e}"),
                    source: Some(e),
                })
            }
        }
    }
}

#[async_trait]
impl Transport for OpenAiTransport {
    async fn send(&self, request: &Request) -> Result<EventStream, RequestError> {
        if self.secrets.is_empty() {
            return self.send_unredacted(request).await;
        }
        let secrets = self.secrets.clone();
        let redact = move |e: RequestError| {
            let list: Vec<&str> = secrets.iter().map(String::as_str).collect();
            e.redact(&list)
        };
        let stream = self.send_unredacted(request).await.map_err(&redact)?;
        Ok(Box::pin(futures_util::StreamExt::map(
            stream,
            move |item| item.map_err(&redact),
        )))
    }

    fn payload(&self, request: &Request) -> Option<serde_json::Value> {
        Some(request_body(&self.config, request))
    }

    fn request_id(&self, request: &Request) -> Option<String> {
        self.ids.sent(request.id)
    }
}

impl OpenAiTransport {
    /// Sends `request`; errors may still hold what the server echoed.
    async fn send_unredacted(&self, request: &Request) -> Result<EventStream, RequestError> {
        let req = self.http_request(request)?;
        let sent = std::time::Instant::now();
        let resp = self.roundtrip(req).await?;
        let status = resp.status();
        if !status.is_success() {
            let headers = explaining_headers(resp.headers());
            let body = resp.into_body();
            let excerpt_text = match Limited::new(body, ERROR_EXCERPT_BYTES * 8).collect().await {
                Ok(c) => excerpt(&c.to_bytes()[..]),
                Err(_) => String::new(),
            };
            let cut: String = excerpt_text.chars().take(ERROR_EXCERPT_BYTES).collect();
            return Err(RequestError::Status {
                status: status.as_u16(),
                body_excerpt: cut,
                headers,
            });
        }
        if self.config.streaming {
            let is_sse = resp
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_none_or(|v| v.starts_with("text/event-stream"));
            if !is_sse {
                // Some servers answer a streaming request with one JSON body; accept it.
                return whole_body(resp, sent, self.config.max_body_bytes).await;
            }
            let clock = stamps_of(&resp, sent);
            return Ok(Box::pin(StampChunks::new(
                SseStream::new(resp.into_body(), self.config.max_line_bytes),
                clock,
            )));
        }
        whole_body(resp, sent, self.config.max_body_bytes).await
    }
}

async fn whole_body(
    resp: http::Response<hyper::body::Incoming>,
    sent: std::time::Instant,
    limit: usize,
) -> Result<EventStream, RequestError> {
    let clock = stamps_of(&resp, sent);
    let bytes = read_limited(resp.into_body(), limit).await?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| RequestError::malformed(format!("invalid UTF-8 body: {}", excerpt(&bytes))))?;
    let mut events = Vec::new();
    parse_body(text, &mut events)?;
    Ok(Box::pin(StampChunks::new(
        kneepoint_core::iter_stream(events.into_iter().map(Ok).collect::<Vec<_>>()),
        clock,
    )))
}
