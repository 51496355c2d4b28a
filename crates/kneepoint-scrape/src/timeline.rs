//! What one endpoint reported over a level: every series' values scrape by scrape, kept
//! compactly (a number per gauge or counter, the cumulative counts per histogram).

use std::collections::BTreeMap;

use crate::text::{Exposition, Labels, MetricType, Value};

/// A family's declared type, help and unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// The type.
    pub kind: MetricType,
    /// `# HELP`.
    pub help: String,
    /// `# UNIT`, or inferred from the name.
    pub unit: String,
}

/// One scrape's value of a number series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Point {
    pub t: u64,
    pub round: u32,
    pub v: f64,
}

/// One scrape's value of a histogram series.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HistPoint {
    pub t: u64,
    pub sum: f64,
    pub count: f64,
    /// Cumulative counts, one per bound of the series.
    pub cumulative: Vec<f64>,
}

/// A series' values over the level.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Log {
    Number(Vec<Point>),
    Histogram {
        bounds: Vec<f64>,
        points: Vec<HistPoint>,
    },
}

/// Everything one endpoint reported during one run of a level.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// The URL scraped.
    pub url: String,
    /// The server recognised from the names.
    pub server: Option<&'static str>,
    /// Successful scrapes.
    pub fetches: u32,
    /// Failed scrapes.
    pub failures: u32,
    /// Unreadable lines skipped, over every scrape, and values of series beyond
    /// [`MAX_SERIES`] or not finite.
    pub skipped: u64,
    /// Σ scrape latency, ns.
    pub latency_ns: u64,
    /// First and last successful scrape, Unix ns.
    pub first_fetch_ns: Option<u64>,
    /// The last successful scrape, Unix ns.
    pub last_fetch_ns: Option<u64>,
    pub(crate) meta: BTreeMap<String, Meta>,
    pub(crate) series: BTreeMap<(String, Labels), Log>,
}

/// The most series kept per endpoint: a page with more (a runaway label, a hostile page) has
/// the rest counted as skipped, so memory and the exports stay bounded.
pub const MAX_SERIES: usize = 20_000;

impl Timeline {
    /// An empty timeline for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Timeline {
            url: url.into(),
            ..Timeline::default()
        }
    }

    /// Adds one scrape taken at `t` (Unix ns) in scrape round `round`.
    pub fn add(&mut self, t: u64, round: u32, latency_ns: u64, e: &Exposition) {
        self.fetches += 1;
        self.skipped += e.skipped;
        self.latency_ns += latency_ns;
        self.first_fetch_ns.get_or_insert(t);
        self.last_fetch_ns = Some(t);
        for f in &e.families {
            if self.server.is_none() {
                self.server = crate::known::server_of(&f.name);
            }
            self.meta.entry(f.name.clone()).or_insert_with(|| Meta {
                kind: f.kind,
                help: f.help.clone(),
                unit: if f.unit.is_empty() {
                    crate::known::unit_of(&f.name).to_owned()
                } else {
                    f.unit.clone()
                },
            });
            for s in &f.series {
                let key = (f.name.clone(), s.labels.clone());
                if self.series.len() >= MAX_SERIES && !self.series.contains_key(&key) {
                    self.skipped += 1;
                    continue;
                }
                match &s.value {
                    Value::Number(v) => {
                        let log = self
                            .series
                            .entry(key)
                            .or_insert_with(|| Log::Number(Vec::new()));
                        if let Log::Number(points) = log {
                            points.push(Point { t, round, v: *v });
                        }
                    }
                    Value::Histogram {
                        buckets,
                        sum,
                        count,
                    } => {
                        let finite = sum.is_finite()
                            && count.is_finite()
                            && buckets.iter().all(|b| b.1.is_finite());
                        if !finite {
                            self.skipped += 1;
                            continue;
                        }
                        let bounds: Vec<f64> = buckets.iter().map(|b| b.0).collect();
                        let log = self.series.entry(key).or_insert_with(|| Log::Histogram {
                            bounds: bounds.clone(),
                            points: Vec::new(),
                        });
                        if let Log::Histogram { bounds: b, points } = log {
                            // Changed bounds (a server restarted with others): a reset.
                            if *b != bounds {
                                *b = bounds;
                                points.clear();
                            }
                            points.push(HistPoint {
                                t,
                                sum: *sum,
                                count: *count,
                                cumulative: buckets.iter().map(|b| b.1).collect(),
                            });
                        }
                    }
                    // Summaries cover the server's lifetime: exported raw, not summarised.
                    Value::Summary { .. } => {}
                }
            }
        }
    }

    /// Counts a failed scrape.
    pub fn failed(&mut self) {
        self.failures += 1;
    }

    /// The families seen.
    pub fn families(&self) -> usize {
        self.meta.len()
    }
}

