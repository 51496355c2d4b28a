//! Time slices of a level: whether it was steady or drifting (a KV cache filling, a prefix
//! cache warming, a server that degrades), which one summary over the whole level hides.
//!
//! A level's measured requests are cut into consecutive slices of `slice_s` seconds by when
//! they *started* (from the first measured start); each slice is summarised like a level, its
//! throughputs counted over the slice's length (requests started in a slice stand in for the
//! work done in it, exact in a steady state). A slice is complete when the level went on sending
//! past its end.
//!
//! **Steadiness** compares the first and the last complete slice on the mean TTFT, ITL and
//! request latency, counting only the requests sent while the loop was full: after every slot
//! had started its first request (the first wave, a ramp included, into an idle server) and
//! before any slot started its last (the drain, whose requests ran with fewer beside them). A
//! level is `not_steady` when one of them moved by at least [`STEADY_TOLERANCE`] *and* by more
//! than 3 standard errors of the difference (each slice's error from its moving-block
//! bootstrap, [`crate::level_intervals`]; 3 is a two-sided 1 % over the three statistics): a
//! change beyond noise that matters. A compared slice needs at least 20 such requests and 8 per
//! slot (eight bootstrap blocks); with fewer than two such complete slices there is no
//! verdict, nor when no statistic could be compared.

use kneepoint_core::{Metric, Phase, RequestRecord, Stat, StatKey};

use crate::steadiness::{SliceChange, Steadiness};
use crate::{GoodputSlo, LevelSummary};

/// The smallest relative change between the first and last slices that counts.
pub const STEADY_TOLERANCE: f64 = 0.10;
/// The z-score beyond which a change is more than noise: two-sided 1 % over the three
/// statistics compared (0.33 % each), rounded up for the few bootstrap blocks a slice has.
const Z: f64 = 3.0;
/// The fewest requests a compared slice needs, and the fewest waves (requests per slot):
/// eight waves give the bootstrap eight blocks.
const MIN_SLICE_REQUESTS: usize = 20;
const MIN_SLICE_WAVES: usize = 8;
/// The most slices a level is cut into (a tiny `slice_s` would otherwise allocate without
/// bound).
pub const MAX_SLICES: u64 = 10_000;
/// The statistics compared.
const COMPARED: [Metric; 3] = [
    Metric::TimeToFirstToken,
    Metric::InterTokenLatency,
    Metric::RequestLatency,
];

/// One slice of a level.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TimeSlice {
    /// 0-based position.
    pub index: usize,
    /// Wall-clock start, Unix ns.
    pub start_ns: u64,
    /// Wall-clock end, Unix ns.
    pub end_ns: u64,
    /// The level ran past the slice's end.
    pub is_complete: bool,
    /// The slice summarised as a level (throughputs over the slice's length).
    pub summary: LevelSummary,
}

/// A level's slices and its steadiness.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TimeSlices {
    /// The slices' length, seconds.
    pub slice_s: f64,
    /// In order.
    pub slices: Vec<TimeSlice>,
    /// The verdict.
    pub steadiness: Steadiness,
}

fn start(r: &RequestRecord) -> u64 {
    r.origin_unix_ns.saturating_add(r.start_ns)
}

