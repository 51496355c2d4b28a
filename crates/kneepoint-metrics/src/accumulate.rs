//! A level's aggregates gathered one record at a time: with every value kept
//! ([`LevelSummary::from_records`], exact) or in bounded memory ([`StreamingSummary`], for
//! levels of any length).

use std::collections::BTreeMap;

use kneepoint_core::{ErrorKind, Metric, Phase, RequestRecord, Stat, TokenSource};

use crate::prompt_counts::PromptCounts;
use crate::request_metrics::RequestMetrics;
use crate::stats::Stats;
use crate::stream::{Bracket, StreamColumn};
use crate::summary::SCHEDULE_LAG_LIMIT_MS;
use crate::summary::{ErrorGroup, GoodputSlo, LevelSummary, MetricSummary};
use crate::OslSource;

use crate::error_groups::{ErrorGroups, MAX_ERROR_GROUPS};

/// Where an accumulator keeps one metric's values.
pub(crate) trait Column: Default {
    fn push(&mut self, v: f64);
}

impl Column for Vec<f64> {
    fn push(&mut self, v: f64) {
        Vec::push(self, v);
    }
}

impl Column for StreamColumn {
    fn push(&mut self, v: f64) {
        StreamColumn::push(self, v);
    }
}

/// Every per-request metric value of a successful record `r` (metrics `m`); a metric with
/// many values per request (the inter-chunk gaps) comes as one slice, so that its column is
/// looked up once per request.
fn metric_values(m: &RequestMetrics, mut f: impl FnMut(Metric, &[f64])) {
    let mut push = |metric: Metric, v: Option<f64>| {
        if let Some(v) = v {
            f(metric, &[v]);
        }
    };
    push(Metric::TimeToFirstToken, m.ttft_ms);
    push(Metric::TimeToFirstOutputToken, m.ttfo_ms);
    push(Metric::TimeToSecondToken, m.ttst_ms);
    push(Metric::RequestLatency, m.request_latency_ms);
    push(Metric::StreamEndLatency, Some(m.stream_end_latency_ms));
    push(Metric::InterTokenLatency, m.itl_ms);
    push(
        Metric::OutputTokenThroughputPerUser,
        m.tokens_per_s_per_user,
    );
    push(Metric::OutputSequenceLength, m.osl.map(f64::from));
    push(
        Metric::ReasoningTokenCount,
        m.reasoning_tokens.map(f64::from),
    );
    push(Metric::OutputTokenCount, m.answer_tokens.map(f64::from));
    push(Metric::InputSequenceLength, m.isl.map(f64::from));
    push(
        Metric::TimeToFirstTokenFromSchedule,
        m.ttft_from_schedule_ms,
    );
    push(
        Metric::RequestLatencyFromSchedule,
        m.request_latency_from_schedule_ms,
    );
    if !m.inter_chunk_ms.is_empty() {
        f(Metric::InterChunkLatency, &m.inter_chunk_ms);
    }
    if let Some(c) = &m.connection {
        f(Metric::HttpReqDnsLookup, &[c.dns_ms]);
        f(Metric::HttpReqConnecting, &[c.connecting_ms]);
        f(Metric::HttpReqTlsHandshaking, &[c.tls_ms]);
        f(Metric::HttpReqConnectionOverhead, &[c.overhead_ms]);
        f(Metric::HttpReqConnectionReused, &[c.reused]);
        f(Metric::HttpReqWaiting, &[c.waiting_ms]);
    }
}

/// Every value a measured record contributes, failed ones included (their schedule lag).
fn record_values(r: &RequestRecord, mut f: impl FnMut(Metric, &[f64])) -> Option<RequestMetrics> {
    if let Some(i) = r.intended_start_ns {
        f(
            Metric::ScheduleLag,
            &[r.start_ns.saturating_sub(i) as f64 / 1e6],
        );
    }
    if r.error.is_some() {
        return None;
    }
    let m = RequestMetrics::of(r);
    metric_values(&m, f);
    Some(m)
}

/// The running aggregates of one level.
#[derive(Debug, Clone)]
pub(crate) struct Accumulator<C> {
    slo: GoodputSlo,
    n: usize,
    spans: BTreeMap<u64, (u64, u64)>,
    cols: BTreeMap<Metric, C>,
    ok: usize,
    good: usize,
    out_tokens: u64,
    pooled_items: Option<u64>,
    in_tokens: u64,
    osl_sources: BTreeMap<OslSource, usize>,
    mismatches: usize,
    disagreements: usize,
    rejected: Option<(u32, usize)>,
    rejected_count: usize,
    prompts: PromptCounts,
    errors_by_kind: BTreeMap<ErrorKind, usize>,
    groups: ErrorGroups,
}

