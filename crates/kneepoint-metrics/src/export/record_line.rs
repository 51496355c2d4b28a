//! One line of `profile_export.jsonl` as borrowed, typed fields, serialised straight to the
//! writer. The line is written once per request, on the record drain beside the load; built as
//! a `serde_json::Value` tree it cost about 276,000 instructions for a 256-token stream
//! (callgrind), nearly all in allocating and walking the tree. The key order and every value
//! are those of the tree it replaced (a golden file of earlier output checks it byte for byte).

use std::borrow::Cow;

use kneepoint_core::{ErrorKind, ErrorRecord, Phase, RequestRecord, TokenSource};
use serde::Serialize;

use crate::request_metrics::RequestMetrics;

/// One record's line: AIPerf's `metadata`, `metrics` and `error`, kneepoint's extra fields in
/// `metadata`.
#[derive(Serialize)]
pub(crate) struct RecordLine<'a> {
    metadata: Metadata<'a>,
    /// `null` for a failed request that measured nothing.
    metrics: Option<Metrics>,
    error: Option<ErrorOut<'a>>,
}

#[derive(Serialize)]
struct Metadata<'a> {
    session_num: u64,
    x_request_id: Cow<'a, str>,
    conversation_id: &'a Option<String>,
    image_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audio_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audio_ms: Option<u64>,
    pooled_items: Option<u32>,
    model_name: &'a Option<String>,
    endpoint_url: &'a Option<String>,
    turn_index: u32,
    history_tokens: Option<u32>,
    think_time_ms: Option<f64>,
    request_start_ns: u64,
    request_ack_ns: Option<u64>,
    request_end_ns: u64,
    worker_id: String,
    benchmark_phase: &'static str,
    was_cancelled: bool,
    cancellation_time_ns: Option<u64>,
    output_tokens_source: Option<TokenSource>,
    client_output_tokens: Option<u32>,
    server_input_tokens: Option<u32>,
    requested_output_tokens: Option<u32>,
    finish_reason: &'a Option<String>,
    chunk_count: usize,
    attempts: u32,
    level_origin_unix_ns: u64,
    intended_start_ns: Option<u64>,
    rejected_usage_tokens: Option<u32>,
    client_reasoning_tokens: Option<u32>,
    usage_reasoning_tokens: Option<u32>,
}

/// A metric with its unit; absent metrics are left out of the object.
#[derive(Serialize)]
struct Metric<T> {
    value: T,
    unit: &'static str,
}

fn metric(value: Option<f64>, unit: &'static str) -> Option<Metric<f64>> {
    value.map(|value| Metric { value, unit })
}

fn count(value: Option<u32>) -> Option<Metric<f64>> {
    metric(value.map(f64::from), "tokens")
}

#[derive(Serialize, Default)]
struct Metrics {
    #[serde(skip_serializing_if = "Option::is_none")]
    time_to_first_token: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_to_first_output_token: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_to_second_token: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_latency: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_end_latency: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inter_token_latency: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_token_throughput_per_user: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_sequence_length: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_token_count: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_token_count: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_sequence_length: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inter_chunk_latency: Option<Metric<Vec<f64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_isl: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_req_dns_lookup: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_req_connecting: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_req_tls_handshaking: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_req_connection_overhead: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_req_connection_reused: Option<Metric<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_req_waiting: Option<Metric<f64>>,
}