/// Cuts the measured records of a level run at `concurrency` into slices of `slice_s` seconds.
/// `None` when `slice_s` is not a positive number, no request was measured, or the level would
/// take more than [`MAX_SLICES`] slices.
pub fn time_slices(
    concurrency: u32,
    records: &[RequestRecord],
    slice_s: f64,
) -> Option<TimeSlices> {
    if !(slice_s.is_finite() && slice_s > 0.0) {
        return None;
    }
    // one sorted copy: each slice, and its full-loop part, is a run of it
    let mut measured: Vec<RequestRecord> = records
        .iter()
        .filter(|r| r.phase == Phase::Profiling)
        .cloned()
        .collect();
    measured.sort_by_key(start);
    let t0 = start(measured.first()?);
    let last_start = measured.last().map_or(t0, start);
    let width = (slice_s * 1e9).round().clamp(1.0, u64::MAX as f64 / 4.0) as u64;
    let n = (last_start - t0) / width + 1;
    if n > MAX_SLICES {
        return None;
    }
    let bounds: Vec<std::ops::Range<usize>> = (0..n)
        .map(|k| {
            let from = t0.saturating_add(k.saturating_mul(width));
            let to = from.saturating_add(width);
            measured.partition_point(|r| start(r) < from)
                ..measured.partition_point(|r| start(r) < to)
        })
        .collect();
    let full = full_loop(concurrency, &measured);
    let buckets: Vec<&[RequestRecord]> = bounds.iter().map(|r| &measured[r.clone()]).collect();
    let inner: Vec<&[RequestRecord]> = bounds
        .iter()
        .map(|r| {
            let (a, b) = (r.start.max(full.start), r.end.min(full.end));
            &measured[a..b.max(a)]
        })
        .collect();
    let slo = GoodputSlo::default();
    let slices: Vec<TimeSlice> = buckets
        .iter()
        .enumerate()
        .map(|(k, b)| {
            let start_ns = t0.saturating_add((k as u64).saturating_mul(width));
            let end_ns = start_ns.saturating_add(width);
            // requests are placed by start: a slice is whole when sending went on past it
            let is_complete = last_start >= end_ns;
            let mut summary = LevelSummary::from_records(concurrency, b, &slo);
            let length = if is_complete {
                slice_s
            } else {
                (last_start.saturating_sub(start_ns)) as f64 / 1e9
            };
            if length > 0.0 {
                summary.rescale_duration(length);
            }
            TimeSlice {
                index: k,
                start_ns,
                end_ns,
                is_complete,
                summary,
            }
        })
        .collect();
    let steadiness = judge(concurrency, &slices, &inner);
    Some(TimeSlices {
        slice_s,
        slices,
        steadiness,
    })
}

fn judge(concurrency: u32, slices: &[TimeSlice], inner: &[&[RequestRecord]]) -> Steadiness {
    let least = MIN_SLICE_REQUESTS.max(MIN_SLICE_WAVES * concurrency.max(1) as usize);
    let usable: Vec<usize> = slices
        .iter()
        .filter(|s| s.is_complete && inner[s.index].len() >= least)
        .map(|s| s.index)
        .collect();
    let (Some(&a), Some(&b)) = (usable.first(), usable.last()) else {
        return unjudged(slices.len());
    };
    if a == b {
        return unjudged(slices.len());
    }
    let slo = GoodputSlo::default();
    let first = LevelSummary::from_records(concurrency, inner[a], &slo);
    let last = LevelSummary::from_records(concurrency, inner[b], &slo);
    let mut changes = Vec::new();
    for m in COMPARED {
        let (Some(x), Some(y)) = (first.value(m, Stat::Avg), last.value(m, Stat::Avg)) else {
            continue;
        };
        let (Some(sx), Some(sy)) = (first.interval(m, Stat::Avg), last.interval(m, Stat::Avg))
        else {
            continue;
        };
        if x <= 0.0 || y <= 0.0 {
            continue;
        }
        let se = (sx.relative_se.powi(2) + sy.relative_se.powi(2)).sqrt();
        let ln = (y / x).ln();
        // a change with no spread at all is certain (capped so the JSON stays a number)
        let z = if se > 0.0 {
            ln / se
        } else if ln == 0.0 {
            0.0
        } else {
            1e6 * ln.signum()
        };
        changes.push(SliceChange {
            statistic: StatKey::new(m, Stat::Avg),
            first: x,
            last: y,
            relative_change: y / x - 1.0,
            z,
        });
    }
    if changes.is_empty() {
        // nothing comparable (every inner request failed, or no interval): no verdict
        return unjudged(slices.len());
    }
    let moved: Vec<String> = changes
        .iter()
        .filter(|c| c.relative_change.abs() >= STEADY_TOLERANCE && c.z.abs() > Z)
        .map(|c| {
            format!(
                "{} {} {:.0} % from slice {a} to slice {b}",
                c.statistic.metric().name().replace('_', " "),
                if c.relative_change > 0.0 {
                    "rose"
                } else {
                    "fell"
                },
                c.relative_change.abs() * 100.0
            )
        })
        .collect();
    let steady = moved.is_empty();
    Steadiness {
        steady: Some(steady),
        reason: if steady {
            format!(
                "steady: no mean latency moved by {:.0} % or more beyond noise between slices {a} and {b}",
                STEADY_TOLERANCE * 100.0
            )
        } else {
            format!("not steady: {}", moved.join("; "))
        },
        compared: Some([a, b]),
        changes,
    }
}

