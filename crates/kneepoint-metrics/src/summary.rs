//! Per-level aggregates.

use std::collections::BTreeMap;

use kneepoint_core::{Phase, RequestRecord, TokenSource};
use serde::{Deserialize, Serialize};

use crate::request_metrics::RequestMetrics;
use crate::stats::Stats;

/// Service-level objectives a request must meet to count towards goodput.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GoodputSlo {
    /// Maximum TTFT, ms.
    pub ttft_ms: Option<f64>,
    /// Maximum ITL, ms.
    pub itl_ms: Option<f64>,
    /// Maximum request latency, ms.
    pub request_latency_ms: Option<f64>,
}

impl GoodputSlo {
    /// True when no objective is set.
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none() && self.itl_ms.is_none() && self.request_latency_ms.is_none()
    }

    fn met_by(&self, m: &RequestMetrics) -> bool {
        let ok = |limit: Option<f64>, v: Option<f64>| match limit {
            None => true,
            Some(l) => v.is_some_and(|v| v <= l),
        };
        ok(self.ttft_ms, m.ttft_ms)
            && ok(self.itl_ms, m.itl_ms)
            && ok(self.request_latency_ms, m.request_latency_ms)
    }
}

/// One metric's statistics and unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSummary {
    /// The display unit (`ms`, `tokens`, `tokens/sec/user`).
    pub unit: String,
    /// The statistics.
    #[serde(flatten)]
    pub stats: Stats,
}

/// The per-request metrics summarised, with their AIPerf names and units, in report order.
pub const RECORD_METRICS: [(&str, &str, &str); 15] = [
    ("time_to_first_token", "Time To First Token", "ms"),
    (
        "time_to_first_output_token",
        "Time To First Output Token",
        "ms",
    ),
    ("time_to_second_token", "Time To Second Token", "ms"),
    ("request_latency", "Request Latency", "ms"),
    ("stream_end_latency", "Stream End Latency", "ms"),
    ("inter_token_latency", "Inter Token Latency", "ms"),
    ("inter_chunk_latency", "Inter Chunk Latency", "ms"),
    (
        "output_token_throughput_per_user",
        "Output Token Throughput Per User",
        "tokens/sec/user",
    ),
    ("output_sequence_length", "Output Sequence Length", "tokens"),
    ("reasoning_token_count", "Reasoning Token Count", "tokens"),
    ("output_token_count", "Output Token Count", "tokens"),
    ("input_sequence_length", "Input Sequence Length", "tokens"),
    (
        "time_to_first_token_from_schedule",
        "Time To First Token From Intended Start",
        "ms",
    ),
    (
        "request_latency_from_schedule",
        "Request Latency From Intended Start",
        "ms",
    ),
    ("schedule_lag", "Schedule Lag", "ms"),
];

/// p99 schedule lag above which an open-loop level is flagged: the client (or its in-flight
/// cap) could not send on time.
pub const SCHEDULE_LAG_LIMIT_MS: f64 = 10.0;

/// Everything measured at one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LevelSummary {
    /// Requests in flight (closed loop).
    pub concurrency: u32,
    /// Measured requests recorded (successes + failures; warm-up excluded).
    pub request_count: usize,
    /// Successful requests.
    pub ok_count: usize,
    /// Failed requests.
    pub error_count: usize,
    /// failed / (ok + failed).
    pub error_rate: f64,
    /// max(end) − min(start) over measured requests, seconds (for records pooled from several
    /// runs, the sum of each run's span).
    pub benchmark_duration_s: f64,
    /// Successful requests / duration.
    pub request_throughput: f64,
    /// Output tokens of successful requests / duration.
    pub output_token_throughput: f64,
    /// Σ output tokens of successful requests.
    pub total_output_tokens: u64,
    /// Σ input tokens of successful requests.
    pub total_input_tokens: u64,
    /// Input tokens of successful requests / duration (prefill or pooling throughput).
    #[serde(default)]
    pub input_token_throughput: f64,
    /// Pooling endpoints: embeddings, ranked documents or scores answered / duration (`None`
    /// for generation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooled_item_throughput: Option<f64>,
    /// Requests meeting every SLO / duration (only when SLOs were given).
    pub goodput: Option<f64>,
    /// Statistics per metric name.
    pub metrics: BTreeMap<String, MetricSummary>,
    /// Failures per error kind.
    pub errors_by_kind: BTreeMap<String, usize>,
    /// Failures grouped by (kind, code, message), most frequent first, at most 20.
    pub error_summary: Vec<ErrorGroup>,
    /// Where output token counts came from, per source.
    pub osl_sources: BTreeMap<String, usize>,
    /// Successful requests whose output length differs from the length asked for.
    pub osl_mismatches: usize,
    /// Requests whose server and client output token counts disagree by more than 5 %.
    pub osl_source_disagreements: usize,
    /// Human-readable warnings about the measurement.
    pub warnings: Vec<String>,
    /// What the server's (and GPUs') metrics showed during the level, when scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<kneepoint_core::ServerSummary>,
}

