//! Transports for kneepoint: the OpenAI-compatible client (chat and completions, SSE streaming or
//! whole responses) on hyper 1 with hyper-util's pooled client and rustls (ring) for HTTPS.
//!
//! With the `sagemaker` feature, [`sagemaker::SageMakerTransport`] invokes SageMaker endpoints
//! (SigV4, `InvokeEndpoint` and `InvokeEndpointWithResponseStream`).
//!
//! The transport yields each event as soon as its bytes are parsed, and the runner stamps
//! arrival times around it; each chunk also carries the time its connection last received bytes
//! ([`ReceiveClock`]: the kernel's receive time on Linux), which the runner prefers, so that the
//! client's own scheduling is not counted as the server's latency.
//!
//! # Example
//! ```
//! use kneepoint_transport::{OpenAiConfig, OpenAiTransport, Api};
//! use kneepoint_core::{Request, Transport};
//!
//! let mut config = OpenAiConfig::new("http://127.0.0.1:8000", "my-model");
//! config.api = Api::Completions;
//! let transport = OpenAiTransport::new(config).unwrap();
//! let mut request = Request::text(1, "Hello");
//! request.max_output_tokens = Some(32);
//! let body = transport.payload(&request).unwrap();
//! assert_eq!(body["prompt"], "Hello");
//! assert_eq!(body["max_tokens"], 32);
//! assert_eq!(body["stream_options"]["include_usage"], true);
//! ```

mod body;
mod chunk_shape;
mod client;
mod config;
mod conn_setup;
mod connect;
mod connector;
mod error;
mod fast_chunk;
mod fd_limit;
pub mod fetch;
mod mem_limit;
mod openai;
mod parse;
pub mod receive_clock;
pub mod request_id;
mod routed;
#[cfg(feature = "sagemaker")]
pub mod s3;
#[cfg(feature = "sagemaker")]
pub mod sagemaker;
mod serde_body;
pub mod sse;
mod stamped_tcp;
mod stream;

pub use body::request_body;
pub use config::{Api, ApiKey, MaxTokensField, OpenAiConfig};
pub use connect::{parse_source_addrs, ConnectOptions, ProxySetting, MAX_SOURCE_ADDRS};
pub use error::Error;
pub use fd_limit::{fd_limits, fd_refusal, fd_shortfall, raise_fd_limit, FD_HEADROOM};
pub use fetch::{Fetched, Fetcher};
pub use kneepoint_core::redact_url;
pub use mem_limit::{memory_budget, memory_shortfall, STREAM_BYTES};
pub use openai::OpenAiTransport;
pub use parse::parse_body;
#[doc(hidden)]
pub use parse::stream_chunks_agree;
pub use receive_clock::ReceiveClock;
pub use request_id::{RequestIdHeader, RequestIdStyle};
pub use routed::{RouteRule, RouteTarget, RoutedTransport};
pub use stamped_tcp::StampedTcpStream;
