//! What the server (and its GPUs) reported during one level: the common concepts kneepoint
//! reads from Prometheus metrics, whatever the server calls them.
//!
//! The concept names are also the metric names an SLA can use (`server_kv_cache_usage:max`),
//! so they are kept in one table here, shared by the scraper that fills a [`ServerSummary`]
//! and the planner that checks SLAs and explains the knee.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a concept's values are summarised over a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConceptKind {
    /// Sampled at every scrape: distribution statistics of the samples.
    Gauge,
    /// A cumulative count: its increase over the level (`total`) and that per second (`rate`).
    Counter,
    /// A server-side distribution: its observations during the level (`count`), their mean
    /// (`avg`) and percentiles estimated from the bucket deltas.
    Histogram,
    /// A ratio of two counters' increases over the level (`avg`).
    Ratio,
}

/// One common concept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concept {
    /// The name in summaries, exports and SLAs.
    pub name: &'static str,
    /// How it is summarised.
    pub kind: ConceptKind,
    /// Its unit after conversion (times in ms, like the client's metrics).
    pub unit: &'static str,
    /// What it means.
    pub description: &'static str,
}

const fn concept(
    name: &'static str,
    kind: ConceptKind,
    unit: &'static str,
    description: &'static str,
) -> Concept {
    Concept {
        name,
        kind,
        unit,
        description,
    }
}

/// Every concept, server ones first, then GPU telemetry.
pub const CONCEPTS: [Concept; 16] = [
    concept(
        "server_running",
        ConceptKind::Gauge,
        "requests",
        "requests in the engine's running batch",
    ),
    concept(
        "server_waiting",
        ConceptKind::Gauge,
        "requests",
        "requests queued for admission",
    ),
    concept(
        "server_kv_cache_usage",
        ConceptKind::Gauge,
        "fraction",
        "KV-cache blocks in use (0-1)",
    ),
    concept(
        "server_prefix_cache_hit_rate",
        ConceptKind::Ratio,
        "fraction",
        "prompt tokens served from the prefix cache (0-1)",
    ),
    concept(
        "server_preemptions",
        ConceptKind::Counter,
        "preemptions",
        "running requests preempted (KV cache exhausted)",
    ),
    concept(
        "server_queue_time",
        ConceptKind::Histogram,
        "ms",
        "time requests waited before running",
    ),
    concept(
        "server_ttft",
        ConceptKind::Histogram,
        "ms",
        "time to first token as the server measured it",
    ),
    concept(
        "server_itl",
        ConceptKind::Histogram,
        "ms",
        "inter-token latency as the server measured it",
    ),
    concept(
        "server_e2e",
        ConceptKind::Histogram,
        "ms",
        "request latency as the server measured it",
    ),
    concept(
        "server_prompt_tokens",
        ConceptKind::Counter,
        "tokens",
        "prompt tokens processed",
    ),
    concept(
        "server_generation_tokens",
        ConceptKind::Counter,
        "tokens",
        "tokens generated",
    ),
    concept(
        "gpu_utilization",
        ConceptKind::Gauge,
        "%",
        "GPU utilisation (mean over GPUs)",
    ),
    concept(
        "gpu_memory_used",
        ConceptKind::Gauge,
        "MiB",
        "GPU memory in use (summed over GPUs)",
    ),
    concept(
        "gpu_power",
        ConceptKind::Gauge,
        "W",
        "GPU power draw (summed over GPUs)",
    ),
    concept(
        "gpu_energy",
        ConceptKind::Counter,
        "J",
        "GPU energy consumed (summed over GPUs)",
    ),
    concept(
        "gpu_output_tokens_per_joule",
        ConceptKind::Ratio,
        "tokens/J",
        "output tokens of successful requests per joule of GPU energy",
    ),
];

/// The concept called `name`.
pub fn concept_named(name: &str) -> Option<&'static Concept> {
    CONCEPTS.iter().find(|c| c.name == name)
}

/// A quantity the server publishes: one of [`CONCEPTS`], and nothing else (made only by
/// [`ServerMetric::named`] or [`ServerMetric::all`], so an SLA or a measurement cannot name a
/// server quantity kneepoint does not read).
///
/// ```
/// use kneepoint_core::{Metric, ServerMetric};
/// let kv = ServerMetric::named("server_kv_cache_usage").expect("a concept");
/// assert_eq!(Metric::Server(kv).to_string(), "server_kv_cache_usage");
/// assert!(ServerMetric::named("anything").is_none());
/// assert!("anything".parse::<Metric>().is_err());
/// ```
///
/// A name that is no concept does not compile:
/// ```compile_fail
/// let m = kneepoint_core::Metric::Server("anything");
/// ```
/// nor does a made-up one:
/// ```compile_fail
/// let m = kneepoint_core::Metric::Server(kneepoint_core::ServerMetric(200));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerMetric(u8);