/// Failures with the same kind, code and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorGroup {
    /// The error kind.
    pub kind: String,
    /// The HTTP status, if any.
    pub code: Option<u16>,
    /// The message.
    pub message: String,
    /// How many requests failed this way.
    pub count: usize,
}

impl LevelSummary {
    /// Counts every per-second figure over `duration_s` instead of the records' span (the
    /// common window of a merged, sharded level).
    pub fn rescale_duration(&mut self, duration_s: f64) {
        if !(duration_s.is_finite() && duration_s > 0.0) || self.benchmark_duration_s <= 0.0 {
            return;
        }
        let k = self.benchmark_duration_s / duration_s;
        self.benchmark_duration_s = duration_s;
        self.request_throughput *= k;
        self.output_token_throughput *= k;
        self.input_token_throughput *= k;
        self.pooled_item_throughput = self.pooled_item_throughput.map(|v| v * k);
        self.goodput = self.goodput.map(|v| v * k);
    }

    /// Summarises the measured (non-warm-up) records of one level.
    pub fn from_records(concurrency: u32, records: &[RequestRecord], slo: &GoodputSlo) -> Self {
        let measured: Vec<&RequestRecord> = records
            .iter()
            .filter(|r| r.phase == Phase::Profiling)
            .collect();
        // Records of several runs of a level (pooled) carry their runs' own origins: the
        // measured time is the sum of each run's span, not the span across runs.
        let mut spans: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for r in &measured {
            let span = spans
                .entry(r.origin_unix_ns)
                .or_insert((r.start_ns, r.end_ns));
            span.0 = span.0.min(r.start_ns);
            span.1 = span.1.max(r.end_ns);
        }
        let duration_s = spans
            .values()
            .map(|(start, end)| end.saturating_sub(*start))
            .sum::<u64>() as f64
            / 1e9;
        let per_s = |x: f64| {
            if duration_s > 0.0 {
                x / duration_s
            } else {
                0.0
            }
        };

        let mut cols: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut ok = 0usize;
        let mut good = 0usize;
        let mut out_tokens = 0u64;
        let mut pooled_items: Option<u64> = None;
        let mut in_tokens = 0u64;
        let mut osl_sources: BTreeMap<String, usize> = BTreeMap::new();
        let mut mismatches = 0usize;
        let mut disagreements = 0usize;
        let mut rejected: Option<(u32, usize)> = None;
        let mut rejected_count = 0usize;
        let mut errors_by_kind: BTreeMap<String, usize> = BTreeMap::new();
        let mut groups: BTreeMap<(String, Option<u16>, String), usize> = BTreeMap::new();
        for r in &measured {
            if let Some(i) = r.intended_start_ns {
                let lag = r.start_ns.saturating_sub(i) as f64 / 1e6;
                cols.entry("schedule_lag").or_default().push(lag);
            }
            if let Some(e) = &r.error {
                *errors_by_kind.entry(e.kind.to_string()).or_default() += 1;
                *groups
                    .entry((e.kind.to_string(), e.code, e.message.clone()))
                    .or_default() += 1;
                continue;
            }
            ok += 1;
            let m = RequestMetrics::of(r);
            if !slo.is_empty() && slo.met_by(&m) {
                good += 1;
            }
            let mut push = |name: &'static str, v: Option<f64>| {
                if let Some(v) = v {
                    cols.entry(name).or_default().push(v);
                }
            };
            push("time_to_first_token", m.ttft_ms);
            push("time_to_first_output_token", m.ttfo_ms);
            push("time_to_second_token", m.ttst_ms);
            push("request_latency", m.request_latency_ms);
            push("stream_end_latency", Some(m.stream_end_latency_ms));
            push("inter_token_latency", m.itl_ms);
            push("output_token_throughput_per_user", m.tokens_per_s_per_user);
            push("output_sequence_length", m.osl.map(f64::from));
            push("reasoning_token_count", m.reasoning_tokens.map(f64::from));
            push("output_token_count", m.answer_tokens.map(f64::from));
            push("input_sequence_length", m.isl.map(f64::from));
            push("time_to_first_token_from_schedule", m.ttft_from_schedule_ms);
            push(
                "request_latency_from_schedule",
                m.request_latency_from_schedule_ms,
            );
            cols.entry("inter_chunk_latency")
                .or_default()
                .extend_from_slice(&m.inter_chunk_ms);
            out_tokens += u64::from(m.osl.unwrap_or(0));
            in_tokens += u64::from(m.isl.unwrap_or(0));
            if let Some(n) = r.pooled_items {
                *pooled_items.get_or_insert(0) += u64::from(n);
            }
            let source = r.output_tokens_source.map_or("none", source_name);
            *osl_sources.entry(source.to_owned()).or_default() += 1;
            if let (Some(want), Some(got)) = (r.requested_output_tokens, r.output_tokens) {
                if want != got {
                    mismatches += 1;
                }
            }
            if let Some(u) = r.rejected_usage_tokens {
                rejected.get_or_insert((u, r.chunk_ns.len()));
                rejected_count += 1;
            }
            if r.output_tokens_source == Some(TokenSource::Usage) {
                if let (Some(s), Some(c)) = (r.output_tokens, r.client_output_tokens) {
                    if f64::from(s.abs_diff(c)) > 0.05 * f64::from(s.max(1)) {
                        disagreements += 1;
                    }
                }
            }
        }
        let metrics: BTreeMap<String, MetricSummary> = RECORD_METRICS
            .iter()
            .filter_map(|(name, _, unit)| {
                let stats = Stats::of(cols.get(name)?)?;
                Some((
                    name.to_string(),
                    MetricSummary {
                        unit: unit.to_string(),
                        stats,
                    },
                ))
            })
            .collect();
        let mut error_summary: Vec<ErrorGroup> = groups
            .into_iter()
            .map(|((kind, code, message), count)| ErrorGroup {
                kind,
                code,
                message,
                count,
            })
            .collect();
        error_summary.sort_by_key(|g| std::cmp::Reverse(g.count));
        error_summary.truncate(20);
        let n = measured.len();
        let errors = n - ok;
        let mut warnings = Vec::new();
        if let Some(lag) = metrics.get("schedule_lag").and_then(|m| m.stats.get("p99")) {
            if lag > SCHEDULE_LAG_LIMIT_MS {
                warnings.push(format!(
                    "the client fell behind its arrival schedule: p99 schedule lag {lag:.1} ms (> {SCHEDULE_LAG_LIMIT_MS} ms), so the offered load was lower than asked; latency from the intended start counts the delay"
                ));
            }
        }
        if mismatches > 0 {
            warnings.push(format!(
                "{mismatches} of {ok} successful requests generated a different number of tokens than requested (set ignore_eos/min_tokens to control output length)"
            ));
        }
        if disagreements > 0 {
            warnings.push(format!(
                "{disagreements} requests: the server's completion_tokens and the client's token count differ by more than 5 %"
            ));
        }
        if let Some((u, chunks)) = rejected {
            warnings.push(format!(
                "{rejected_count} requests: the server's completion_tokens was implausible (e.g. {u} tokens for {chunks} chunks) and the client's count was used instead (--trust-server-usage keeps the server's)"
            ));
        }
        if let Some(n) = osl_sources.get("estimate") {
            warnings.push(format!(
                "{n} requests had no server usage; their output length is a whitespace-word estimate"
            ));
        }
        if n > 0 && ok == 0 {
            warnings.push("every request failed".into());
        }
        let cancelled = errors_by_kind.get("cancelled").copied().unwrap_or(0);
        if cancelled > 0 {
            warnings.push(format!(
                "interrupted: {cancelled} requests were cancelled; this level's figures are partial"
            ));
        } else if n > 0 && (n as f64) < 2.0 * f64::from(concurrency) {
            warnings.push(format!(
                "only {:.1} requests per slot: ramp-up and drain dominate this level; use a request count of at least 4x the concurrency for steady-state figures",
                n as f64 / f64::from(concurrency.max(1))
            ));
        }
        LevelSummary {
            concurrency,
            request_count: n,
            ok_count: ok,
            error_count: errors,
            error_rate: if n > 0 { errors as f64 / n as f64 } else { 0.0 },
            benchmark_duration_s: duration_s,
            request_throughput: per_s(ok as f64),
            output_token_throughput: per_s(out_tokens as f64),
            total_output_tokens: out_tokens,
            total_input_tokens: in_tokens,
            input_token_throughput: per_s(in_tokens as f64),
            pooled_item_throughput: pooled_items.map(|n| per_s(n as f64)),
            goodput: (!slo.is_empty()).then(|| per_s(good as f64)),
            metrics,
            errors_by_kind,
            error_summary,
            osl_sources,
            osl_mismatches: mismatches,
            osl_source_disagreements: disagreements,
            warnings,
            server: None,
        }
    }

    /// One statistic of one metric, e.g. `stat("time_to_first_token", "p95")`.
    pub fn stat(&self, metric: &str, stat: &str) -> Option<f64> {
        self.metrics.get(metric)?.stats.get(stat)
    }
}

