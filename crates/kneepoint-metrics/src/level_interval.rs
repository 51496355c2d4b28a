//! How precisely one level measured its statistics: a moving-block bootstrap over the level's
//! requests in the order they started, blocks as long as the level's concurrency (one wave of
//! a closed loop: requests in flight together shared the server's batches, so their latencies
//! move together, and resampling them one by one would pretend they were independent). Each
//! resample recomputes the statistics the planner and the reports read; the 5th and 95th
//! percentiles of the resamples are the 90 % interval, their standard deviation over the
//! point value the relative standard error the search uses to judge a close call.
//!
//! The throughputs are a ratio (tokens or requests over the time the level's requests were in
//! flight): their interval is the resampled ratio `Σ tokens / Σ latency` relative to the
//! level's own, applied to the measured throughput. The bootstrap is written here for the
//! same reason as `compare`'s: no maintained crate offers a block bootstrap of quantiles.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use kneepoint_core::{Metric, RequestRecord, Stat, StatKey};

use crate::quantile_sorted;
use crate::request_metrics::RequestMetrics;
use crate::slo::GoodputSlo;

/// The coverage of every level interval.
pub const LEVEL_INTERVAL: f64 = 0.9;
/// Resamples per level (the 5 % tails rest on 10 resamples each).
const RESAMPLES: usize = 200;
/// The fewest blocks a level is cut into.
const MIN_BLOCKS: usize = 4;
/// Fewer measured requests than this and a level reports no interval.
const MIN_RECORDS: usize = 20;
/// More than this and a level reports no interval (the cost, O(resamples × records), grows
/// with the level).
const MAX_RECORDS: usize = 200_000;
/// The statistics given an interval: the mean, then percentiles.
const STATS: [Stat; 5] = [Stat::Avg, Stat::P50, Stat::P90, Stat::P95, Stat::P99];
/// The per-request metrics given an interval.
const METRICS: [Metric; 4] = [
    Metric::TimeToFirstToken,
    Metric::InterTokenLatency,
    Metric::RequestLatency,
    Metric::OutputTokenThroughputPerUser,
];
/// The level-wide values given an interval, in the order of `level_intervals`' `level` and
/// then the SLO miss rate.
const LEVEL: [Metric; 4] = [
    Metric::ErrorRate,
    Metric::OutputTokenThroughput,
    Metric::RequestThroughput,
    Metric::SloMissRate,
];

/// A statistic's 90 % interval at one level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StatInterval {
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// Standard deviation of the resampled statistic over its measured value.
    pub relative_se: f64,
}

/// One request's values, in start order.
struct Row {
    failed: bool,
    /// Failed, or missed a per-request SLO (`None`: no SLO was set).
    missed: Option<bool>,
    /// Per metric: the rank of the request's value among the level's (None: no value).
    ranks: [Option<u32>; METRICS.len()],
    tokens: f64,
    latency_s: f64,
}

/// The `k`-th smallest (0-based) of a multiset given as counts over sorted values, for each
/// `k` of `ks` (in any order), in one scan.
fn order_statistics(sorted: &[f64], counts: &[u32], ks: &[usize], out: &mut Vec<f64>) {
    let mut order: Vec<usize> = (0..ks.len()).collect();
    order.sort_by_key(|&i| ks[i]);
    let start = out.len();
    out.extend(std::iter::repeat_n(f64::NAN, ks.len()));
    let (mut seen, mut j) = (0usize, 0usize);
    for (v, c) in sorted.iter().zip(counts) {
        seen += *c as usize;
        while j < order.len() && ks[order[j]] < seen {
            out[start + order[j]] = *v;
            j += 1;
        }
    }
}