impl Metrics {
    fn of_ok(m: RequestMetrics) -> Metrics {
        Metrics {
            time_to_first_token: metric(m.ttft_ms, "ms"),
            time_to_first_output_token: metric(m.ttfo_ms, "ms"),
            time_to_second_token: metric(m.ttst_ms, "ms"),
            request_latency: metric(m.request_latency_ms, "ms"),
            stream_end_latency: metric(Some(m.stream_end_latency_ms), "ms"),
            inter_token_latency: metric(m.itl_ms, "ms"),
            output_token_throughput_per_user: metric(m.tokens_per_s_per_user, "tokens/sec/user"),
            output_sequence_length: count(m.osl),
            reasoning_token_count: count(m.reasoning_tokens),
            output_token_count: count(m.answer_tokens),
            input_sequence_length: count(m.isl),
            inter_chunk_latency: (!m.inter_chunk_ms.is_empty()).then_some(Metric {
                value: m.inter_chunk_ms,
                unit: "ms",
            }),
            http_req_dns_lookup: metric(m.connection.map(|c| c.dns_ms), "ms"),
            http_req_connecting: metric(m.connection.map(|c| c.connecting_ms), "ms"),
            http_req_tls_handshaking: metric(m.connection.map(|c| c.tls_ms), "ms"),
            http_req_connection_overhead: metric(m.connection.map(|c| c.overhead_ms), "ms"),
            http_req_connection_reused: metric(m.connection.map(|c| c.reused), "ratio"),
            http_req_waiting: metric(m.connection.map(|c| c.waiting_ms), "ms"),
            ..Metrics::default()
        }
    }
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    code: Option<u16>,
    #[serde(rename = "type")]
    kind: ErrorKind,
    message: &'a str,
}

impl<'a> RecordLine<'a> {
    /// The line of `r`.
    pub(crate) fn of(r: &'a RequestRecord) -> RecordLine<'a> {
        let abs = |t: u64| r.origin_unix_ns + t;
        let m = RequestMetrics::of(r);
        let metrics = if r.is_ok() {
            Some(Metrics::of_ok(m))
        } else {
            // A failed request keeps only its input length, when known.
            count(m.isl).map(|isl| Metrics {
                error_isl: Some(isl),
                ..Metrics::default()
            })
        };
        let cancelled = r
            .error
            .as_ref()
            .is_some_and(|e| e.kind == ErrorKind::Cancelled);
        RecordLine {
            metadata: Metadata {
                session_num: r.request_id,
                x_request_id: match &r.x_request_id {
                    Some(id) => Cow::Borrowed(id),
                    None => Cow::Owned(r.request_id.to_string()),
                },
                conversation_id: &r.conversation_id,
                image_count: r.image_count,
                audio_count: r.audio_count,
                audio_ms: r.audio_ms,
                pooled_items: r.pooled_items,
                model_name: &r.model,
                endpoint_url: &r.url,
                turn_index: r.turn_index.unwrap_or(0),
                history_tokens: r.history_tokens,
                think_time_ms: r.think_time_ns.map(|n| n as f64 / 1e6),
                request_start_ns: abs(r.start_ns),
                request_ack_ns: r.response_ns.map(abs),
                request_end_ns: abs(r.end_ns),
                worker_id: format!("worker_{}", r.worker),
                benchmark_phase: match r.phase {
                    Phase::Warmup => "warmup",
                    Phase::Profiling => "profiling",
                },
                was_cancelled: cancelled,
                cancellation_time_ns: cancelled.then(|| abs(r.end_ns)),
                output_tokens_source: r.output_tokens_source,
                client_output_tokens: r.client_output_tokens,
                server_input_tokens: r.server_input_tokens,
                requested_output_tokens: r.requested_output_tokens,
                finish_reason: &r.finish_reason,
                chunk_count: r.chunk_ns.len(),
                attempts: r.attempts,
                level_origin_unix_ns: r.origin_unix_ns,
                intended_start_ns: r.intended_start_ns.map(abs),
                rejected_usage_tokens: r.rejected_usage_tokens,
                client_reasoning_tokens: r.reasoning_tokens,
                usage_reasoning_tokens: r.usage_reasoning_tokens,
            },
            metrics,
            error: r.error.as_ref().map(|e: &ErrorRecord| ErrorOut {
                code: e.code,
                kind: e.kind,
                message: &e.message,
            }),
        }
    }
}
