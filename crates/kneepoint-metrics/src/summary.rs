//! Per-level aggregates.

use std::collections::BTreeMap;

use kneepoint_core::{ErrorKind, Metric, Stat, StatKey};
use serde::{Deserialize, Serialize};

pub use crate::slo::GoodputSlo;
use crate::stats::Stats;

/// One metric's statistics and unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSummary {
    /// The display unit (`ms`, `tokens`, `tokens/sec/user`).
    pub unit: String,
    /// The statistics.
    #[serde(flatten)]
    pub stats: Stats,
}

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
    /// Share of the measured requests, failed ones included, that missed at least one SLO
    /// (one minus the attainment; only when SLOs were given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_miss_rate: Option<f64>,
    /// The per-request SLOs `goodput` and `slo_miss_rate` were judged against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_slo: Option<GoodputSlo>,
    /// Statistics per metric (written by name; a name this version does not know is left
    /// out when read back).
    #[serde(deserialize_with = "crate::summary_keys::known_keys")]
    pub metrics: BTreeMap<Metric, MetricSummary>,
    /// Failures per error kind.
    #[serde(deserialize_with = "crate::summary_keys::known_keys")]
    pub errors_by_kind: BTreeMap<ErrorKind, usize>,
    /// Failures grouped by (kind, code, message), most frequent first, at most 20.
    pub error_summary: Vec<ErrorGroup>,
    /// Where output token counts came from, per source.
    #[serde(deserialize_with = "crate::summary_keys::known_keys")]
    pub osl_sources: BTreeMap<crate::OslSource, usize>,
    /// Successful requests whose output length differs from the length asked for.
    pub osl_mismatches: usize,
    /// Requests whose server and client output token counts disagree by more than 5 %.
    pub osl_source_disagreements: usize,
    /// Human-readable warnings about the measurement.
    pub warnings: Vec<String>,
    /// What the server's (and GPUs') metrics showed during the level, when scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<kneepoint_core::ServerSummary>,
    /// 90 % intervals of the statistics the planner and reports read, keyed `metric:stat`
    /// (a block bootstrap over the level's requests: [`crate::level_intervals`]); empty for
    /// a level summarised in bounded memory or with fewer than 20 requests.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "crate::summary_keys::known_keys"
    )]
    pub intervals: BTreeMap<StatKey, crate::StatInterval>,
    /// How the client fared during the level, and whether it could have shaped the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<kneepoint_core::ClientHealth>,
    /// Whether the level was steady over its time slices (`--slice-s`; see
    /// [`crate::time_slices`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steadiness: Option<crate::Steadiness>,
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
        // Their intervals were drawn over the records' span: they move with them.
        for (key, iv) in self.intervals.iter_mut() {
            if matches!(
                key.metric(),
                Metric::OutputTokenThroughput | Metric::RequestThroughput | Metric::Goodput
            ) {
                iv.low *= k;
                iv.high *= k;
            }
        }
    }

    /// One statistic of one metric: `value(Metric::TimeToFirstToken, Stat::P95)`.
    pub fn value(&self, metric: Metric, stat: Stat) -> Option<f64> {
        self.metrics.get(&metric)?.stats.get(stat.label())
    }

    /// The 90 % interval of one statistic, when the level has one.
    pub fn interval(&self, metric: Metric, stat: Stat) -> Option<&crate::StatInterval> {
        self.intervals.get(&StatKey::new(metric, stat))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kneepoint_core::RequestRecord;
    use kneepoint_core::{ErrorRecord, Phase, TokenSource};

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
        assert_eq!(s.value(Metric::TimeToFirstToken, Stat::Avg), Some(200.0));
        assert_eq!(s.value(Metric::TimeToFirstToken, Stat::P50), Some(200.0));
        assert_eq!(s.value(Metric::InterTokenLatency, Stat::Min), Some(10.0));
        assert_eq!(s.value(Metric::InterTokenLatency, Stat::Max), Some(50.0));
        // 9 gaps of 10 ms and 10 gaps of 50 ms
        let icl = s.metrics[&Metric::InterChunkLatency].stats;
        assert_eq!(icl.count, 19);
        assert!((icl.avg - (90.0 + 500.0) / 19.0).abs() < 1e-9);
        assert_eq!(s.errors_by_kind[&ErrorKind::HttpStatus], 1);
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
        let mut failed = rec(2, 0, 50, 10, 10);
        failed.error = Some(kneepoint_core::ErrorRecord::from(
            &kneepoint_core::Error::Cancelled,
        ));
        let s = LevelSummary::from_records(1, &[a.clone(), b.clone()], &slo);
        // duration 0..990 ms; one good request
        assert!((s.goodput.unwrap() - 1.0 / 0.99).abs() < 1e-9);
        assert_eq!(s.slo_miss_rate, Some(0.5));
        assert_eq!(s.goodput_slo, Some(slo));
        assert_eq!(s.osl_mismatches, 1);
        assert_eq!(s.warnings.len(), 1);
        // a failed request is never good: 1 of 3 met the SLO
        let s = LevelSummary::from_records(1, &[a, b, failed], &slo);
        assert!((s.slo_miss_rate.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        let none = LevelSummary::from_records(1, &[rec(0, 0, 1, 1, 1)], &GoodputSlo::default());
        assert_eq!((none.slo_miss_rate, none.goodput_slo), (None, None));
    }

    /// A summary reads back as written, with its metrics, error kinds, token sources and
    /// intervals keyed by name; one written by another version, naming a metric or interval
    /// this one does not know, still reads (those entries left out).
    #[test]
    fn a_saved_summary_reads_back_and_unknown_names_are_left_out() {
        let mut s = sample_summary();
        let key = StatKey::new(Metric::RequestLatency, Stat::P99);
        let iv = crate::StatInterval {
            low: 1.0,
            high: 2.0,
            relative_se: 0.1,
        };
        s.intervals.insert(key, iv);
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["metrics"]["time_to_first_token"]["p50"].is_number());
        assert_eq!(json["errors_by_kind"]["http_status"], 1);
        assert_eq!(json["osl_sources"]["usage"], 2);
        assert_eq!(json["intervals"]["request_latency:p99"]["high"], 2.0);
        assert_eq!(
            serde_json::from_value::<LevelSummary>(json.clone()).unwrap(),
            s
        );
        let mut other = json;
        other["metrics"]["time_to_fifth_token"] = other["metrics"]["time_to_first_token"].clone();
        other["intervals"]["time_to_fifth_token:p99"] =
            other["intervals"]["request_latency:p99"].clone();
        other["errors_by_kind"]["solar_flare"] = 1.into();
        assert_eq!(serde_json::from_value::<LevelSummary>(other).unwrap(), s);
    }

    #[test]
    fn empty_level() {
        let s = LevelSummary::from_records(1, &[], &GoodputSlo::default());
        assert_eq!(s.request_count, 0);
        assert_eq!(s.error_rate, 0.0);
        assert!(s.metrics.is_empty());
    }
}
