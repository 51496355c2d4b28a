//! Configuration of the SageMaker runtime transport.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{Api, MaxTokensField, OpenAiConfig};
use crate::sagemaker::codec::PayloadCodec;
use crate::Error;

/// The request body sent to the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BodyFormat {
    /// An OpenAI chat-completions body (what the vLLM container's `/invocations` accepts).
    #[default]
    OpenAiChat,
    /// An OpenAI completions body.
    OpenAiCompletions,
    /// A TGI / LMI body: `{"inputs": "...", "parameters": {"max_new_tokens": N, ...}}`.
    Tgi,
}

impl BodyFormat {
    /// Parses `chat`, `completions` or `tgi`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "chat" | "openai-chat" | "openai_chat" => Some(Self::OpenAiChat),
            "completions" | "openai-completions" | "openai_completions" => {
                Some(Self::OpenAiCompletions)
            }
            "tgi" | "lmi" => Some(Self::Tgi),
            _ => None,
        }
    }
}

impl std::str::FromStr for BodyFormat {
    type Err = kneepoint_core::UnknownName;

    /// `chat`, `completions` or `tgi` (see [`BodyFormat::parse`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| {
            kneepoint_core::UnknownName::new(
                "the SageMaker body",
                s,
                &["chat", "completions", "tgi"],
            )
        })
    }
}

/// How the bytes inside a response stream's `PayloadPart`s are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodecKind {
    /// Server-sent events (`data: {...}\n\n`), as the vLLM and TGI containers stream.
    #[default]
    Sse,
    /// One JSON object per line.
    JsonLines,
}

impl std::str::FromStr for CodecKind {
    type Err = kneepoint_core::UnknownName;

    /// `sse` or `jsonlines` (also `json_lines`, `jsonl`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sse" => Ok(CodecKind::Sse),
            "jsonlines" | "json_lines" | "jsonl" => Ok(CodecKind::JsonLines),
            _ => Err(kneepoint_core::UnknownName::new(
                "the payload codec",
                s,
                &["sse", "jsonlines"],
            )),
        }
    }
}

/// Makes a fresh codec for each response (for payload framings kneepoint does not know).
pub type CodecFactory = Arc<dyn Fn() -> Box<dyn PayloadCodec> + Send + Sync>;

/// SageMaker's optional request headers (`X-Amzn-SageMaker-*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvokeHeaders {
    /// `X-Amzn-SageMaker-Custom-Attributes`.
    pub custom_attributes: Option<String>,
    /// `X-Amzn-SageMaker-Target-Variant`.
    pub target_variant: Option<String>,
    /// `X-Amzn-SageMaker-Target-Container-Hostname`.
    pub target_container_hostname: Option<String>,
    /// `X-Amzn-SageMaker-Inference-Component` (endpoints with Inference Components).
    pub inference_component: Option<String>,
    /// `X-Amzn-SageMaker-Session-Id` (stateful sessions).
    pub session_id: Option<String>,
    /// `X-Amzn-SageMaker-Inference-Id`.
    pub inference_id: Option<String>,
    /// `X-Amzn-SageMaker-Target-Model` (multi-model endpoints; `InvokeEndpoint` only).
    pub target_model: Option<String>,
}

/// Everything the SageMaker runtime transport needs (credentials come separately).
#[derive(Clone)]
#[non_exhaustive]
pub struct SageMakerConfig {
    /// The endpoint's name.
    pub endpoint_name: String,
    /// The AWS region (`us-east-1`, ...).
    pub region: String,
    /// Overrides `https://runtime.sagemaker.{region}.amazonaws.com` (VPC endpoints, tests).
    pub endpoint_url: Option<String>,
    /// The body format.
    pub body: BodyFormat,
    /// The `model` field of OpenAI bodies (the vLLM container ignores or checks it).
    pub model: String,
    /// `InvokeEndpointWithResponseStream` (true) or `InvokeEndpoint`.
    pub streaming: bool,
    /// Ask for a final usage chunk (OpenAI bodies, streaming).
    pub include_usage: bool,
    /// Output-length field of OpenAI bodies.
    pub max_tokens_field: MaxTokensField,
    /// Extra body fields (OpenAI bodies: top level; TGI: inside `parameters`).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// `Content-Type` of the request.
    pub content_type: String,
    /// `Accept` (or `X-Amzn-SageMaker-Accept` when streaming).
    pub accept: String,
    /// Optional SageMaker headers.
    pub headers: InvokeHeaders,
    /// How `PayloadPart` bytes are framed.
    pub codec: CodecKind,
    /// A codec of the user's own, used instead of `codec` when set.
    pub custom_codec: Option<CodecFactory>,
    /// TCP connect timeout.
    pub connect_timeout: Option<Duration>,
    /// Longest SSE line or JSON line accepted inside the payload.
    pub max_line_bytes: usize,
    /// Largest whole (non-streaming) body or event-stream frame accepted.
    pub max_body_bytes: usize,
    /// Tell kneepoint's own simulator the prompt's token count (`x-kneepoint-input-tokens`).
    pub send_input_token_hint: bool,
    /// Which header names each request (`x-request-id` with a UUID by default).
    pub request_id: crate::RequestIdHeader,
    /// CA bundle, client certificate, verification and HTTP/2.
    pub connect: crate::ConnectOptions,
}