/// The measured part of a level, Unix ns (the warm-up is before `start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Start.
    pub start_ns: u64,
    /// End.
    pub end_ns: u64,
}

impl Window {
    /// Its length in seconds.
    pub fn seconds(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    fn contains(&self, t: u64) -> bool {
        (self.start_ns..=self.end_ns).contains(&t)
    }
}

/// The reference and final indices of a cumulative series for `w`: the last scrape at or
/// before the start (else the first one after it), and the last scrape of the session, the one
/// taken after the level ended. Not the first scrape after the end: servers publish their
/// counters a little after the responses (vLLM: ~15 ms measured), and a periodic scrape that
/// happens to fall just after the end misses the last requests.
fn span<T>(points: &[T], t: impl Fn(&T) -> u64, w: Window) -> Option<(usize, usize)> {
    if points.is_empty() {
        return None;
    }
    let first = match points.iter().rposition(|p| t(p) <= w.start_ns) {
        Some(i) => i,
        None => points.iter().position(|p| t(p) <= w.end_ns)?,
    };
    let last = points.len() - 1;
    (last > first).then_some((first, last))
}

/// A counter's increase over `w`: the sum of its rises, a drop counting as a reset (the new
/// value then is what accumulated since), as Prometheus's `increase()` reads resets.
/// Non-finite samples (a NaN from a broken exporter) are left out.
pub(crate) fn increase(points: &[Point], w: Window) -> Option<f64> {
    let finite: Vec<Point> = points.iter().copied().filter(|p| p.v.is_finite()).collect();
    let (a, b) = span(&finite, |p| p.t, w)?;
    let total = finite[a..=b]
        .windows(2)
        .map(|pair| rise(pair[0].v, pair[1].v))
        .sum::<f64>();
    total.is_finite().then_some(total)
}

/// A cumulative value's rise from `prev` to `cur`; a drop is a reset, after which `cur` is
/// what accumulated.
pub(crate) fn rise(prev: f64, cur: f64) -> f64 {
    if cur >= prev {
        cur - prev
    } else {
        cur
    }
}

/// A gauge's samples inside `w`, with their scrape rounds.
pub(crate) fn samples(points: &[Point], w: Window) -> impl Iterator<Item = (u32, f64)> + '_ {
    points
        .iter()
        .filter(move |p| w.contains(p.t) && p.v.is_finite())
        .map(|p| (p.round, p.v))
}

/// A histogram's observations during `w`: (sum, count, per-bucket cumulative counts). Each
/// step between scrapes is read as [`increase`] reads counters, so a reset in mid-window (a
/// count or any bucket going down) adds the later scrape's values and loses nothing after it.
pub(crate) fn histogram_delta(points: &[HistPoint], w: Window) -> Option<(f64, f64, Vec<f64>)> {
    let (a, b) = span(points, |p| p.t, w)?;
    let mut sum = 0.0;
    let mut count = 0.0;
    let mut buckets = vec![0.0; points[a].cumulative.len()];
    for pair in points[a..=b].windows(2) {
        let (x, y) = (&pair[0], &pair[1]);
        let reset = y.count < x.count || y.cumulative.iter().zip(&x.cumulative).any(|(q, p)| q < p);
        let before = |v: f64| if reset { 0.0 } else { v };
        sum += y.sum - before(x.sum);
        count += y.count - before(x.count);
        for (acc, (q, p)) in buckets
            .iter_mut()
            .zip(y.cumulative.iter().zip(&x.cumulative))
        {
            *acc += q - before(*p);
        }
    }
    Some((sum, count, buckets))
}

/// Histograms of one concept or metric added together: buckets only when their bounds agree
/// (then quantiles can be estimated), sums and counts always.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Merged {
    pub bounds: Vec<f64>,
    pub cumulative: Vec<f64>,
    pub sum: f64,
    pub count: f64,
    /// Some series had other bounds: their buckets are not in `cumulative`.
    pub mismatched: bool,
}

impl Merged {
    pub(crate) fn new(bounds: &[f64]) -> Self {
        Merged {
            bounds: bounds.to_vec(),
            cumulative: vec![0.0; bounds.len()],
            sum: 0.0,
            count: 0.0,
            mismatched: false,
        }
    }

