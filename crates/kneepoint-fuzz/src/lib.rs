//! The properties kneepoint's fuzz targets check.
//!
//! Each function takes arbitrary bytes and checks the parser that reads untrusted input: it must
//! return a value or an error and never panic, loop or allocate without bound, and reading the
//! same bytes in any split must give the same result as reading them whole. The cargo-fuzz
//! targets in `fuzz/` are one-line calls to these functions (libFuzzer needs nightly), and
//! `tests/corpus.rs` replays the kept corpora in `fuzz/corpus/` on the stable toolchain, so CI
//! re-checks every input the fuzzer ever found interesting.
//!
//! A violated property is a bug, reported by panicking: that is how a fuzz target signals a
//! failure, which is why this crate (unlike the libraries) asserts.
//!
//! ```
//! kneepoint_fuzz::sse_stream(b"\x03\x05data: {\"choices\":[]}\n\ndata: [DONE]\n\n");
//! kneepoint_fuzz::event_stream(b"\x01\x07{\"token\":{\"text\":\"hi\"}}\n");
//! kneepoint_fuzz::config_text(b"[sweep_params]\nconcurrency = [1, 0]\n");
//! kneepoint_fuzz::datasets(b"{\"text\": \"hello\", \"output_length\": 4}\n");
//! kneepoint_fuzz::prometheus_text(b"# TYPE x counter\nx_total{a=\"b\"} 1\n");
//! ```
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod config;
mod datasets;
mod event_stream;
mod prometheus;
mod split;
mod sse;

pub use config::config_text;
pub use datasets::datasets;
pub use event_stream::event_stream;
pub use prometheus::prometheus_text;
pub use sse::sse_stream;