fn source_name(s: TokenSource) -> &'static str {
    match s {
        TokenSource::Usage => "usage",
        TokenSource::Tokenizer => "tokenizer",
        TokenSource::Estimate => "estimate",
        TokenSource::Chunks => "chunks",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kneepoint_core::{ErrorKind, ErrorRecord};

    /// Two successful streamed requests and one failure (503): every per-request metric and a
    /// non-zero error rate.
    pub(crate) fn sample_summary() -> LevelSummary {
        let records = [
            rec(0, 0, 100, 10, 10),
            rec(1, 500, 300, 50, 11),
            failed_503(),
        ];
        LevelSummary::from_records(1, &records, &GoodputSlo::default())
    }

    /// Request 2, failed with a 503 at 200 ms.
    fn failed_503() -> RequestRecord {
        let mut failed = rec(2, 0, 0, 0, 0);
        failed.error = Some(ErrorRecord {
            kind: ErrorKind::HttpStatus,
            code: Some(503),
            message: "busy".into(),
        });
        failed.end_ns = 200_000_000;
        failed
    }

    fn rec(id: u64, start_ms: u64, ttft_ms: u64, itl_ms: u64, n: u32) -> RequestRecord {
        let ms = 1_000_000;
        let chunks: Vec<u64> = (0..n as u64)
            .map(|i| (start_ms + ttft_ms + i * itl_ms) * ms)
            .collect();
        {
            let mut built = RequestRecord::new(id, Phase::Profiling);
            built.x_request_id = None;
            built.worker = 0;
            built.origin_unix_ns = 0;
            built.start_ns = start_ms * ms;
            built.response_ns = None;
            built.end_ns = chunks.last().copied().unwrap_or(start_ms * ms);
            built.first_content_ns = chunks.first().copied();
            built.chunk_ns = chunks;
            built.input_tokens = Some(10);
            built.server_input_tokens = None;
            built.output_tokens = Some(n);
            built.output_tokens_source = Some(TokenSource::Usage);
            built.client_output_tokens = Some(n);
            built.output_bytes = 0;
            built.requested_output_tokens = Some(n);
            built.finish_reason = None;
            built.error = None;
            built.attempts = 1;
            built.intended_start_ns = None;
            built
        }
    }

    /// Issue 20, item 10: an interrupted level warned "only 1.0 requests per slot"; it now
    /// says it is partial, and a rejected server usage count is named.
    #[test]
    fn an_interrupted_level_says_so_and_rejected_usage_is_named() {
        let mut cancelled = rec(1, 0, 5, 1, 0);
        cancelled.error = Some(kneepoint_core::ErrorRecord::from(
            &kneepoint_core::Error::Cancelled,
        ));
        let mut lying = rec(0, 0, 5, 1, 4);
        lying.rejected_usage_tokens = Some(400);
        let s = LevelSummary::from_records(64, &[lying, cancelled], &GoodputSlo::default());
        assert!(
            s.warnings
                .iter()
                .any(|w| w.starts_with("interrupted: 1 requests")),
            "{:?}",
            s.warnings
        );
        assert!(
            !s.warnings.iter().any(|w| w.contains("per slot")),
            "{:?}",
            s.warnings
        );
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("e.g. 400 tokens for 4 chunks")),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn aggregates_hand_computed() {
        // two requests over 0..1000 ms: 10 tokens each; one failure; one warm-up ignored
        let a = rec(0, 0, 100, 10, 10); // ends at 190 ms
        let b = rec(1, 500, 300, 50, 11); // ends at 500+300+500 = 1300 ms
        let failed = failed_503();
        let mut warm = rec(3, 0, 5, 5, 3);
        warm.phase = Phase::Warmup;
        warm.end_ns = 99_000_000_000;
        let s = LevelSummary::from_records(1, &[a, b, failed, warm], &GoodputSlo::default());
        assert_eq!(s.request_count, 3);
        assert_eq!(s.ok_count, 2);
        assert_eq!(s.error_count, 1);
        assert!((s.error_rate - 1.0 / 3.0).abs() < 1e-12);
        assert!((s.benchmark_duration_s - 1.3).abs() < 1e-12);
        assert!((s.output_token_throughput - 21.0 / 1.3).abs() < 1e-9);
        assert!((s.request_throughput - 2.0 / 1.3).abs() < 1e-9);
        // Counted over a longer duration (a merged level's common window): every rate scales.
        let mut t = s.clone();
        t.rescale_duration(2.6);
        assert!((t.output_token_throughput - 21.0 / 2.6).abs() < 1e-9);
        assert!((t.request_throughput - 2.0 / 2.6).abs() < 1e-9);
        assert_eq!(t.benchmark_duration_s, 2.6);
        t.rescale_duration(f64::NAN);
        assert_eq!(t.benchmark_duration_s, 2.6);
        assert_eq!(s.stat("time_to_first_token", "avg"), Some(200.0));
        assert_eq!(s.stat("time_to_first_token", "p50"), Some(200.0));
        assert_eq!(s.stat("inter_token_latency", "min"), Some(10.0));
        assert_eq!(s.stat("inter_token_latency", "max"), Some(50.0));
        // 9 gaps of 10 ms and 10 gaps of 50 ms
        let icl = s.metrics["inter_chunk_latency"].stats;
        assert_eq!(icl.count, 19);
        assert!((icl.avg - (90.0 + 500.0) / 19.0).abs() < 1e-9);
        assert_eq!(s.errors_by_kind["http_status"], 1);
        assert_eq!(s.error_summary[0].code, Some(503));
        assert!(s.goodput.is_none());
        assert!(s.warnings.is_empty());
    }

    #[test]
    fn goodput_and_mismatch_warning() {
        let a = rec(0, 0, 100, 10, 10);
        let mut b = rec(1, 0, 900, 10, 10);
        b.requested_output_tokens = Some(20);
        let slo = GoodputSlo {
            ttft_ms: Some(500.0),
            ..GoodputSlo::default()
        };
        let s = LevelSummary::from_records(1, &[a, b], &slo);
        // duration 0..990 ms; one good request
        assert!((s.goodput.unwrap() - 1.0 / 0.99).abs() < 1e-9);
        assert_eq!(s.osl_mismatches, 1);
        assert_eq!(s.warnings.len(), 1);
    }

    #[test]
    fn empty_level() {
        let s = LevelSummary::from_records(1, &[], &GoodputSlo::default());
        assert_eq!(s.request_count, 0);
        assert_eq!(s.error_rate, 0.0);
        assert!(s.metrics.is_empty());
    }
}