    /// Adds one series' delta (bounds, then `(sum, count, cumulative)`).
    pub(crate) fn add(&mut self, bounds: &[f64], (sum, count, cumulative): (f64, f64, Vec<f64>)) {
        if self.bounds == bounds {
            for (x, y) in self.cumulative.iter_mut().zip(&cumulative) {
                *x += y;
            }
        } else {
            self.mismatched = true;
        }
        self.sum += sum;
        self.count += count;
    }

    /// The `q` quantile, when every series shared the bounds.
    pub(crate) fn quantile(&self, q: f64) -> Option<f64> {
        if self.mismatched {
            return None;
        }
        quantile(&self.bounds, &self.cumulative, q)
    }
}

/// The `q` quantile of a histogram's cumulative buckets, interpolated linearly inside the
/// bucket that holds it (as Prometheus's `histogram_quantile`); the `+Inf` bucket gives the
/// last finite bound.
pub(crate) fn quantile(bounds: &[f64], cumulative: &[f64], q: f64) -> Option<f64> {
    let total = *cumulative.last()?;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = 0.0f64.min(bounds.first().copied().unwrap_or(0.0));
    let mut below = 0.0;
    for (bound, count) in bounds.iter().zip(cumulative) {
        if *count >= rank {
            if bound.is_infinite() {
                return Some(lower);
            }
            let inside = count - below;
            let frac = if inside > 0.0 {
                (rank - below) / inside
            } else {
                1.0
            };
            return Some(lower + (bound - lower) * frac);
        }
        lower = *bound;
        below = *count;
    }
    Some(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: u64, v: f64) -> Point {
        Point { t, round: 0, v }
    }

    #[test]
    fn increase_reads_resets_and_the_window() {
        let pts = [
            p(0, 10.0),
            p(10, 15.0),
            p(20, 3.0),
            p(30, 8.0),
            p(40, 100.0),
        ];
        let w = Window {
            start_ns: 5,
            end_ns: 30,
        };
        // reference: t=0 (10); final: the session's last scrape: +5, reset to 3, +5, +92.
        assert_eq!(increase(&pts, w), Some(105.0));
        assert_eq!(increase(&pts[..1], w), None);
        let nan = [p(0, 10.0), p(10, f64::NAN), p(20, 12.0)];
        assert_eq!(increase(&nan, w), Some(2.0));
        let inside: Vec<f64> = samples(&pts, w).map(|s| s.1).collect();
        assert_eq!(inside, [15.0, 3.0, 8.0]);
    }

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        let bounds = [0.1, 0.5, 1.0, f64::INFINITY];
        let cum = [10.0, 60.0, 100.0, 100.0];
        assert!((quantile(&bounds, &cum, 0.5).unwrap() - 0.42).abs() < 1e-9);
        assert!((quantile(&bounds, &cum, 0.05).unwrap() - 0.05).abs() < 1e-9);
        let cum = [0.0, 0.0, 50.0, 100.0];
        assert_eq!(quantile(&bounds, &cum, 0.99), Some(1.0));
        assert_eq!(quantile(&bounds, &[0.0; 4], 0.5), None);
    }

    #[test]
    fn histogram_deltas_and_resets() {
        let h = |t, count: f64, c: [f64; 2]| HistPoint {
            t,
            sum: count,
            count,
            cumulative: c.to_vec(),
        };
        let pts = [h(0, 5.0, [2.0, 5.0]), h(10, 9.0, [3.0, 9.0])];
        let w = Window {
            start_ns: 1,
            end_ns: 9,
        };
        assert_eq!(histogram_delta(&pts, w), Some((4.0, 4.0, vec![1.0, 4.0])));
        let reset = [h(0, 5.0, [2.0, 5.0]), h(10, 2.0, [1.0, 2.0])];
        assert_eq!(histogram_delta(&reset, w), Some((2.0, 2.0, vec![1.0, 2.0])));
        // A reset in mid-window: 5 → 9 (+4), reset to 2 (+2), then 6 (+4).
        let mid = [
            h(0, 5.0, [2.0, 5.0]),
            h(4, 9.0, [3.0, 9.0]),
            h(6, 2.0, [1.0, 2.0]),
            h(10, 6.0, [2.0, 6.0]),
        ];
        assert_eq!(
            histogram_delta(&mid, w),
            Some((10.0, 10.0, vec![3.0, 10.0]))
        );
        let mut m = Merged::new(&[1.0, 2.0]);
        m.add(&[1.0, 2.0], (1.0, 2.0, vec![1.0, 2.0]));
        assert_eq!(m.quantile(0.5), Some(1.0));
        m.add(&[5.0], (3.0, 1.0, vec![1.0]));
        assert_eq!((m.sum, m.count, m.quantile(0.5)), (4.0, 3.0, None));
    }
}
