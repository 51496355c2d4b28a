//! `kneepoint-scrape`: the server's own view of each level. It scrapes Prometheus endpoints
//! (an inference server's `/metrics`, NVIDIA's DCGM exporter) on its own task while a level
//! runs, keeps gauges as series, counters as increases and histograms as bucket deltas over
//! the measured window (warm-up excluded), maps the known servers' names to common concepts
//! ([`kneepoint_core::server::CONCEPTS`]: running, waiting, KV-cache usage, preemptions,
//! queue time, server TTFT, GPU power...), and writes AIPerf-shaped
//! `server_metrics_export.{json,csv,jsonl}`.
//!
//! # Why the text format is read by hand
//! The guide prefers kept crates; none fits (checked 2026-12):
//! - `prometheus-parse` 0.2 matches names with `\w+`, so it drops every `vllm:`, `sglang:` and
//!   `llamacpp:` line, the very metrics this crate exists for;
//! - `openmetrics-parser` 0.5 is LGPL-3.0 (kneepoint is Apache-2.0 and links statically) and
//!   fails the whole scrape on one bad line;
//! - `prom_text_format_parser` 0.1 returns nothing when one line is bad, does not know
//!   OpenMetrics' `_total` counters or `# EOF`, and its float accessor panics.
//!
//! The text format is a small line grammar; [`text::parse`] reads it in about 300 lines, skips
//! and counts any line it cannot read (so one odd exporter line never costs the level's server
//! view), and is checked by unit tests with each server's sample page and by the fuzz
//! corpus replay (`kneepoint_fuzz::prometheus_text`).
//!
//! # Example
//! ```
//! use kneepoint_scrape::{summarise, text, Part, Timeline, Window};
//!
//! let page = |running: u32, tokens: u32| {
//!     let gauge = "# TYPE vllm:num_requests_running gauge\n";
//!     let counter = "# TYPE vllm:generation_tokens_total counter\n";
//!     format!("{gauge}vllm:num_requests_running{{model_name=\"m\"}} {running}\n\
//!              {counter}vllm:generation_tokens_total{{model_name=\"m\"}} {tokens}\n")
//! };
//! let mut tl = Timeline::new("http://127.0.0.1:8000/metrics");
//! for (round, (t, running, tokens)) in [(0u64, 0, 100), (1_000_000_000, 8, 400), (2_000_000_000, 6, 700)]
//!     .into_iter()
//!     .enumerate()
//! {
//!     tl.add(t, round as u32, 1_000, &text::parse(&page(running, tokens)));
//! }
//! let part = Part { window: Window { start_ns: 500_000_000, end_ns: 2_000_000_000 }, timelines: vec![tl] };
//! let s = summarise(&[part]);
//! assert_eq!(s.get("server_running", "max"), Some(8.0));
//! assert_eq!(s.get("server_generation_tokens", "total"), Some(600.0));
//! assert_eq!(s.endpoints[0].server.as_deref(), Some("vllm"));
//! ```

mod error;
mod export;
pub mod known;
mod scraper;
mod summary;
pub mod text;
mod timeline;

pub use error::Error;
pub use export::{export_csv, export_json, write_exports, SCHEMA_VERSION};
pub use scraper::{Gathered, Marker, OnSample, ScrapeSettings, Scraper, Session};
pub use summary::{concept_timeline, summarise, LiveSample, Part, TimelinePoint};
pub use timeline::{Meta, Timeline, Window, MAX_SERIES};
