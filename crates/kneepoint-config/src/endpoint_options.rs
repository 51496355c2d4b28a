//! The endpoint group ([`EndpointOptions`]): the Endpoint and SageMaker flags and the file's
//! `[endpoint]` section in one struct. The file spells a few keys its own way (`type` for
//! `--endpoint-type`, `path`, `body_format` for `--sagemaker-body`, `insecure_skip_verify`),
//! takes headers and extra body fields as tables, and has the SageMaker session and inference
//! ids; `--route-by`, `--streaming` (the file's is in `[workload]`) and `--no-output-control`
//! are flags only.

use std::path::PathBuf;

use clap::Args;
use merge::Merge;
use serde::Deserialize;

/// The flags' names for [`EndpointOptions`] (one group since the file's `[endpoint]` holds both).
pub type EndpointArgs = EndpointOptions;

/// The endpoint and the client that reaches it (`[endpoint]` and its flags): an
/// OpenAI-compatible URL (API, model, headers, TLS, proxy, deadlines) or a SageMaker endpoint
/// (its flags under their own `--help` heading).
#[derive(Debug, Clone, Default, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct EndpointOptions {
    /// Base URL of an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000. Without it the
    /// built-in simulator is started on a loopback port. Repeat it for several replicas: the
    /// requests are spread over them (--route-by).
    #[arg(long)]
    #[serde(default, deserialize_with = "crate::choices::one")]
    pub url: Option<Vec<String>>,
    /// `chat` (/v1/chat/completions), `completions` (/v1/completions), or a pooling endpoint:
    /// `embeddings` (/v1/embeddings), `rerank` (/v1/rerank), `score` (/v1/score).
    #[arg(long, value_name = "TYPE")]
    #[serde(rename = "type")]
    pub endpoint_type: Option<kneepoint_transport::Api>,
    /// Request path, overriding the endpoint type's default.
    #[arg(long, value_name = "PATH")]
    #[serde(rename = "path")]
    pub endpoint_path: Option<String>,
    /// The `model` field sent (default with --url: the first model GET /v1/models lists).
    /// Several, comma-separated, each with an optional weight (`base=3,adapter-1=1`: LoRA
    /// adapters served by name): the requests are spread over them (--route-by).
    #[arg(long)]
    pub model: Option<String>,
    /// With several models or URLs: `round-robin` (default), `weighted` (by the models'
    /// weights), or `sticky` (every turn of a conversation to one target; the default for
    /// multi-turn conversations).
    #[arg(long, value_name = "RULE")]
    #[serde(skip)]
    pub route_by: Option<String>,
    /// Name of the environment variable holding the API key (default: OPENAI_API_KEY).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Extra header `Name: value` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    #[serde(skip)]
    #[merge(skip)]
    pub headers: Vec<String>,
    /// Extra JSON object merged into every request body.
    #[arg(long, value_name = "JSON")]
    #[serde(skip)]
    pub extra_body: Option<String>,
    /// Stream responses (SSE); needed for TTFT and ITL. `--streaming false` for whole responses.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    #[serde(skip)]
    pub streaming: Option<bool>,
    /// Body field for the output length: max_tokens or max_completion_tokens.
    #[arg(long, value_name = "FIELD")]
    pub max_tokens_field: Option<kneepoint_transport::MaxTokensField>,
    /// Do not send ignore_eos / min_tokens (for servers that reject them).
    #[arg(long)]
    #[serde(skip)]
    #[merge(strategy = merge::bool::overwrite_false)]
    pub no_output_control: bool,
    /// Header naming each request: x-request-id (default), another name, or `none`.
    #[arg(long, value_name = "NAME|none")]
    pub request_id_header: Option<String>,
    /// Form of the request id: uuid (default; servers that validate ids accept it) or integer.
    #[arg(long, value_name = "uuid|integer")]
    pub request_id_format: Option<kneepoint_transport::RequestIdStyle>,
    /// PEM file of CA certificates to trust besides the system's (a private CA).
    #[arg(long, value_name = "FILE")]
    pub ca_bundle: Option<PathBuf>,
    /// PEM client certificate chain for mutual TLS (with --client-key).
    #[arg(long, value_name = "FILE")]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(long, value_name = "FILE")]
    pub client_key: Option<PathBuf>,
    /// Accept any TLS certificate (test endpoints only; a warning is printed).
    #[arg(long)]
    #[serde(default, rename = "insecure_skip_verify")]
    #[merge(strategy = merge::bool::overwrite_false)]
    pub insecure: bool,
    /// Offer HTTP/2 by ALPN on https: streams then share one connection per host.
    #[arg(long)]
    #[serde(default)]
    #[merge(strategy = merge::bool::overwrite_false)]
    pub http2: bool,
    /// Proxy for every request (http://host:port, or http://user:pass@host:port), or `none`; default: the
    /// HTTPS_PROXY / HTTP_PROXY / ALL_PROXY / NO_PROXY environment, as curl reads it.
    #[arg(long, value_name = "URL|none")]
    pub proxy: Option<String>,
    /// Open connections from these local addresses in turn (`127.0.0.2-127.0.0.9`, or a
    /// comma-separated list): each address reaches one endpoint with about 28,000 ports, so N
    /// addresses hold N times as many streams. Loopback's 127.0.0.0/8 needs no setup on Linux.
    #[arg(long, value_name = "ADDRS")]
    pub source_addrs: Option<String>,
    /// Per-request deadline in seconds.
    #[arg(long, value_name = "SECONDS")]
    pub request_timeout_s: Option<f64>,
    /// Deadline for the response headers, seconds.
    #[arg(long, value_name = "SECONDS")]
    pub response_timeout_s: Option<f64>,
    /// Deadline for the first token, from the request's start, seconds.
    #[arg(long, value_name = "SECONDS")]
    pub first_token_timeout_s: Option<f64>,
    /// Longest gap between two streamed events after the first token, seconds.
    #[arg(long, value_name = "SECONDS")]
    pub idle_timeout_s: Option<f64>,

    /// A SageMaker endpoint to invoke (SigV4-signed, credentials from the standard AWS chain)
    /// instead of an OpenAI-compatible URL.
    #[arg(long, help_heading = "SageMaker", value_name = "NAME")]
    pub sagemaker_endpoint: Option<String>,
    /// AWS region of the SageMaker endpoint (else AWS_REGION / AWS_DEFAULT_REGION).
    #[arg(long, help_heading = "SageMaker")]
    pub region: Option<String>,
    /// SageMaker runtime URL override (VPC endpoint, or a local simulator).
    #[arg(long, help_heading = "SageMaker", value_name = "URL")]
    pub endpoint_url: Option<String>,
    /// SageMaker request body: chat (OpenAI chat, the vLLM container), completions, or tgi
    /// (`{"inputs", "parameters"}`).
    #[arg(long, help_heading = "SageMaker", value_name = "FORMAT", value_parser = ["chat", "completions", "tgi"])]
    #[serde(rename = "body_format")]
    pub sagemaker_body: Option<String>,
    /// Framing of streamed payloads: sse (default) or jsonlines.
    #[arg(long, help_heading = "SageMaker", value_name = "CODEC", value_parser = ["sse", "jsonlines"])]
    pub payload_codec: Option<String>,
    /// X-Amzn-SageMaker-Inference-Component.
    #[arg(long, help_heading = "SageMaker", value_name = "NAME")]
    pub inference_component: Option<String>,
    /// X-Amzn-SageMaker-Target-Variant.
    #[arg(long, help_heading = "SageMaker", value_name = "VARIANT")]
    pub target_variant: Option<String>,
    /// X-Amzn-SageMaker-Custom-Attributes.
    #[arg(long, help_heading = "SageMaker", value_name = "TEXT")]
    pub custom_attributes: Option<String>,
    /// X-Amzn-SageMaker-Target-Container-Hostname.
    #[arg(long, help_heading = "SageMaker", value_name = "HOST")]
    pub target_container_hostname: Option<String>,
    /// X-Amzn-SageMaker-Target-Model (InvokeEndpoint only).
    #[arg(long, help_heading = "SageMaker", value_name = "MODEL")]
    pub target_model: Option<String>,
    /// AWS profile for credentials (else AWS_PROFILE / default).
    #[arg(long, help_heading = "SageMaker", value_name = "PROFILE")]
    pub aws_profile: Option<String>,
    /// File only: extra headers (`--header` on the command line).
    #[arg(skip)]
    #[serde(default, rename = "headers")]
    #[merge(strategy = crate::options::fill_empty)]
    pub header_map: std::collections::BTreeMap<String, String>,
    /// File only: extra body fields as a table (`--extra-body JSON` on the command line).
    #[arg(skip)]
    #[serde(rename = "extra_body")]
    pub extra_body_map: Option<serde_json::Map<String, serde_json::Value>>,
    /// File only: `X-Amzn-SageMaker-Session-Id`.
    #[arg(skip)]
    pub session_id: Option<String>,
    /// File only: `X-Amzn-SageMaker-Inference-Id`.
    #[arg(skip)]
    pub inference_id: Option<String>,
}