/// The positions (in start order) of the requests sent while the loop was full: after every
/// slot had started its first request (a ramp included) and before any slot started its last
/// (the drain). Without slot numbers, past the first and before the last `concurrency`.
fn full_loop(concurrency: u32, measured: &[RequestRecord]) -> std::ops::Range<usize> {
    use std::collections::BTreeMap;
    let mut slots: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for r in measured {
        let t = start(r);
        let e = slots.entry(r.worker).or_insert((t, t));
        e.0 = e.0.min(t);
        e.1 = e.1.max(t);
    }
    if slots.len() > 1 || concurrency <= 1 {
        let full = slots.values().map(|s| s.0).max().unwrap_or(0);
        let drain = slots.values().map(|s| s.1).min().unwrap_or(0);
        let a = measured.partition_point(|r| start(r) <= full);
        let b = measured.partition_point(|r| start(r) < drain);
        a..b.max(a)
    } else {
        let wave = concurrency as usize;
        wave..measured.len().saturating_sub(wave).max(wave)
    }
}

fn unjudged(n: usize) -> Steadiness {
    Steadiness {
        steady: None,
        reason: format!(
            "not judged: fewer than two complete slices with {MIN_SLICE_REQUESTS} requests and {MIN_SLICE_WAVES} per slot (past the first and last waves) among {n}; use longer slices or a longer level"
        ),
        compared: None,
        changes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request_metrics::tests::record;

    /// A closed loop of 4 slots, each request `latency_ms(i)` long with 8 evenly spaced
    /// tokens, the slots' requests back to back; a little spread so the bootstrap has some.
    fn level(n: usize, latency_ms: impl Fn(usize) -> f64) -> Vec<RequestRecord> {
        let mut next = [0u64; 4];
        (0..n)
            .map(|i| {
                let slot = i % 4;
                let start = next[slot];
                let wobble = 1.0 + 0.02 * ((i * 7 % 5) as f64 - 2.0);
                let len = (latency_ms(i) * wobble * 1e6) as u64;
                let chunks: Vec<u64> = (1..=8).map(|k| start + len * k / 8).collect();
                next[slot] = start + len;
                record(start, &chunks, start + len, 8)
            })
            .collect()
    }

    #[test]
    fn a_steady_level_is_steady_and_a_slowing_one_is_not() {
        let steady = time_slices(4, &level(800, |_| 100.0), 4.0).unwrap();
        assert_eq!(
            steady.steadiness.steady,
            Some(true),
            "{:?}",
            steady.steadiness
        );
        assert_eq!(
            steady
                .slices
                .iter()
                .map(|s| s.summary.request_count)
                .sum::<usize>(),
            800
        );
        assert!(steady.slices[..steady.slices.len() - 1]
            .iter()
            .all(|s| s.is_complete));
        // 4 slots × 10 requests/s: a complete 4 s slice starts ~160 requests of 8 tokens
        let t = steady.slices[1].summary.output_token_throughput;
        assert!((t - 320.0).abs() < 20.0, "{t}");
        let slowing = time_slices(4, &level(800, |i| 100.0 + i as f64 * 0.2), 4.0).unwrap();
        let why = slowing.steadiness.not_steady().unwrap();
        assert!(why.contains("request latency rose"), "{why}");
    }

    #[test]
    fn too_few_requests_or_a_bad_width_give_no_verdict() {
        let short = time_slices(4, &level(30, |_| 100.0), 1.0).unwrap();
        assert_eq!(short.steadiness.steady, None);
        assert!(time_slices(4, &level(30, |_| 100.0), 0.0).is_none());
        assert!(time_slices(4, &[], 1.0).is_none());
    }
}
