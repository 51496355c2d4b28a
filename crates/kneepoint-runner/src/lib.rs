//! The kneepoint load engine. [`run_level`] drives one closed-loop concurrency level: exactly
//! `concurrency` requests in flight until every prepared request has finished, each ending in
//! exactly one [`RequestRecord`](kneepoint_core::RequestRecord) (success or classified failure), streamed to the sinks as it
//! finishes.
//!
//! Time is read here, with one monotonic clock (`std::time::Instant`) around the transport:
//! before `send`, when `send` resolves (headers), and as each event is yielded. A chunk that
//! carries its receive time (`Chunk::received`, from the same clock) is stamped with it instead,
//! kept between the previous chunk (or the start) and the moment it was yielded.
//!
//! [`run_level_loaded`] (or [`LevelConfig::keep_loaded`]) keeps a closed loop loaded from its
//! first measured request to its last: a lead-in with no pause before the measured requests,
//! and fillers after them, so a short level has neither a first-wave burst nor a drain.
//!
//! Closed-loop latency and coordinated omission: in a closed loop a slow response delays the
//! next request of its slot, so the offered load adapts to the server. That is the intended
//! model for "how many concurrent users can one instance carry"; open-loop arrivals (which
//! measure from intended start times) are a separate mode.
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use kneepoint_core::{async_trait, iter_stream, Chunk, Error, EventStream, Request, ResponseEvent, Transport};
//! use kneepoint_runner::{run_level, LevelConfig};
//!
//! struct TwoTokens;
//! #[async_trait]
//! impl Transport for TwoTokens {
//!     async fn send(&self, _r: &Request) -> Result<EventStream, Error> {
//!         Ok(Box::pin(iter_stream(vec![
//!             Ok(ResponseEvent::Chunk(Chunk::content(" a"))),
//!             Ok(ResponseEvent::Chunk(Chunk::content(" b"))),
//!         ])))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let requests: Vec<Request> = (0..10).map(|i| Request::text(i, "hi")).collect();
//! let run = run_level(Arc::new(TwoTokens), &LevelConfig::new(4), requests, Vec::new(), Vec::new(), None)
//!     .await
//!     .unwrap();
//! assert_eq!(run.records.len(), 10);
//! assert!(run.records.iter().all(|r| r.output_tokens == Some(2)));
//! # });
//! ```

mod arrival;
mod cancel;
mod config;
mod duration;
mod early_stop;
mod error;
mod health;
mod lazy_deadline;
mod level;
mod loaded;
mod ramp;
mod read_batch;
mod request;
mod search;
mod sessions;
mod work;

pub use arrival::{schedule, Arrival};
pub use cancel::CancelToken;
pub use config::{Deadlines, LevelConfig, OpenLoop, PhaseHook, RecordObserver, RetryPolicy};
pub use duration::{run_level_for, LevelDuration, RequestSource};
pub use early_stop::{EarlyStop, PrecisionTarget};
pub use error::Error;
pub use level::{run_level, run_level_drawn, run_level_loaded};
pub use search::drive_search;
pub use work::LevelRun;