impl<C: Column> Accumulator<C> {
    pub(crate) fn new(slo: &GoodputSlo) -> Self {
        Accumulator {
            slo: *slo,
            n: 0,
            spans: BTreeMap::new(),
            cols: BTreeMap::new(),
            ok: 0,
            good: 0,
            out_tokens: 0,
            pooled_items: None,
            in_tokens: 0,
            osl_sources: BTreeMap::new(),
            mismatches: 0,
            disagreements: 0,
            rejected: None,
            rejected_count: 0,
            prompts: PromptCounts::default(),
            errors_by_kind: BTreeMap::new(),
            groups: ErrorGroups::default(),
        }
    }

    /// Adds one record (warm-up records are ignored).
    pub(crate) fn push(&mut self, r: &RequestRecord) {
        if r.phase != Phase::Profiling {
            return;
        }
        self.n += 1;
        // Records of several runs of a level (pooled) carry their runs' own origins: the
        // measured time is the sum of each run's span, not the span across runs.
        let span = self
            .spans
            .entry(r.origin_unix_ns)
            .or_insert((r.start_ns, r.end_ns));
        span.0 = span.0.min(r.start_ns);
        span.1 = span.1.max(r.end_ns);
        let cols = &mut self.cols;
        let metrics = record_values(r, |metric, vs| {
            let col = cols.entry(metric).or_default();
            vs.iter().for_each(|&v| col.push(v));
        });
        if let Some(e) = &r.error {
            *self.errors_by_kind.entry(e.kind).or_default() += 1;
            self.groups.add(e);
            return;
        }
        let Some(m) = metrics else { return };
        self.ok += 1;
        if !self.slo.is_empty() && self.slo.met_by(&m) {
            self.good += 1;
        }
        self.out_tokens += u64::from(m.osl.unwrap_or(0));
        self.in_tokens += u64::from(m.isl.unwrap_or(0));
        if let Some(n) = r.pooled_items {
            *self.pooled_items.get_or_insert(0) += u64::from(n);
        }
        let source = OslSource(r.output_tokens_source);
        *self.osl_sources.entry(source).or_default() += 1;
        if let (Some(want), Some(got)) = (r.requested_output_tokens, r.output_tokens) {
            if want != got {
                self.mismatches += 1;
            }
        }
        // Single-turn text prompts only: a conversation's history, images and audio add tokens
        // on the server that vary with the turn and the media, not with the tokenizer.
        if let (Some(client), Some(server), None, None, None) = (
            r.input_tokens,
            r.server_input_tokens,
            r.history_tokens,
            r.image_count,
            r.audio_count,
        ) {
            self.prompts.push(client, server);
        }
        if let Some(u) = r.rejected_usage_tokens {
            self.rejected.get_or_insert((u, r.chunk_ns.len()));
            self.rejected_count += 1;
        }
        if r.output_tokens_source == Some(TokenSource::Usage) {
            if let (Some(s), Some(c)) = (r.output_tokens, r.client_output_tokens) {
                if f64::from(s.abs_diff(c)) > 0.05 * f64::from(s.max(1)) {
                    self.disagreements += 1;
                }
            }
        }
    }

    /// Measured records seen.
    pub(crate) fn records(&self) -> usize {
        self.n
    }