impl std::fmt::Debug for SageMakerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SageMakerConfig")
            .field("endpoint_name", &self.endpoint_name)
            .field("region", &self.region)
            .field("endpoint_url", &self.endpoint_url)
            .field("body", &self.body)
            .field("streaming", &self.streaming)
            .field("codec", &self.codec)
            .field("custom_codec", &self.custom_codec.is_some())
            .finish_non_exhaustive()
    }
}

impl SageMakerConfig {
    /// A streaming configuration with an OpenAI chat body.
    pub fn new(endpoint_name: impl Into<String>, region: impl Into<String>) -> Self {
        SageMakerConfig {
            endpoint_name: endpoint_name.into(),
            region: region.into(),
            endpoint_url: None,
            body: BodyFormat::OpenAiChat,
            model: String::new(),
            streaming: true,
            include_usage: true,
            max_tokens_field: MaxTokensField::MaxTokens,
            extra_body: serde_json::Map::new(),
            content_type: "application/json".into(),
            accept: "application/json".into(),
            headers: InvokeHeaders::default(),
            codec: CodecKind::Sse,
            custom_codec: None,
            connect_timeout: Some(Duration::from_secs(10)),
            max_line_bytes: 1 << 20,
            max_body_bytes: 64 << 20,
            send_input_token_hint: false,
            request_id: crate::RequestIdHeader::default(),
            connect: crate::ConnectOptions::default(),
        }
    }

    /// The runtime's base URL: the override, or the regional public endpoint.
    pub fn base_url(&self) -> String {
        match &self.endpoint_url {
            Some(u) => u.trim_end_matches('/').to_owned(),
            None => format!("https://runtime.sagemaker.{}.amazonaws.com", self.region),
        }
    }

    /// The invocation URL of this configuration.
    pub fn url(&self) -> String {
        let op = if self.streaming {
            "invocations-response-stream"
        } else {
            "invocations"
        };
        format!("{}/endpoints/{}/{op}", self.base_url(), self.endpoint_name)
    }

    /// Checks the endpoint name and region.
    pub fn validate(&self) -> Result<(), Error> {
        let name = &self.endpoint_name;
        let ok_name = !name.is_empty()
            && name.len() <= 63
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !name.starts_with('-')
            && !name.ends_with('-');
        if !ok_name {
            return Err(Error::InvalidUrl {
                url: name.clone(),
                reason: "a SageMaker endpoint name has 1-63 letters, digits and inner hyphens"
                    .into(),
            });
        }
        let ok_region = !self.region.is_empty()
            && self
                .region
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !ok_region {
            return Err(Error::InvalidUrl {
                url: self.region.clone(),
                reason: "the region looks like us-east-1".into(),
            });
        }
        Ok(())
    }

    /// The OpenAI-body settings, for the shared body builder.
    pub(crate) fn openai_view(&self) -> OpenAiConfig {
        let mut c = OpenAiConfig::new(self.base_url(), self.model.clone());
        c.api = match self.body {
            BodyFormat::OpenAiCompletions => Api::Completions,
            _ => Api::Chat,
        };
        c.streaming = self.streaming;
        c.include_usage = self.include_usage;
        c.max_tokens_field = self.max_tokens_field;
        c.extra_body = self.extra_body.clone();
        c
    }
}
