//! Configuration of the OpenAI-compatible transport.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::connect::ConnectOptions;
use crate::request_id::RequestIdHeader;

/// Which OpenAI-compatible API to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `/v1/chat/completions`: `messages` in, `choices[].delta.content` out.
    #[default]
    Chat,
    /// `/v1/completions`: `prompt` in, `choices[].text` out.
    Completions,
    /// `/v1/embeddings`: `input` (a batch) in, `data[].embedding` out; never streamed.
    Embeddings,
    /// `/v1/rerank` (vLLM, Jina and Cohere's shape): `query` and `documents` in, `results[]`
    /// out; never streamed.
    Rerank,
    /// `/v1/score` (vLLM): `text_1` (the query) and `text_2` (the documents) in, `data[]` out;
    /// never streamed.
    Score,
}

impl Api {
    /// The default path of this API.
    pub fn default_path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
            Api::Embeddings => "/v1/embeddings",
            Api::Rerank => "/v1/rerank",
            Api::Score => "/v1/score",
        }
    }

    /// True for the pooling APIs (embeddings, rerank, score): no generation, no stream.
    pub fn is_pooling(self) -> bool {
        matches!(self, Api::Embeddings | Api::Rerank | Api::Score)
    }
}

impl std::str::FromStr for Api {
    type Err = kneepoint_core::UnknownName;

    /// `chat`, `completions`, `embeddings`, `rerank` or `score`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "chat" => Ok(Api::Chat),
            "completions" => Ok(Api::Completions),
            "embeddings" => Ok(Api::Embeddings),
            "rerank" => Ok(Api::Rerank),
            "score" => Ok(Api::Score),
            _ => Err(kneepoint_core::UnknownName::new(
                "the endpoint type",
                s,
                &["chat", "completions", "embeddings", "rerank", "score"],
            )),
        }
    }
}

/// Which body field carries the output length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`: understood by every OpenAI-compatible server.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's newer name (some servers ignore it).
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The JSON field name.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

impl std::str::FromStr for MaxTokensField {
    type Err = kneepoint_core::UnknownName;

    /// `max_tokens` or `max_completion_tokens`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "max_tokens" => Ok(MaxTokensField::MaxTokens),
            "max_completion_tokens" => Ok(MaxTokensField::MaxCompletionTokens),
            _ => Err(kneepoint_core::UnknownName::new(
                "the max-tokens field",
                s,
                &["max_tokens", "max_completion_tokens"],
            )),
        }
    }
}

/// An API key. Its `Debug` output is redacted and it is never written to exports.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key, registering it as a secret of this process
    /// ([`kneepoint_core::secrets`]): whatever kneepoint writes or prints is scrubbed of it.
    pub fn new(key: impl Into<String>) -> Self {
        let key = key.into();
        kneepoint_core::secrets::register(&key);
        ApiKey(key)
    }

    /// The key itself, for building the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// Everything the OpenAI-compatible transport needs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenAiConfig {
    /// `scheme://host[:port][/prefix]`. A trailing `/v1` is not repeated when the path starts
    /// with `/v1/`.
    pub base_url: String,
    /// Which API.
    pub api: Api,
    /// The request path; `None` uses [`Api::default_path`].
    pub path: Option<String>,
    /// The `model` field.
    pub model: String,
    /// Sent as `Authorization: Bearer ...`.
    pub api_key: Option<ApiKey>,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Extra body fields merged into every request (a request's own extras win).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Ask for an SSE stream (`stream: true`).
    pub streaming: bool,
    /// Ask for usage in the stream (`stream_options.include_usage`).
    pub include_usage: bool,
    /// Which field carries the output length.
    pub max_tokens_field: MaxTokensField,
    /// TCP connect deadline.
    pub connect_timeout: Option<Duration>,
    /// The longest SSE line accepted, in bytes.
    pub max_line_bytes: usize,
    /// The largest non-streaming body (or error body) read, in bytes.
    pub max_body_bytes: usize,
    /// Send the workload's prompt token count as `x-kneepoint-input-tokens` (for kneepoint's
    /// own simulator, which then need not tokenize every prompt on a CPU it shares with the
    /// client). Never for a request with images or audio, whose tokens the server counts. Off
    /// by default.
    pub send_input_token_hint: bool,
    /// Which header names each request (`x-request-id` with a UUID by default).
    pub request_id: RequestIdHeader,
    /// CA bundle, client certificate, verification and HTTP/2.
    pub connect: ConnectOptions,
}

impl OpenAiConfig {
    /// A streaming chat configuration for `base_url` and `model` with defaults elsewhere.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api: Api::Chat,
            path: None,
            model: model.into(),
            api_key: None,
            headers: Vec::new(),
            extra_body: serde_json::Map::new(),
            streaming: true,
            include_usage: true,
            max_tokens_field: MaxTokensField::MaxTokens,
            connect_timeout: Some(Duration::from_secs(10)),
            max_line_bytes: 1 << 20,
            max_body_bytes: 16 << 20,
            send_input_token_hint: false,
            request_id: RequestIdHeader::default(),
            connect: ConnectOptions::default(),
        }
    }

    /// The full request URL.
    pub fn url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        let path = self.path.as_deref().unwrap_or(self.api.default_path());
        let path = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        if base.ends_with("/v1") && path.starts_with("/v1/") {
            format!("{base}{}", &path[3..])
        } else {
            format!("{base}{path}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_joins_without_doubling_v1() {
        let mut c = OpenAiConfig::new("http://h:8000/", "m");
        assert_eq!(c.url(), "http://h:8000/v1/chat/completions");
        c.base_url = "https://h/v1".into();
        assert_eq!(c.url(), "https://h/v1/chat/completions");
        c.api = Api::Completions;
        assert_eq!(c.url(), "https://h/v1/completions");
        c.path = Some("invocations".into());
        assert_eq!(c.url(), "https://h/v1/invocations");
    }

    #[test]
    fn api_key_is_redacted() {
        let k = ApiKey::new("sk-secret");
        assert_eq!(format!("{k:?}"), "ApiKey([redacted])");
        let mut c = OpenAiConfig::new("http://h", "m");
        c.api_key = Some(k);
        assert!(!format!("{c:?}").contains("sk-secret"));
    }
}