    /// The level's summary, each metric's statistics from `stats`.
    pub(crate) fn finish(
        &self,
        concurrency: u32,
        stats: impl Fn(Metric, &C) -> Option<Stats>,
    ) -> LevelSummary {
        let duration_s = self
            .spans
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
        let metrics: BTreeMap<Metric, MetricSummary> = self
            .cols
            .iter()
            .filter_map(|(&metric, col)| {
                let summary = MetricSummary {
                    unit: metric.unit().to_owned(),
                    stats: stats(metric, col)?,
                };
                Some((metric, summary))
            })
            .collect();
        let mut error_summary: Vec<ErrorGroup> = self.groups.summary();
        error_summary.sort_by_key(|g| std::cmp::Reverse(g.count));
        error_summary.truncate(20);
        let (n, ok) = (self.n, self.ok);
        let errors = n - ok;
        let warnings = self.warnings(concurrency, &metrics);
        LevelSummary {
            concurrency,
            request_count: n,
            ok_count: ok,
            error_count: errors,
            error_rate: if n > 0 { errors as f64 / n as f64 } else { 0.0 },
            benchmark_duration_s: duration_s,
            request_throughput: per_s(ok as f64),
            output_token_throughput: per_s(self.out_tokens as f64),
            total_output_tokens: self.out_tokens,
            total_input_tokens: self.in_tokens,
            input_token_throughput: per_s(self.in_tokens as f64),
            pooled_item_throughput: self.pooled_items.map(|n| per_s(n as f64)),
            goodput: (!self.slo.is_empty()).then(|| per_s(self.good as f64)),
            slo_miss_rate: (!self.slo.is_empty() && n > 0)
                .then(|| (n - self.good) as f64 / n as f64),
            goodput_slo: (!self.slo.is_empty()).then_some(self.slo),
            metrics,
            errors_by_kind: self.errors_by_kind.clone(),
            error_summary,
            osl_sources: self.osl_sources.clone(),
            osl_mismatches: self.mismatches,
            osl_source_disagreements: self.disagreements,
            warnings,
            server: None,
            intervals: BTreeMap::new(),
            client: None,
            steadiness: None,
        }
    }

    fn warnings(&self, concurrency: u32, metrics: &BTreeMap<Metric, MetricSummary>) -> Vec<String> {
        let (n, ok) = (self.n, self.ok);
        let mut warnings = Vec::new();
        let lag = metrics.get(&Metric::ScheduleLag);
        if let Some(lag) = lag.and_then(|m| m.stats.get(Stat::P99.label())) {
            if lag > SCHEDULE_LAG_LIMIT_MS {
                warnings.push(format!(
                    "the client fell behind its arrival schedule: p99 schedule lag {lag:.1} ms (> {SCHEDULE_LAG_LIMIT_MS} ms), so the offered load was lower than asked; latency from the intended start counts the delay"
                ));
            }
        }
        if self.mismatches > 0 {
            warnings.push(format!(
                "{} of {ok} successful requests generated a different number of tokens than requested (set ignore_eos/min_tokens to control output length)",
                self.mismatches
            ));
        }
        if self.disagreements > 0 {
            warnings.push(format!(
                "{} requests: the server's completion_tokens and the client's token count differ by more than 5 %",
                self.disagreements
            ));
        }
        if let Some((u, chunks)) = self.rejected {
            warnings.push(format!(
                "{} requests: the server's completion_tokens was implausible (e.g. {u} tokens for {chunks} chunks) and the client's count was used instead (--trust-server-usage keeps the server's)",
                self.rejected_count
            ));
        }
        if let Some(n) = self.osl_sources.get(&TokenSource::Estimate.into()) {
            warnings.push(format!(
                "{n} requests had no server usage; their output length is a whitespace-word estimate"
            ));
        }
        warnings.extend(self.prompts.warning());
        if n > 0 && ok == 0 {
            warnings.push("every request failed".into());
        }
        let cancelled = self.errors_by_kind.get(&ErrorKind::Cancelled).copied();
        let cancelled = cancelled.unwrap_or(0);
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
        warnings
    }
}

impl LevelSummary {
    /// Summarises the measured (non-warm-up) records of one level.
    pub fn from_records(concurrency: u32, records: &[RequestRecord], slo: &GoodputSlo) -> Self {
        let mut acc = Accumulator::<Vec<f64>>::new(slo);
        records.iter().for_each(|r| acc.push(r));
        let mut s = acc.finish(concurrency, |_, c| Stats::of(c));
        let level = [
            s.error_rate,
            s.output_token_throughput,
            s.request_throughput,
        ];
        s.intervals = crate::level_intervals(concurrency, records, level, slo);
        s
    }
}

/// A level's summary gathered record by record in bounded memory: counts, totals, rates,
/// means, minima and maxima exact; percentiles exact while a metric takes few distinct values
/// and within 0.1 % (an `hdrhistogram` of 3 significant digits) past that, or exact again with
/// a second pass over the records ([`StreamingSummary::second_pass`]).
///
/// ```
/// use kneepoint_core::{Metric, Phase, RequestRecord, Stat};
/// use kneepoint_metrics::{GoodputSlo, StreamingSummary};
///
/// let mut s = StreamingSummary::new(&GoodputSlo::default());
/// for i in 0..1000u64 {
///     let mut r = RequestRecord::new(i, Phase::Profiling);
///     r.start_ns = i * 1_000_000;
///     r.chunk_ns = vec![r.start_ns + 20_000_000 + i * 1000];
///     r.end_ns = r.chunk_ns[0];
///     s.push(&r);
/// }
/// let summary = s.summary(8);
/// assert_eq!(summary.request_count, 1000);
/// let p50 = summary.value(Metric::TimeToFirstToken, Stat::P50).unwrap();
/// assert!((p50 - 20.4995).abs() < 20.5 / 1024.0);
/// ```
#[derive(Debug, Clone)]
pub struct StreamingSummary {
    acc: Accumulator<StreamColumn>,
}

