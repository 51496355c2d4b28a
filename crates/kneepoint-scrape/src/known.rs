//! The known servers' metric names, mapped to kneepoint's common concepts
//! ([`kneepoint_core::server::CONCEPTS`]).
//!
//! Checked against each project's source or documentation (see `docs/server-metrics.md`):
//! vLLM v1 (`vllm:*`), SGLang (`sglang:*`), TGI (`tgi_*`), llama.cpp's server with `--metrics`
//! (`llamacpp:*`), TensorRT-LLM's serve (`trtllm_*`) and Triton's TRT-LLM backend (`nv_*`), and
//! NVIDIA's DCGM exporter (`DCGM_FI_*`). Family names are as [`crate::text`] gives them: a
//! counter's without `_total`. A metric outside the table is still scraped and exported by name.

/// What a family gives its concept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A gauge's samples.
    Gauge,
    /// A counter's increase.
    Counter,
    /// A histogram's observations.
    Histogram,
    /// A histogram's sum's increase, as a counter (TGI counts tokens in histograms).
    HistogramSum,
    /// The numerator of a ratio of counters' increases.
    RatioHits,
    /// The denominator of a ratio of counters' increases.
    RatioQueries,
}

/// How the series of one concept (several label sets, several endpoints) combine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Combine {
    /// Summed (requests, tokens, watts).
    #[default]
    Sum,
    /// The largest (the fullest KV cache among replicas).
    Max,
    /// The mean (utilisation across GPUs).
    Mean,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mapping {
    pub family: &'static str,
    pub concept: &'static str,
    pub source: Source,
    pub combine: Combine,
    /// Multiplies values into the concept's unit (seconds → ms: 1000).
    pub scale: f64,
    /// Only series with this label value.
    pub label: Option<(&'static str, &'static str)>,
}

const fn m(
    family: &'static str,
    concept: &'static str,
    source: Source,
    combine: Combine,
    scale: f64,
) -> Mapping {
    Mapping {
        family,
        concept,
        source,
        combine,
        scale,
        label: None,
    }
}

const fn with_label(mut x: Mapping, key: &'static str, value: &'static str) -> Mapping {
    x.label = Some((key, value));
    x
}

use Combine::{Max, Mean, Sum};
use Source::{Counter, Gauge, Histogram, HistogramSum, RatioHits, RatioQueries};