/// The statistics of one sample, given as how often each row was drawn. Quantiles are
/// numpy's linear ones, found by counting over the values' ranks (no sort per resample).
fn statistics(
    rows: &[Row],
    draws: &[u32],
    columns: &[Vec<f64>],
    counts: &mut [Vec<u32>],
    out: &mut Vec<f64>,
) {
    out.clear();
    for (m, (sorted, count)) in columns.iter().zip(counts.iter_mut()).enumerate() {
        count.iter_mut().for_each(|c| *c = 0);
        let (mut n, mut sum) = (0usize, 0.0);
        for (r, d) in rows.iter().zip(draws) {
            if let (Some(k), true) = (r.ranks[m], *d > 0) {
                count[k as usize] += d;
                n += *d as usize;
                sum += sorted[k as usize] * f64::from(*d);
            }
        }
        out.push(if n > 0 { sum / n as f64 } else { f64::NAN });
        let mut ks = Vec::with_capacity(8);
        let mut weights = Vec::with_capacity(4);
        for q in STATS.iter().filter_map(|s| s.quantile()) {
            let h = (n.saturating_sub(1)) as f64 * q;
            let lo = h.floor() as usize;
            ks.push(lo);
            ks.push((lo + 1).min(n.saturating_sub(1)));
            weights.push(h - h.floor());
        }
        let mut values = Vec::with_capacity(ks.len());
        if n == 0 {
            values.extend(std::iter::repeat_n(f64::NAN, ks.len()));
        } else {
            order_statistics(sorted, count, &ks, &mut values);
        }
        for (pair, w) in values.chunks(2).zip(&weights) {
            out.push(pair[0] + (pair[1] - pair[0]) * w);
        }
    }
    let (mut n, mut failed, mut time, mut tokens) = (0.0, 0.0, 0.0, 0.0);
    for (r, d) in rows.iter().zip(draws) {
        let d = f64::from(*d);
        n += d;
        time += r.latency_s * d;
        if r.failed {
            failed += d;
        } else {
            tokens += r.tokens * d;
        }
    }
    out.push(if n > 0.0 { failed / n } else { f64::NAN });
    out.push(if time > 0.0 { tokens / time } else { f64::NAN });
    out.push(if time > 0.0 {
        (n - failed) / time
    } else {
        f64::NAN
    });
    let (mut judged, mut missed) = (0.0, 0.0);
    for (r, d) in rows.iter().zip(draws) {
        if let Some(m) = r.missed {
            judged += f64::from(*d);
            missed += if m { f64::from(*d) } else { 0.0 };
        }
    }
    out.push(if judged > 0.0 {
        missed / judged
    } else {
        f64::NAN
    });
}

/// Each metric's values over the successful requests, sorted, and every request's rank
/// among them (`None` where it has no value).
fn ranked_columns(metrics: &[Option<RequestMetrics>]) -> (Vec<Vec<f64>>, Vec<Vec<Option<u32>>>) {
    let value = |m: &RequestMetrics, i: usize| match i {
        0 => m.ttft_ms,
        1 => m.itl_ms,
        2 => m.request_latency_ms,
        _ => m.tokens_per_s_per_user,
    };
    // each metric's values sorted once, and every request's rank among them
    let mut columns: Vec<Vec<f64>> = Vec::with_capacity(METRICS.len());
    let mut ranks: Vec<Vec<Option<u32>>> = vec![vec![None; metrics.len()]; METRICS.len()];
    for (i, rank) in ranks.iter_mut().enumerate() {
        let mut idx: Vec<(f64, usize)> = metrics
            .iter()
            .enumerate()
            .filter_map(|(row, m)| Some((value(m.as_ref()?, i)?, row)))
            .filter(|(v, _)| v.is_finite())
            .collect();
        idx.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (k, (_, row)) in idx.iter().enumerate() {
            rank[*row] = Some(k as u32);
        }
        columns.push(idx.into_iter().map(|(v, _)| v).collect());
    }
    (columns, ranks)
}