impl StreamingSummary {
    /// An empty summary judging goodput against `slo`.
    pub fn new(slo: &GoodputSlo) -> Self {
        let mut acc = Accumulator::new(slo);
        acc.groups = ErrorGroups::bounded(MAX_ERROR_GROUPS);
        StreamingSummary { acc }
    }

    /// Adds one record (warm-up records are ignored).
    pub fn push(&mut self, r: &RequestRecord) {
        self.acc.push(r);
    }

    /// Measured records seen.
    pub fn records(&self) -> usize {
        self.acc.records()
    }

    /// True when some percentile comes from a histogram (within 0.1 %, not exact).
    pub fn is_approximate(&self) -> bool {
        self.acc.cols.values().any(StreamColumn::is_approximate)
    }

    /// The summary so far.
    pub fn summary(&self, concurrency: u32) -> LevelSummary {
        let mut s = self.acc.finish(concurrency, |_, c| c.stats());
        if self.is_approximate() {
            s.warnings.push(format!(
                "the percentiles of this level's {} records come from histograms of 3 significant digits (within 0.1 %); --exact-percentiles computes them exactly with a second pass over profile_export.jsonl",
                self.acc.n
            ));
        }
        s
    }

    /// Starts a second pass that makes every percentile exact: offer it the same records
    /// again (read back from the level's JSONL, in any order), then take its summary. Memory
    /// holds only the values of the histogram buckets the percentiles fall in.
    pub fn second_pass(&self) -> SecondPass<'_> {
        SecondPass {
            of: self,
            brackets: self
                .acc
                .cols
                .iter()
                .map(|(name, c)| (*name, c.brackets()))
                .filter(|(_, b)| !b.is_empty())
                .collect(),
        }
    }
}

/// A second pass over a level's records ([`StreamingSummary::second_pass`]).
#[derive(Debug)]
pub struct SecondPass<'a> {
    of: &'a StreamingSummary,
    brackets: BTreeMap<Metric, Vec<Bracket>>,
}

