//! Domain types shared by every kneepoint crate: requests, response events, per-request records,
//! the [`Transport`] trait, the [`RecordSink`] trait and the crate's [`Error`].
//!
//! This crate changes rarely and has light dependencies only. Downstream crates implement
//! [`Transport`] to benchmark endpoints kneepoint does not speak natively.
//!
//! # Example: a toy transport
//! ```
//! use std::sync::Arc;
//! use kneepoint_core::{async_trait, Chunk, Error, EventStream, Request, ResponseEvent, Transport};
//!
//! /// Echoes the prompt back as one chunk.
//! struct Echo;
//!
//! #[async_trait]
//! impl Transport for Echo {
//!     async fn send(&self, request: &Request) -> Result<EventStream, Error> {
//!         let text = request.prompt.text();
//!         let events = vec![
//!             Ok(ResponseEvent::Chunk(Chunk::content(text))),
//!             Ok(ResponseEvent::Finish { reason: Some("stop".into()) }),
//!         ];
//!         Ok(Box::pin(kneepoint_core::iter_stream(events)))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let transport: Arc<dyn Transport> = Arc::new(Echo);
//! let mut stream = transport.send(&Request::text(1, "hello world")).await.unwrap();
//! use futures_util::StreamExt;
//! let first = stream.next().await;
//! assert!(matches!(first, Some(Ok(ResponseEvent::Chunk(_)))));
//! # });
//! ```

pub mod capped;
mod causes;
pub mod civil;
mod error;
mod event;
pub mod fetch;
pub mod folder;
mod health;
pub mod json_text;
pub mod metric;
mod names;
mod percentile;
mod record;
mod redact;
mod request;
pub mod secrets;
pub mod server;
mod sink;
mod stat_key;
mod tokens;
mod transport;

pub use async_trait::async_trait;
pub use capped::{read_capped, read_capped_to_string, MAX_DOCUMENT_BYTES, MAX_SETTINGS_BYTES};
pub use causes::with_causes;
pub use error::{Error, ErrorKind, TimeoutPhase, REDACTED};
pub use event::{Chunk, ConnectionTimings, ResponseEvent, Usage};
pub use fetch::{Fetch, Fetched};
pub use health::{ClientHealth, CPU_SATURATED, LAG_FLOOR_MS, LAG_SHARE};
pub use metric::{Metric, Percentile, Stat, UnknownMetric, UnknownStat};
pub use names::UnknownName;
pub use record::{ErrorRecord, Phase, RequestRecord, TokenSource};
pub use redact::redact_url;
pub use request::{Audio, Image, Message, Prompt, Request, Turn};
pub use server::{ServerMetric, ServerSummary, CONCEPTS};
pub use sink::{RecordSink, VecSink};
pub use stat_key::{InvalidStatKey, StatKey};
pub use tokens::{approx_token_count, ApproxTokenCounter, TokenCounter};
pub use transport::{iter_stream, EventStream, Route, Transport};