/// The table.
pub(crate) const MAPPINGS: &[Mapping] = &[
    // vLLM (v1 engine; the older names kept for servers before 0.10)
    m(
        "vllm:num_requests_running",
        "server_running",
        Gauge,
        Sum,
        1.0,
    ),
    m(
        "vllm:num_requests_waiting",
        "server_waiting",
        Gauge,
        Sum,
        1.0,
    ),
    m(
        "vllm:kv_cache_usage_perc",
        "server_kv_cache_usage",
        Gauge,
        Max,
        1.0,
    ),
    m(
        "vllm:gpu_cache_usage_perc",
        "server_kv_cache_usage",
        Gauge,
        Max,
        1.0,
    ),
    m(
        "vllm:prefix_cache_hits",
        "server_prefix_cache_hit_rate",
        RatioHits,
        Sum,
        1.0,
    ),
    m(
        "vllm:prefix_cache_queries",
        "server_prefix_cache_hit_rate",
        RatioQueries,
        Sum,
        1.0,
    ),
    m(
        "vllm:gpu_prefix_cache_hits",
        "server_prefix_cache_hit_rate",
        RatioHits,
        Sum,
        1.0,
    ),
    m(
        "vllm:gpu_prefix_cache_queries",
        "server_prefix_cache_hit_rate",
        RatioQueries,
        Sum,
        1.0,
    ),
    m(
        "vllm:num_preemptions",
        "server_preemptions",
        Counter,
        Sum,
        1.0,
    ),
    m(
        "vllm:request_queue_time_seconds",
        "server_queue_time",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "vllm:time_to_first_token_seconds",
        "server_ttft",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "vllm:inter_token_latency_seconds",
        "server_itl",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "vllm:time_per_output_token_seconds",
        "server_itl",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "vllm:e2e_request_latency_seconds",
        "server_e2e",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "vllm:prompt_tokens",
        "server_prompt_tokens",
        Counter,
        Sum,
        1.0,
    ),
    m(
        "vllm:generation_tokens",
        "server_generation_tokens",
        Counter,
        Sum,
        1.0,
    ),
    // SGLang
    m("sglang:num_running_reqs", "server_running", Gauge, Sum, 1.0),
    m("sglang:num_queue_reqs", "server_waiting", Gauge, Sum, 1.0),
    m(
        "sglang:token_usage",
        "server_kv_cache_usage",
        Gauge,
        Max,
        1.0,
    ),
    m(
        "sglang:cache_hit_rate",
        "server_prefix_cache_hit_rate",
        Gauge,
        Mean,
        1.0,
    ),
    m(
        "sglang:num_retracted_requests",
        "server_preemptions",
        Counter,
        Sum,
        1.0,
    ),
    m(
        "sglang:queue_time_seconds",
        "server_queue_time",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "sglang:time_to_first_token_seconds",
        "server_ttft",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "sglang:inter_token_latency_seconds",
        "server_itl",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "sglang:e2e_request_latency_seconds",
        "server_e2e",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "sglang:prompt_tokens",
        "server_prompt_tokens",
        Counter,
        Sum,
        1.0,
    ),
    m(
        "sglang:generation_tokens",
        "server_generation_tokens",
        Counter,
        Sum,
        1.0,
    ),
    // TGI (durations in seconds without a suffix; token counts as histograms)
    m("tgi_batch_current_size", "server_running", Gauge, Sum, 1.0),
    m("tgi_queue_size", "server_waiting", Gauge, Sum, 1.0),
    m(
        "tgi_request_queue_duration",
        "server_queue_time",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "tgi_request_mean_time_per_token_duration",
        "server_itl",
        Histogram,
        Sum,
        1000.0,
    ),
    m("tgi_request_duration", "server_e2e", Histogram, Sum, 1000.0),
    m(
        "tgi_request_input_length",
        "server_prompt_tokens",
        HistogramSum,
        Sum,
        1.0,
    ),
    m(
        "tgi_request_generated_tokens",
        "server_generation_tokens",
        HistogramSum,
        Sum,
        1.0,
    ),
    // llama.cpp's server (`--metrics`)
    m(
        "llamacpp:requests_processing",
        "server_running",
        Gauge,
        Sum,
        1.0,
    ),
    m(
        "llamacpp:requests_deferred",
        "server_waiting",
        Gauge,
        Sum,
        1.0,
    ),
    m(
        "llamacpp:kv_cache_usage_ratio",
        "server_kv_cache_usage",
        Gauge,
        Max,
        1.0,
    ),
    m(
        "llamacpp:prompt_tokens",
        "server_prompt_tokens",
        Counter,
        Sum,
        1.0,
    ),
    m(
        "llamacpp:tokens_predicted",
        "server_generation_tokens",
        Counter,
        Sum,
        1.0,
    ),
    // TensorRT-LLM (`trtllm-serve`)
    m(
        "trtllm_num_requests_running",
        "server_running",
        Gauge,
        Sum,
        1.0,
    ),
    m(
        "trtllm_num_requests_waiting",
        "server_waiting",
        Gauge,
        Sum,
        1.0,
    ),
    m(
        "trtllm_kv_cache_utilization",
        "server_kv_cache_usage",
        Gauge,
        Max,
        1.0,
    ),
    m(
        "trtllm_kv_cache_hit_rate",
        "server_prefix_cache_hit_rate",
        Gauge,
        Mean,
        1.0,
    ),
    m(
        "trtllm_request_queue_time_seconds",
        "server_queue_time",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "trtllm_time_to_first_token_seconds",
        "server_ttft",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "trtllm_time_per_output_token_seconds",
        "server_itl",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "trtllm_e2e_request_latency_seconds",
        "server_e2e",
        Histogram,
        Sum,
        1000.0,
    ),
    m(
        "trtllm_prompt_tokens",
        "server_prompt_tokens",
        Counter,
        Sum,
        1.0,
    ),
    m(
        "trtllm_generation_tokens",
        "server_generation_tokens",
        Counter,
        Sum,
        1.0,
    ),
    // Triton with the TensorRT-LLM backend
    with_label(
        m(
            "nv_trt_llm_request_metrics",
            "server_running",
            Gauge,
            Sum,
            1.0,
        ),
        "request_type",
        "active",
    ),
    with_label(
        m(
            "nv_trt_llm_request_metrics",
            "server_waiting",
            Gauge,
            Sum,
            1.0,
        ),
        "request_type",
        "waiting",
    ),
    with_label(
        m(
            "nv_trt_llm_kv_cache_block_metrics",
            "server_kv_cache_usage",
            Gauge,
            Max,
            1.0,
        ),
        "kv_cache_block_type",
        "fraction",
    ),
    m(
        "nv_inference_pending_request_count",
        "server_waiting",
        Gauge,
        Sum,
        1.0,
    ),
    m(
        "nv_inference_first_response_histogram_ms",
        "server_ttft",
        Histogram,
        Sum,
        1.0,
    ),
    // NVIDIA DCGM exporter
    m("DCGM_FI_DEV_GPU_UTIL", "gpu_utilization", Gauge, Mean, 1.0),
    m("DCGM_FI_DEV_FB_USED", "gpu_memory_used", Gauge, Sum, 1.0),
    m("DCGM_FI_DEV_POWER_USAGE", "gpu_power", Gauge, Sum, 1.0),
    m(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "gpu_energy",
        Counter,
        Sum,
        0.001,
    ),
];

