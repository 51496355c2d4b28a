//! A level's server summary: every known concept's statistics over the measured window,
//! from the timelines of every endpoint (and every run of the level).

use std::collections::BTreeMap;

use kneepoint_core::server::{concept_named, ConceptKind, EndpointSummary, ServerSummary};
use kneepoint_metrics::Stats;

use crate::known::{mappings, Combine, Mapping, Source, MAPPINGS};
use crate::timeline::{histogram_delta, increase, samples, Log, Merged, Timeline, Window};

/// One run's scrapes: the endpoints' timelines and the run's measured window.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The measured window.
    pub window: Window,
    /// One timeline per endpoint.
    pub timelines: Vec<Timeline>,
}

/// Partial sums of one concept.
#[derive(Default)]
struct Acc {
    /// Gauges: per (part, round), the values to combine.
    rounds: BTreeMap<(usize, u32), Vec<f64>>,
    combine: Option<Combine>,
    /// Counters: the increase; ratios: hits.
    total: f64,
    /// Ratios: queries.
    queries: f64,
    counted: bool,
    /// Histograms, already in the concept's unit.
    hist: Option<Merged>,
}

/// Each concept's statistics over `parts` (per endpoint, a concept is read from the first
/// family of the table that the endpoint has).
pub fn summarise(parts: &[Part]) -> ServerSummary {
    let mut accs: BTreeMap<&'static str, Acc> = BTreeMap::new();
    let mut endpoints: BTreeMap<String, EndpointSummary> = BTreeMap::new();
    for (pi, part) in parts.iter().enumerate() {
        for tl in &part.timelines {
            let e = endpoints
                .entry(tl.url.clone())
                .or_insert_with(|| EndpointSummary::new(&tl.url, None));
            e.server = e.server.take().or(tl.server.map(str::to_owned));
            e.scrapes += tl.fetches;
            e.failures += tl.failures;
            e.skipped_lines += tl.skipped;
            e.families = e.families.max(tl.families() as u32);
            // Several families may give one concept (old and new names, two exporters of one
            // server): per endpoint, the first of the table that it has.
            let picked = |m: &Mapping| {
                first_family(tl, m.concept, m.source).is_some_and(|x| x.family == m.family)
            };
            for ((family, labels), log) in &tl.series {
                for m in mappings(family) {
                    if !picked(m) || !m.selects(labels) {
                        continue;
                    }
                    let acc = accs.entry(m.concept).or_default();
                    add(acc, m, log, pi, part.window);
                }
            }
        }
    }
    let window_s: f64 = parts.iter().map(|p| p.window.seconds()).sum();
    let mut out = ServerSummary::new(endpoints.into_values().collect(), window_s);
    for (name, acc) in accs {
        finish(&mut out, name, acc, window_s);
    }
    out
}

/// Adds one series, converted into the concept's unit (each family with its own scale).
fn add(acc: &mut Acc, m: &Mapping, log: &Log, part: usize, w: Window) {
    match (m.source, log) {
        (Source::Gauge, Log::Number(points)) => {
            acc.combine = Some(m.combine);
            for (round, v) in samples(points, w) {
                acc.rounds
                    .entry((part, round))
                    .or_default()
                    .push(v * m.scale);
            }
        }
        (Source::Counter | Source::RatioHits, Log::Number(points)) => {
            if let Some(x) = increase(points, w) {
                acc.total += x * m.scale;
                acc.counted = true;
            }
        }
        (Source::RatioQueries, Log::Number(points)) => {
            if let Some(x) = increase(points, w) {
                acc.queries += x;
            }
        }
        (Source::HistogramSum, Log::Histogram { points, .. }) => {
            if let Some((sum, _, _)) = histogram_delta(points, w) {
                acc.total += sum * m.scale;
                acc.counted = true;
            }
        }
        (Source::Histogram, Log::Histogram { bounds, points }) => {
            let Some((sum, count, cum)) = histogram_delta(points, w) else {
                return;
            };
            let bounds: Vec<f64> = bounds.iter().map(|b| b * m.scale).collect();
            acc.hist
                .get_or_insert_with(|| Merged::new(&bounds))
                .add(&bounds, (sum * m.scale, count, cum));
        }
        _ => {}
    }
}