impl SecondPass<'_> {
    /// Offers one record again (warm-up records are ignored).
    pub fn offer(&mut self, r: &RequestRecord) {
        if r.phase != Phase::Profiling || self.brackets.is_empty() {
            return;
        }
        let brackets = &mut self.brackets;
        record_values(r, |metric, vs| {
            if let Some(bs) = brackets.get_mut(&metric) {
                for &v in vs {
                    bs.iter_mut().for_each(|b| b.offer(v));
                }
            }
        });
    }

    /// The summary with every percentile exact (a percentile whose records were not all
    /// offered again keeps its histogram value, and a warning says so).
    pub fn summary(self, concurrency: u32) -> LevelSummary {
        let short = self.brackets.values().flatten().any(|b| !b.is_full());
        let brackets = std::cell::RefCell::new(self.brackets);
        let mut s = self.of.acc.finish(concurrency, |metric, c| {
            match brackets.borrow_mut().get_mut(&metric) {
                Some(b) => c.stats_with(b),
                None => c.stats(),
            }
        });
        if short {
            s.warnings.push(format!(
                "the second pass found fewer records than the level's {}: some percentiles stay within 0.1 % rather than exact",
                self.of.acc.n
            ));
        }
        s
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kneepoint_core::{ErrorKind, ErrorRecord};
    use kneepoint_core::{Metric, Stat};
    use rand::{Rng, SeedableRng};

    /// 50,000 records with varied latencies, token counts and a few failures.
    fn records() -> Vec<RequestRecord> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let ms = 1_000_000u64;
        (0..50_000u64)
            .map(|i| {
                let mut r = RequestRecord::new(i, Phase::Profiling);
                r.start_ns = i * ms / 10;
                let ttft = (20.0 + rng.random::<f64>().powi(2) * 400.0) * ms as f64;
                let first = r.start_ns + ttft as u64;
                let n = 8 + (i % 5) as u32;
                r.chunk_ns = (0..u64::from(n))
                    .map(|k| first + k * (5 * ms + rng.random_range(0..ms)))
                    .collect();
                r.end_ns = *r.chunk_ns.last().unwrap();
                r.input_tokens = Some(100 + (i % 3) as u32);
                r.output_tokens = Some(n);
                r.output_tokens_source = Some(TokenSource::Usage);
                if i % 97 == 0 {
                    r.error = Some(ErrorRecord {
                        kind: ErrorKind::HttpStatus,
                        code: Some(503),
                        message: format!("busy {}", i % 2),
                    });
                }
                r
            })
            .collect()
    }

    #[test]
    fn streamed_summary_matches_the_exact_one_and_a_second_pass_makes_it_exact() {
        let records = records();
        let exact = LevelSummary::from_records(64, &records, &GoodputSlo::default());
        let mut s = StreamingSummary::new(&GoodputSlo::default());
        records.iter().for_each(|r| s.push(r));
        assert_eq!(s.records(), records.len());
        assert!(s.is_approximate());
        let streamed = s.summary(64);
        // Everything but the percentiles (and the note saying so) is the same.
        assert_eq!(streamed.request_count, exact.request_count);
        assert_eq!(streamed.error_summary, exact.error_summary);
        assert_eq!(streamed.total_output_tokens, exact.total_output_tokens);
        assert_eq!(streamed.benchmark_duration_s, exact.benchmark_duration_s);
        assert_eq!(
            streamed.output_token_throughput,
            exact.output_token_throughput
        );
        assert_eq!(streamed.warnings.len(), exact.warnings.len() + 1);
        assert_eq!(
            streamed.metrics.keys().collect::<Vec<_>>(),
            exact.metrics.keys().collect::<Vec<_>>()
        );
        for (name, m) in &exact.metrics {
            let got = &streamed.metrics[name].stats;
            assert_eq!(
                (got.count, got.min, got.max),
                (m.stats.count, m.stats.min, m.stats.max)
            );
            for (p, _) in crate::PERCENTILES {
                let (g, w) = (got.get(p).unwrap(), m.stats.get(p).unwrap());
                assert!(
                    (g - w).abs() <= w.abs() / 1024.0 + 1e-9,
                    "{name} {p}: {g} vs {w}"
                );
            }
        }
        // Token counts take few values: exact without a second pass.
        assert_eq!(
            streamed.value(Metric::OutputSequenceLength, Stat::P50),
            exact.value(Metric::OutputSequenceLength, Stat::P50)
        );
        let mut pass = s.second_pass();
        records.iter().rev().for_each(|r| pass.offer(r));
        let again = pass.summary(64);
        assert_eq!(again.warnings, exact.warnings);
        for (name, m) in &exact.metrics {
            for (p, _) in crate::PERCENTILES {
                let got = again.metrics.get(name).and_then(|a| a.stats.get(p));
                assert_eq!(got, m.stats.get(p), "{name} {p}");
            }
            let got = &again.metrics[name].stats;
            assert!((got.avg - m.stats.avg).abs() <= 1e-9 * m.stats.avg.abs().max(1.0));
        }
        // A second pass that saw only part of the records says so.
        let mut short = s.second_pass();
        records[..100].iter().for_each(|r| short.offer(r));
        assert!(short
            .summary(64)
            .warnings
            .iter()
            .any(|w| w.contains("second pass")));
    }

    #[test]
    fn error_groups_stay_bounded() {
        let mut s = StreamingSummary::new(&GoodputSlo::default());
        for i in 0..(MAX_ERROR_GROUPS as u64 + 500) {
            let mut r = RequestRecord::new(i, Phase::Profiling);
            // distinct words, not numbers: numbers alone make one group
            let word: String = format!("{i:x}")
                .chars()
                .map(|c| (b'g' + c.to_digit(16).unwrap_or(0) as u8) as char)
                .collect();
            r.error = Some(ErrorRecord {
                kind: ErrorKind::HttpStatus,
                code: Some(500),
                message: format!("request {word} failed"),
            });
            s.push(&r);
        }
        assert_eq!(s.acc.groups.len(), MAX_ERROR_GROUPS + 1);
        let summary = s.summary(1);
        assert_eq!(summary.error_summary[0].message, "(other messages)");
        assert_eq!(summary.error_summary[0].count, 500);
        assert_eq!(summary.error_count, MAX_ERROR_GROUPS + 500);
    }
}