/// The 90 % interval of each statistic of a level's measured (profiling-phase) records (keyed `metric:stat`,
/// e.g. `request_latency:p99`, `output_token_throughput:avg`), with the level's measured
/// `values` for the level-wide ones (`error_rate`, `output_token_throughput`,
/// `request_throughput`, read from `level`), and `slo_miss_rate:avg` when `slo` sets any
/// objective. Empty for fewer than 20 or more than 200,000 records. Deterministic: the same
/// records give the same intervals.
pub fn level_intervals(
    concurrency: u32,
    records: &[RequestRecord],
    level: [f64; 3],
    slo: &GoodputSlo,
) -> BTreeMap<StatKey, StatInterval> {
    let mut out = BTreeMap::new();
    // the measured records only, by when they started (runs pooled into one level each count
    // from their own origin: the wall clock orders them)
    let mut sorted: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.phase == kneepoint_core::Phase::Profiling)
        .collect();
    if sorted.len() < MIN_RECORDS || sorted.len() > MAX_RECORDS {
        return out;
    }
    sorted.sort_by_key(|r| r.origin_unix_ns.saturating_add(r.start_ns));
    let metrics: Vec<Option<RequestMetrics>> = sorted
        .iter()
        .map(|r| r.error.is_none().then(|| RequestMetrics::of(r)))
        .collect();
    let (columns, ranks) = ranked_columns(&metrics);
    let rows: Vec<Row> = sorted
        .iter()
        .zip(&metrics)
        .enumerate()
        .map(|(row, (r, m))| Row {
            failed: r.error.is_some(),
            missed: (!slo.is_empty()).then(|| m.as_ref().is_none_or(|m| !slo.met_by(m))),
            ranks: std::array::from_fn(|i| ranks[i][row]),
            tokens: m.as_ref().and_then(|m| m.osl).map_or(0.0, f64::from),
            latency_s: r.end_ns.saturating_sub(r.start_ns) as f64 / 1e9,
        })
        .collect();
    let mut counts: Vec<Vec<u32>> = columns.iter().map(|c| vec![0; c.len()]).collect();
    let mut point = Vec::new();
    statistics(
        &rows,
        &vec![1; rows.len()],
        &columns,
        &mut counts,
        &mut point,
    );
    // A block is a wave of the closed loop, but at most a quarter of the level: a level of one or
    // two waves (as many requests as slots) would otherwise resample itself whole and claim
    // no spread at all.
    let block = (concurrency as usize).clamp(1, (rows.len() / MIN_BLOCKS).max(1));
    let mut rng = StdRng::seed_from_u64(0x6b6e_6565 ^ u64::from(concurrency));
    let mut draws: Vec<Vec<f64>> = vec![Vec::with_capacity(RESAMPLES); point.len()];
    let (mut drawn, mut stats) = (vec![0u32; rows.len()], Vec::new());
    for _ in 0..RESAMPLES {
        drawn.iter_mut().for_each(|d| *d = 0);
        let mut n = 0;
        while n < rows.len() {
            let s = rng.random_range(0..=rows.len() - block);
            let take = block.min(rows.len() - n);
            drawn[s..s + take].iter_mut().for_each(|d| *d += 1);
            n += take;
        }
        statistics(&rows, &drawn, &columns, &mut counts, &mut stats);
        for (d, v) in draws.iter_mut().zip(&stats) {
            if v.is_finite() {
                d.push(*v);
            }
        }
    }
    let keys = METRICS
        .into_iter()
        .flat_map(|m| STATS.map(|s| StatKey::new(m, s)))
        .chain(LEVEL.map(|m| StatKey::new(m, Stat::Avg)));
    for (i, key) in keys.enumerate() {
        let d = &mut draws[i];
        let p = point[i];
        if d.len() < RESAMPLES / 2 || !p.is_finite() || p == 0.0 {
            continue;
        }
        d.sort_unstable_by(f64::total_cmp);
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64).sqrt();
        let (Some(lo), Some(hi)) = (quantile_sorted(d, 0.05), quantile_sorted(d, 0.95)) else {
            continue;
        };
        // the level-wide values: the resampled ratio relative to the level's own, applied to
        // the measured value
        let level_value = match i.checked_sub(METRICS.len() * STATS.len()) {
            Some(j) if j < level.len() => level[j],
            _ => p,
        };
        let scale = level_value / p;
        out.insert(
            key,
            StatInterval {
                low: lo * scale,
                high: hi * scale,
                relative_se: sd / p.abs(),
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::Phase;

    fn records(n: u64, jitter: f64) -> Vec<RequestRecord> {
        (0..n)
            .map(|i| {
                let mut r = RequestRecord::new(i, Phase::Profiling);
                r.start_ns = i * 10_000_000;
                // a deterministic spread of latencies: 100 ms ± jitter
                let x = ((i * 7919) % 1000) as f64 / 1000.0 - 0.5;
                let ms = 100.0 * (1.0 + jitter * x);
                r.chunk_ns = vec![r.start_ns + (ms * 0.2 * 1e6) as u64];
                r.end_ns = r.start_ns + (ms * 1e6) as u64;
                r
            })
            .collect()
    }

    #[test]
    fn the_point_values_are_numpy_s_even_for_a_few_values() {
        // 21 records: the quantiles' neighbouring ranks overlap (p95 and p99 share a floor)
        for n in [20u64, 21, 25, 64] {
            let rs = records(n, 1.0);
            let mut latencies: Vec<f64> = rs
                .iter()
                .filter_map(|r| RequestMetrics::of(r).request_latency_ms)
                .collect();
            latencies.sort_by(f64::total_cmp);
            let rows: Vec<Row> = latencies
                .iter()
                .enumerate()
                .map(|(k, _)| Row {
                    failed: false,
                    missed: None,
                    ranks: [None, None, Some(k as u32), None],
                    tokens: 0.0,
                    latency_s: 1.0,
                })
                .collect();
            let columns = vec![Vec::new(), Vec::new(), latencies.clone(), Vec::new()];
            let mut counts: Vec<Vec<u32>> = columns.iter().map(|c| vec![0; c.len()]).collect();
            let mut out = Vec::new();
            statistics(&rows, &vec![1; rows.len()], &columns, &mut counts, &mut out);
            // numpy's linear quantiles and the mean, as the summary computes them
            for (j, stat) in STATS.iter().enumerate() {
                let want = match stat.quantile() {
                    None => latencies.iter().sum::<f64>() / latencies.len() as f64,
                    Some(q) => quantile_sorted(&latencies, q).unwrap(),
                };
                let got = out[2 * STATS.len() + j];
                assert!((got - want).abs() < 1e-6, "n {n} {stat}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn intervals_cover_the_point_and_widen_with_the_spread() {
        let narrow = level_intervals(
            8,
            &records(1000, 0.1),
            [0.0, 10.0, 10.0],
            &GoodputSlo::default(),
        );
        let wide = level_intervals(
            8,
            &records(1000, 1.0),
            [0.0, 10.0, 10.0],
            &GoodputSlo::default(),
        );
        let k = &StatKey::new(Metric::RequestLatency, Stat::P99);
        let (n, w) = (narrow[k], wide[k]);
        assert!(n.low <= n.high && n.relative_se > 0.0, "{n:?}");
        assert!(w.relative_se > n.relative_se, "{n:?} {w:?}");
        assert!(w.high - w.low > n.high - n.low);
        // deterministic
        assert_eq!(
            level_intervals(
                8,
                &records(1000, 1.0),
                [0.0, 10.0, 10.0],
                &GoodputSlo::default()
            ),
            wide
        );
        // the level-wide throughput is scaled to the measured value
        let t = wide[&StatKey::new(Metric::RequestThroughput, Stat::Avg)];
        assert!(t.low < 10.0 && t.high > 10.0, "{t:?}");
        // no SLO, no miss rate; with one, the miss rate's interval surrounds the level's share
        let miss = StatKey::new(Metric::SloMissRate, Stat::Avg);
        assert!(!wide.contains_key(&miss));
        let recs = records(1000, 1.0);
        let mut e2e: Vec<f64> = recs
            .iter()
            .filter_map(|r| RequestMetrics::of(r).request_latency_ms)
            .collect();
        e2e.sort_by(f64::total_cmp);
        let slo = GoodputSlo {
            request_latency_ms: Some(e2e[e2e.len() / 2]),
            ..GoodputSlo::default()
        };
        let share = e2e.iter().filter(|v| **v > e2e[e2e.len() / 2]).count() as f64 / 1000.0;
        let m = level_intervals(8, &recs, [0.0, 10.0, 10.0], &slo)[&miss];
        assert!(
            m.low < share && share < m.high && m.relative_se > 0.0,
            "{m:?} {share}"
        );
        // too few records: nothing
        assert!(level_intervals(
            8,
            &records(10, 1.0),
            [0.0, 1.0, 1.0],
            &GoodputSlo::default()
        )
        .is_empty());
    }
}