fn finish(out: &mut ServerSummary, name: &str, acc: Acc, window_s: f64) {
    let Some(concept) = concept_named(name) else {
        return;
    };
    match concept.kind {
        ConceptKind::Gauge | ConceptKind::Ratio if !acc.rounds.is_empty() => {
            let how = acc.combine.unwrap_or(Combine::Sum);
            let per_round: Vec<f64> = acc.rounds.values().map(|vs| combined(vs, how)).collect();
            if let Some(stats) = Stats::of(&per_round) {
                let wanted: &[&str] = if concept.kind == ConceptKind::Ratio {
                    &["avg"]
                } else {
                    concept.kind.stats()
                };
                for stat in wanted {
                    if let Some(v) = stats.get(stat) {
                        out.set(name, stat, v);
                    }
                }
                out.set(name, "samples", per_round.len() as f64);
            }
        }
        ConceptKind::Ratio if acc.counted && acc.queries > 0.0 => {
            out.set(name, "avg", acc.total / acc.queries);
        }
        ConceptKind::Counter if acc.counted => {
            out.set(name, "total", acc.total);
            if window_s > 0.0 {
                out.set(name, "rate", acc.total / window_s);
            }
        }
        ConceptKind::Histogram => {
            let Some(h) = acc.hist else {
                return;
            };
            out.set(name, "count", h.count);
            if h.count > 0.0 {
                out.set(name, "avg", h.sum / h.count);
                for (stat, q) in [("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)] {
                    if let Some(v) = h.quantile(q) {
                        out.set(name, stat, v);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The server's state at the latest scrape, for a live view: running, waiting and KV-cache
/// usage, combined over endpoints as the level summary combines them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct LiveSample {
    /// Requests running.
    pub running: Option<f64>,
    /// Requests waiting.
    pub waiting: Option<f64>,
    /// KV-cache usage (0-1).
    pub kv_usage: Option<f64>,
}

impl LiveSample {
    /// The sample of `timelines`' latest scrapes.
    pub fn of(timelines: &[Timeline]) -> LiveSample {
        let at = |concept| {
            let (mut out, mut how) = (Vec::new(), Combine::Sum);
            for tl in timelines {
                if let Some((v, c)) = latest(tl, concept) {
                    out.push(v);
                    how = c;
                }
            }
            (!out.is_empty()).then(|| combined(&out, how))
        };
        LiveSample {
            running: at("server_running"),
            waiting: at("server_waiting"),
            kv_usage: at("server_kv_cache_usage"),
        }
    }
}

/// The server's state at one scrape round of a level, for plots over time.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct TimelinePoint {
    /// When (Unix ns; the round's earliest scrape).
    pub t_ns: u64,
    /// Running, waiting, KV usage.
    pub sample: LiveSample,
    /// Preemptions since the run's first scrape (summed over endpoints).
    pub preemptions: Option<f64>,
}

/// One endpoint's values of a gauge concept per scrape round, and how to combine them.
type RoundValues = (BTreeMap<u32, Vec<f64>>, Combine);

/// Every scrape round of one run's timelines, in order: one pass over each series' points.
pub fn concept_timeline(timelines: &[Timeline]) -> Vec<TimelinePoint> {
    let mut rounds: BTreeMap<u32, u64> = BTreeMap::new();
    // Per gauge concept and endpoint: round → the values to combine; per endpoint and
    // preemption series: (round, preemptions so far), resets read as `increase` reads them.
    let gauges = ["server_running", "server_waiting", "server_kv_cache_usage"];
    let mut per_endpoint: Vec<[RoundValues; 3]> = Vec::new();
    let mut preemption_steps: Vec<Vec<(u32, f64)>> = Vec::new();
    for tl in timelines {
        let mut mine: [RoundValues; 3] = Default::default();
        let picks: Vec<Option<&Mapping>> = gauges
            .iter()
            .map(|c| first_family(tl, c, Source::Gauge))
            .collect();
        let preempt = first_family(tl, "server_preemptions", Source::Counter);
        for ((family, labels), log) in &tl.series {
            let Log::Number(points) = log else { continue };
            for p in points {
                let t = rounds.entry(p.round).or_insert(p.t);
                *t = (*t).min(p.t);
            }
            for (k, m) in picks.iter().enumerate() {
                let Some(m) = m.filter(|m| m.family == family && m.selects(labels)) else {
                    continue;
                };
                mine[k].1 = m.combine;
                for p in points.iter().filter(|p| p.v.is_finite()) {
                    mine[k].0.entry(p.round).or_default().push(p.v * m.scale);
                }
            }
            if let Some(m) = preempt.filter(|m| m.family == family && m.selects(labels)) {
                let finite: Vec<&crate::timeline::Point> =
                    points.iter().filter(|p| p.v.is_finite()).collect();
                let mut so_far = 0.0;
                let mut steps = Vec::with_capacity(finite.len());
                for (i, p) in finite.iter().enumerate() {
                    if i > 0 {
                        so_far += crate::timeline::rise(finite[i - 1].v, p.v) * m.scale;
                    }
                    steps.push((p.round, so_far));
                }
                preemption_steps.push(steps);
            }
        }
        per_endpoint.push(mine);
    }
    let mut cursors = vec![0usize; preemption_steps.len()];
    rounds
        .into_iter()
        .map(|(round, t_ns)| {
            let gauge = |k: usize| {
                let mut values = Vec::new();
                let mut how = Combine::Sum;
                for e in &per_endpoint {
                    if let Some(vs) = e[k].0.get(&round).filter(|v| !v.is_empty()) {
                        values.push(combined(vs, e[k].1));
                        how = e[k].1;
                    }
                }
                (!values.is_empty()).then(|| combined(&values, how))
            };
            // Each series' preemptions as of this round (its latest point at or before it).
            let mut preemptions = None;
            for (steps, cursor) in preemption_steps.iter().zip(cursors.iter_mut()) {
                while steps.get(*cursor + 1).is_some_and(|s| s.0 <= round) {
                    *cursor += 1;
                }
                if let Some(&(_, v)) = steps.get(*cursor).filter(|s| s.0 <= round) {
                    *preemptions.get_or_insert(0.0) += v;
                }
            }
            TimelinePoint {
                t_ns,
                sample: LiveSample {
                    running: gauge(0),
                    waiting: gauge(1),
                    kv_usage: gauge(2),
                },
                preemptions,
            }
        })
        .collect()
}

/// The first family of the table giving `concept` from `source` that `tl` has.
fn first_family(tl: &Timeline, concept: &str, source: Source) -> Option<&'static Mapping> {
    MAPPINGS
        .iter()
        .find(|m| m.concept == concept && m.source == source && tl.meta.contains_key(m.family))
}

/// `values` combined as `how` says.
fn combined(values: &[f64], how: Combine) -> f64 {
    match how {
        Combine::Sum => values.iter().sum(),
        Combine::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        Combine::Mean => values.iter().sum::<f64>() / values.len() as f64,
    }
}

/// A gauge concept's value at `tl`'s latest scrape, from the first family of the table it
/// has.
fn latest(tl: &Timeline, concept: &str) -> Option<(f64, Combine)> {
    let m = first_family(tl, concept, Source::Gauge)?;
    let points: Vec<(u32, f64)> = tl
        .series
        .iter()
        .filter(|((family, labels), _)| family == m.family && m.selects(labels))
        .filter_map(|(_, log)| match log {
            Log::Number(points) => points.last().map(|p| (p.round, p.v * m.scale)),
            Log::Histogram { .. } => None,
        })
        .collect();
    let round = points.iter().map(|p| p.0).max()?;
    let values: Vec<f64> = points
        .iter()
        .filter(|p| p.0 == round && p.1.is_finite())
        .map(|p| p.1)
        .collect();
    (!values.is_empty()).then(|| (combined(&values, m.combine), m.combine))
}