impl ServerMetric {
    /// The concept called `name`, if kneepoint reads one by that name.
    pub fn named(name: &str) -> Option<ServerMetric> {
        CONCEPTS
            .iter()
            .position(|c| c.name == name)
            .and_then(|i| u8::try_from(i).ok())
            .map(ServerMetric)
    }

    /// Every server quantity, in table order.
    pub fn all() -> impl Iterator<Item = ServerMetric> + Clone {
        (0..CONCEPTS.len()).filter_map(|i| u8::try_from(i).ok().map(ServerMetric))
    }

    /// Its concept: name, kind, unit and meaning.
    pub const fn concept(self) -> &'static Concept {
        &CONCEPTS[self.0 as usize]
    }

    /// Its name in summaries, exports and SLAs (`server_kv_cache_usage`).
    pub const fn name(self) -> &'static str {
        self.concept().name
    }
}

/// One metrics endpoint as seen during a level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EndpointSummary {
    /// The URL scraped.
    pub url: String,
    /// The server recognised from its metric names (`vllm`, `sglang`, `tgi`, `llamacpp`,
    /// `trtllm`, `triton`, `dcgm`, `amd`), if any.
    pub server: Option<String>,
    /// Scrapes that succeeded.
    pub scrapes: u32,
    /// Scrapes that failed (timeout, refused, not Prometheus text).
    pub failures: u32,
    /// Lines of the text format that could not be read and were skipped.
    pub skipped_lines: u64,
    /// Metric families seen.
    pub families: u32,
}

impl EndpointSummary {
    /// An endpoint summary.
    pub fn new(url: impl Into<String>, server: Option<String>) -> Self {
        EndpointSummary {
            url: url.into(),
            server,
            scrapes: 0,
            failures: 0,
            skipped_lines: 0,
            families: 0,
        }
    }
}

/// The server side of one level: each concept's statistics over the level's measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ServerSummary {
    /// The endpoints scraped.
    pub endpoints: Vec<EndpointSummary>,
    /// Seconds of the window summarised (the measured phase, warm-up excluded).
    pub window_s: f64,
    /// Concept → statistic → value (see [`CONCEPTS`] for the names and units).
    pub concepts: BTreeMap<String, BTreeMap<String, f64>>,
}

impl ServerSummary {
    /// A summary of `endpoints` over a window of `window_s` seconds, with no concept yet.
    pub fn new(endpoints: Vec<EndpointSummary>, window_s: f64) -> Self {
        ServerSummary {
            endpoints,
            window_s,
            concepts: BTreeMap::new(),
        }
    }

    /// A concept's statistic, if measured.
    pub fn get(&self, concept: &str, stat: &str) -> Option<f64> {
        self.concepts.get(concept)?.get(stat).copied()
    }

    /// Sets a concept's statistic.
    pub fn set(&mut self, concept: &str, stat: &str, value: f64) {
        if value.is_finite() {
            self.concepts
                .entry(concept.to_owned())
                .or_default()
                .insert(stat.to_owned(), value);
        }
    }

    /// True when no concept was measured.
    pub fn is_empty(&self) -> bool {
        self.concepts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        let mut names: Vec<&str> = CONCEPTS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CONCEPTS.len());
        assert_eq!(
            concept_named("server_ttft").map(|c| c.kind),
            Some(ConceptKind::Histogram)
        );
        assert!(concept_named("ttft").is_none());
        assert!(ServerMetric::named("ttft").is_none());
        let kv = ServerMetric::named("server_kv_cache_usage").unwrap();
        assert_eq!(kv.name(), "server_kv_cache_usage");
        assert_eq!(ServerMetric::all().count(), CONCEPTS.len());
        assert!(ServerMetric::all().all(|m| ServerMetric::named(m.name()) == Some(m)));
        let mut s = ServerSummary::default();
        s.set("server_waiting", "avg", 3.0);
        s.set("server_waiting", "max", f64::NAN);
        assert_eq!(s.get("server_waiting", "avg"), Some(3.0));
        assert_eq!(s.get("server_waiting", "max"), None);
    }
}