impl Mapping {
    /// Whether a series with `labels` is one this row reads (its label filter, if any).
    pub(crate) fn selects(&self, labels: &[(String, String)]) -> bool {
        self.label
            .is_none_or(|(k, v)| labels.iter().any(|(a, b)| a == k && b == v))
    }
}

/// The rows for `family`.
pub(crate) fn mappings(family: &str) -> impl Iterator<Item = &'static Mapping> + '_ {
    MAPPINGS.iter().filter(move |m| m.family == family)
}

/// The server a family name belongs to, by its prefix.
pub fn server_of(family: &str) -> Option<&'static str> {
    [
        ("vllm:", "vllm"),
        ("sglang:", "sglang"),
        ("tgi_", "tgi"),
        ("llamacpp:", "llamacpp"),
        ("trtllm_", "trtllm"),
        ("nv_", "triton"),
        ("DCGM_", "dcgm"),
    ]
    .iter()
    .find(|(prefix, _)| family.starts_with(prefix))
    .map(|(_, s)| *s)
}

/// A unit for a family without `# UNIT`, from its name's suffix (as exports show it).
pub(crate) fn unit_of(family: &str) -> &'static str {
    const SUFFIXES: [(&str, &str); 11] = [
        ("_seconds", "seconds"),
        ("_duration", "seconds"),
        ("_ms", "ms"),
        ("_us", "us"),
        ("_bytes", "bytes"),
        ("_tokens", "tokens"),
        ("_perc", "ratio"),
        ("_ratio", "ratio"),
        ("_usage", "ratio"),
        ("_reqs", "requests"),
        ("_requests", "requests"),
    ];
    if family.contains("num_requests_") {
        return "requests";
    }
    SUFFIXES
        .iter()
        .find(|(s, _)| family.ends_with(s))
        .map_or("", |(_, u)| u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::server::{concept_named, ConceptKind};

    #[test]
    fn every_row_names_a_concept_of_a_fitting_kind() {
        for row in MAPPINGS {
            let c = concept_named(row.concept)
                .unwrap_or_else(|| panic!("{} maps to unknown {}", row.family, row.concept));
            let fits = match row.source {
                Source::Gauge => matches!(c.kind, ConceptKind::Gauge | ConceptKind::Ratio),
                Source::Counter | Source::HistogramSum => c.kind == ConceptKind::Counter,
                Source::Histogram => c.kind == ConceptKind::Histogram,
                Source::RatioHits | Source::RatioQueries => c.kind == ConceptKind::Ratio,
            };
            assert!(fits, "{} → {}", row.family, row.concept);
            assert!(server_of(row.family).is_some(), "{}", row.family);
        }
        assert_eq!(server_of("vllm:num_requests_running"), Some("vllm"));
        assert_eq!(server_of("process_cpu_seconds"), None);
        assert_eq!(unit_of("vllm:e2e_request_latency_seconds"), "seconds");
    }
}
