//! The Pareto front of per-user speed against total throughput: the standard picture of an
//! inference deployment. Each point is one measured level (of one candidate); a point is on the
//! front when no other point is at least as fast for each user *and* carries at least as many
//! output tokens per second per instance (or per GPU, or per dollar) with one of the two
//! strictly better.
//!
//! Per-user speed is the median over a level's requests of each request's output tokens per
//! second after its first token (1000 / its mean inter-token latency, AIPerf's
//! `output_token_throughput_per_user`, whose mean a request read in one burst would swamp); a
//! level without it (no streaming) may give
//! `output tokens/s ÷ concurrency` instead (vLLM's sweep reads it so), and the front says
//! which it used. A level the client limited is never on the front. With each point's relative
//! standard errors the front is redrawn [`PARETO_DRAWS`] times (log-normal, independent) and each
//! point carries the share of draws where it was on the front.
//!
//! An edge smaller than [`PARETO_EDGE`] (3 %) is no edge: a level is left off the front when
//! another level is within 3 % of it on both axes and clearly better on one of them, or waits
//! [`PARETO_TTFT_EDGE`] less for the first token. A saturated level, whose extra requests only
//! queue, keeps the per-user speed (its ITL) and the throughput of the level below it and adds
//! seconds of TTFT: it no longer enters the front in one run and leaves it in the next on a
//! 1 % throughput edge. Levels are kept greedily, shortest wait first, each unless one already
//! kept near-dominates it, so near-ties cannot remove each other in a circle.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

/// Redraws of the front when the points carry their spreads.
pub const PARETO_DRAWS: usize = 400;

/// A relative edge on an axis smaller than this is within a repeat's noise: no edge.
pub const PARETO_EDGE: f64 = 0.03;

/// A level that waits this much less (relative) for its first token than a near-tie is better.
pub const PARETO_TTFT_EDGE: f64 = 0.25;

/// What the throughput axis is counted per.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParetoBasis {
    /// Output tokens/s per instance.
    Instance,
    /// Output tokens/s per GPU.
    Gpu,
    /// Output tokens per dollar (or the currency the prices are in).
    Dollar,
}

impl ParetoBasis {
    /// The axis's label.
    pub fn label(self) -> &'static str {
        match self {
            ParetoBasis::Instance => "output tokens/s per instance",
            ParetoBasis::Gpu => "output tokens/s per GPU",
            ParetoBasis::Dollar => "output tokens per currency unit",
        }
    }
}

/// One measured level on the (per-user, throughput) plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ParetoPoint {
    /// The candidate it belongs to (`None` in a single sweep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<String>,
    /// Concurrency of the level.
    pub concurrency: u32,
    /// Output tokens/s each user sees (as the front reads it: see [`ParetoFront::per_user`]).
    pub per_user: f64,
    /// `per_user` is the level's per-request speed (false: no streaming, so only the
    /// throughput ÷ concurrency reading exists).
    #[serde(default)]
    pub per_request: bool,
    /// The level's output tokens/s (of the whole endpoint) ÷ its concurrency: the reading
    /// every point falls back to when some point has no per-request speed.
    #[serde(default)]
    pub throughput_per_concurrency: f64,
    /// Output tokens/s per instance.
    pub per_instance: f64,
    /// Output tokens/s per GPU, when the GPUs per instance are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_gpu: Option<f64>,
    /// Output tokens per currency unit, when the instance-hour price is known (and not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_dollar: Option<f64>,
    /// Whether the level met the SLAs (`None`: no SLAs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meets_slas: Option<bool>,
    /// Why the client may have shaped this level (then it is never on the front).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_limited: Option<String>,
    /// Relative standard errors of `per_user` and of the throughput, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_se: Option<[f64; 2]>,
    /// TTFT p50 in ms, when measured: between two near-ties, the one that waits less wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_ms: Option<f64>,
    /// Whether it is on the front (computed).
    #[serde(default)]
    pub on_front: bool,
    /// The share of redraws (within each point's measured precision) where it was on the front.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub front_probability: Option<f64>,
    /// The point that dominates it most clearly, as `candidate@concurrency` or `concurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dominated_by: Option<String>,
}

impl ParetoPoint {
    /// A level at `concurrency` with its per-request per-user speed and its output tokens/s.
    pub fn new(concurrency: u32, per_user: f64, per_instance: f64) -> Self {
        let per_concurrency = per_instance / f64::from(concurrency.max(1));
        ParetoPoint {
            candidate: None,
            concurrency,
            per_user,
            per_request: true,
            throughput_per_concurrency: per_concurrency,
            per_instance,
            per_gpu: None,
            per_dollar: None,
            meets_slas: None,
            client_limited: None,
            relative_se: None,
            ttft_p50_ms: None,
            on_front: false,
            front_probability: None,
            dominated_by: None,
        }
    }

    /// A level without a per-request speed (no streaming): per-user speed is read as its
    /// output tokens/s ÷ concurrency.
    pub fn without_per_request(concurrency: u32, per_instance: f64) -> Self {
        let mut p = ParetoPoint::new(concurrency, 0.0, per_instance);
        p.per_user = p.throughput_per_concurrency;
        p.per_request = false;
        p
    }

    /// Of candidate `name`.
    pub fn of(mut self, name: &str) -> Self {
        self.candidate = Some(name.to_owned());
        self
    }

    /// With `gpus` per instance (ignored unless ≥ 1).
    pub fn gpus(mut self, gpus: u32) -> Self {
        self.per_gpu = (gpus >= 1).then(|| self.per_instance / f64::from(gpus));
        self
    }

    /// At `price` per instance-hour (ignored unless finite and > 0).
    pub fn price_per_hour(mut self, price: f64) -> Self {
        self.per_dollar =
            (price.is_finite() && price > 0.0).then(|| self.per_instance * 3600.0 / price);
        self
    }

    /// With its SLA verdict.
    pub fn meets_slas(mut self, meets: Option<bool>) -> Self {
        self.meets_slas = meets;
        self
    }

    /// Marked as shaped by the client (`why`).
    pub fn client_limited(mut self, why: Option<String>) -> Self {
        self.client_limited = why;
        self
    }

    /// With the relative standard errors of its per-user speed and its throughput.
    pub fn with_spread(mut self, per_user_se: f64, throughput_se: f64) -> Self {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        self.relative_se =
            (ok(per_user_se) && ok(throughput_se)).then_some([per_user_se, throughput_se]);
        self
    }

    /// With its TTFT p50 in ms (ignored unless finite and ≥ 0).
    pub fn with_ttft(mut self, ttft_p50_ms: Option<f64>) -> Self {
        self.ttft_p50_ms = ttft_p50_ms.filter(|v| v.is_finite() && *v >= 0.0);
        self
    }

    /// Its throughput on `basis`.
    pub fn throughput(&self, basis: ParetoBasis) -> Option<f64> {
        match basis {
            ParetoBasis::Instance => Some(self.per_instance),
            ParetoBasis::Gpu => self.per_gpu,
            ParetoBasis::Dollar => self.per_dollar,
        }
    }

    /// `candidate@concurrency`, or the concurrency alone.
    pub fn label(&self) -> String {
        match &self.candidate {
            Some(c) => format!("{c}@{}", self.concurrency),
            None => self.concurrency.to_string(),
        }
    }
}

/// The front over a set of levels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ParetoFront {
    /// What the throughput axis is counted per.
    pub basis: ParetoBasis,
    /// How per-user speed was read: `per_request` (median of 1000 / ITL) or
    /// `throughput_per_concurrency`.
    pub per_user: String,
    /// Only levels that met every SLA were eligible.
    pub slas_required: bool,
    /// Every point, in the order given, marked.
    pub points: Vec<ParetoPoint>,
}

impl ParetoFront {
    /// The points on the front, fastest per user first.
    pub fn front(&self) -> Vec<&ParetoPoint> {
        let mut f: Vec<&ParetoPoint> = self.points.iter().filter(|p| p.on_front).collect();
        f.sort_by(|a, b| b.per_user.total_cmp(&a.per_user));
        f
    }

    /// The per-user axis's label.
    pub fn per_user_label(&self) -> &'static str {
        if self.per_user == "per_request" {
            "output tokens/s per user"
        } else {
            "output tokens/s per user (throughput ÷ concurrency)"
        }
    }

    /// One line: `Pareto front (output tokens/s per instance against output tokens/s per
    /// user): 1, 8, 64 of 5 levels`.
    pub fn sentence(&self) -> String {
        let front: Vec<String> = self.front().iter().map(|p| p.label()).collect();
        let mut s = format!(
            "Pareto front ({} against {}): {} of {} levels",
            self.basis.label(),
            self.per_user_label(),
            if front.is_empty() {
                "none".to_owned()
            } else {
                front.join(", ")
            },
            self.points.len()
        );
        let unsure: Vec<String> = self
            .front()
            .iter()
            .filter_map(|p| {
                let pr = p.front_probability?;
                (pr < 0.9).then(|| format!("{} on it in {:.0} % of redraws", p.label(), pr * 100.0))
            })
            .collect();
        if !unsure.is_empty() {
            s.push_str(&format!(" ({})", unsure.join(", ")));
        }
        s
    }
}

fn eligible(p: &ParetoPoint, basis: ParetoBasis, slas_required: bool) -> bool {
    p.client_limited.is_none()
        && p.per_user.is_finite()
        && p.per_user > 0.0
        && p.throughput(basis)
            .is_some_and(|y| y.is_finite() && y > 0.0)
        && !(slas_required && p.meets_slas == Some(false))
}

/// Whether `a` dominates `b`.
fn dominates(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 >= b.0 && a.1 >= b.1 && (a.0 > b.0 || a.1 > b.1)
}

/// Whether `a` is within [`PARETO_EDGE`] of `b` on both axes and clearly better on one, or on
/// its wait for the first token (`ttft`, ms).
fn near_dominates(a: (f64, f64), b: (f64, f64), ttft: (Option<f64>, Option<f64>)) -> bool {
    let close = |x: f64, y: f64| x >= y * (1.0 - PARETO_EDGE);
    let ahead = |x: f64, y: f64| x > y * (1.0 + PARETO_EDGE);
    let waits_less = matches!(ttft, (Some(ta), Some(tb)) if ta < tb * (1.0 - PARETO_TTFT_EDGE));
    close(a.0, b.0) && close(a.1, b.1) && (ahead(a.0, b.0) || ahead(a.1, b.1) || waits_less)
}

/// Which of `xy` (`None`: not eligible) are on the front, an edge within the noise being no
/// edge (`ttft`: each point's TTFT p50, ms).
fn on_front(xy: &[Option<(f64, f64)>], ttft: &[Option<f64>]) -> Vec<bool> {
    let exact: Vec<bool> = xy
        .iter()
        .map(|p| p.is_some_and(|p| !xy.iter().any(|q| q.is_some_and(|q| dominates(q, p)))))
        .collect();
    let t = |i: usize| ttft.get(i).copied().flatten();
    // Greedily, shortest wait first (then the most of both axes): a level stays unless one
    // already kept near-dominates it, so near-ties cannot knock each other out in a circle.
    let mut order: Vec<usize> = (0..xy.len()).filter(|&i| exact[i]).collect();
    order.sort_by(|&a, &b| {
        let wait = |i: usize| t(i).unwrap_or(f64::INFINITY);
        let area = |i: usize| xy[i].map_or(0.0, |(u, v)| u * v);
        wait(a)
            .total_cmp(&wait(b))
            .then(area(b).total_cmp(&area(a)))
            .then(a.cmp(&b))
    });
    let mut kept = vec![false; xy.len()];
    for &i in &order {
        let beaten = (0..xy.len()).any(|j| {
            kept[j]
                && matches!((xy[j], xy[i]), (Some(a), Some(b)) if near_dominates(a, b, (t(j), t(i))))
        });
        kept[i] = !beaten;
    }
    kept
}

/// Marks the front of `points` on `basis` (`slas_required`: a level that failed an SLA is not
/// eligible). When some usable point has no per-request speed, every point is read as
/// throughput ÷ concurrency (one measure on one axis), without redraws (that reading's two axes
/// move together).
pub fn pareto_front(
    mut points: Vec<ParetoPoint>,
    basis: ParetoBasis,
    slas_required: bool,
) -> ParetoFront {
    let fallback = points
        .iter()
        .any(|p| !p.per_request && p.client_limited.is_none() && p.per_instance > 0.0);
    if fallback {
        for p in &mut points {
            p.per_user = p.throughput_per_concurrency;
            p.relative_se = None;
        }
    }
    let per_user = if fallback {
        "throughput_per_concurrency"
    } else {
        "per_request"
    };
    let xy: Vec<Option<(f64, f64)>> = points
        .iter()
        .map(|p| {
            eligible(p, basis, slas_required)
                .then(|| (p.per_user, p.throughput(basis).unwrap_or(0.0)))
        })
        .collect();
    let ttft: Vec<Option<f64>> = points.iter().map(|p| p.ttft_p50_ms).collect();
    let marks = on_front(&xy, &ttft);
    // the dominating point that beats each on the most ground (the largest product of ratios);
    // failing one, the near-tie that is clearly better
    let dominator: Vec<Option<usize>> = xy
        .iter()
        .zip(&marks)
        .enumerate()
        .map(|(i, (me, on))| {
            let me = me.filter(|_| !on)?;
            let best = |rule: &dyn Fn(usize, (f64, f64)) -> bool| {
                xy.iter()
                    .enumerate()
                    .filter_map(|(j, q)| {
                        q.filter(|q| j != i && rule(j, *q)).map(|q| (j, q.0 * q.1))
                    })
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .map(|(j, _)| j)
            };
            best(&|_, q| dominates(q, me))
                .or_else(|| best(&|j, q| marks[j] && near_dominates(q, me, (ttft[j], ttft[i]))))
        })
        .collect();
    let labels: Vec<String> = points.iter().map(ParetoPoint::label).collect();
    for ((p, on), by) in points.iter_mut().zip(marks).zip(dominator) {
        p.on_front = on;
        p.front_probability = None;
        p.dominated_by = by.and_then(|j| labels.get(j).cloned());
    }
    redraw(&mut points, &xy, &ttft);
    ParetoFront {
        basis,
        per_user: per_user.to_owned(),
        slas_required,
        points,
    }
}

/// Each eligible point's share of redraws on the front, when some point carries its spreads.
fn redraw(points: &mut [ParetoPoint], xy: &[Option<(f64, f64)>], ttft: &[Option<f64>]) {
    if points.iter().all(|p| p.relative_se.is_none()) {
        return;
    }
    let seed = points.iter().fold(0x7061_7265_746f_u64, |h, p| {
        h.rotate_left(9) ^ u64::from(p.concurrency) ^ (p.per_user.to_bits() >> 20)
    });
    let mut rng = StdRng::seed_from_u64(seed);
    let mut hits = vec![0usize; points.len()];
    let mut drawn = xy.to_vec();
    for _ in 0..PARETO_DRAWS {
        for ((d, m), p) in drawn.iter_mut().zip(xy).zip(points.iter()) {
            if let (Some(d), Some(m), Some([su, st])) = (d.as_mut(), m, p.relative_se) {
                let (a, b): (f64, f64) = (rng.sample(StandardNormal), rng.sample(StandardNormal));
                *d = (m.0 * (su * a).exp(), m.1 * (st * b).exp());
            }
        }
        for (h, on) in hits.iter_mut().zip(on_front(&drawn, ttft)) {
            *h += usize::from(on);
        }
    }
    for ((p, h), m) in points.iter_mut().zip(hits).zip(xy) {
        if m.is_some() {
            p.front_probability = Some(h as f64 / PARETO_DRAWS as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(f: &ParetoFront) -> Vec<String> {
        f.front().iter().map(|p| p.label()).collect()
    }

    #[test]
    fn a_small_sweep_s_front_is_the_hand_computed_one() {
        // (concurrency, per-user tok/s, tok/s per instance). By hand: from 1 to 64 each level
        // is slower per user and carries more, so none dominates another; 128 is beaten by 64
        // on both axes, and 256 ties 64 per user with less throughput.
        let pts = [
            (1, 60.0, 60.0),
            (8, 50.0, 400.0),
            (16, 40.0, 640.0),
            (32, 30.0, 960.0),
            (64, 12.0, 1200.0),
            (128, 9.0, 1100.0),
            (256, 12.0, 1150.0), // same speed as 64, less throughput: dominated by 64
        ];
        let points = pts
            .iter()
            .map(|&(c, u, t)| ParetoPoint::new(c, u, t))
            .collect();
        let f = pareto_front(points, ParetoBasis::Instance, false);
        assert_eq!(labels(&f), ["1", "8", "16", "32", "64"]);
        let by = |c: u32| f.points.iter().find(|p| p.concurrency == c).unwrap();
        assert_eq!(by(128).dominated_by.as_deref(), Some("64"));
        assert_eq!(by(256).dominated_by.as_deref(), Some("64"));
        assert!(
            f.sentence().contains("1, 8, 16, 32, 64 of 7 levels"),
            "{}",
            f.sentence()
        );
    }

    #[test]
    fn a_saturated_level_that_only_queues_is_off_the_front_in_every_repeat() {
        // Past saturation, 1024's extra requests wait: per-user speed (ITL) and throughput are
        // those of 256 within noise, TTFT is 7 s. Whichever of the two reads 1 % higher on
        // throughput in a repeat, 1024 stays off the front and names 256.
        for (t256, t1024, u1024) in [(5000.0, 5045.0, 9.9), (5045.0, 5000.0, 10.1)] {
            let points = vec![
                ParetoPoint::new(64, 30.0, 3000.0).with_ttft(Some(120.0)),
                ParetoPoint::new(256, 10.0, t256).with_ttft(Some(900.0)),
                ParetoPoint::new(1024, u1024, t1024).with_ttft(Some(7000.0)),
            ];
            let f = pareto_front(points, ParetoBasis::Instance, false);
            assert_eq!(labels(&f), ["64", "256"], "{t256} {t1024} {u1024}");
            let p1024 = f.points.iter().find(|p| p.concurrency == 1024).unwrap();
            assert_eq!(p1024.dominated_by.as_deref(), Some("256"));
        }
        // A clear edge still counts: 10 % more throughput keeps 1024 on the front.
        let points = vec![
            ParetoPoint::new(256, 10.0, 5000.0).with_ttft(Some(900.0)),
            ParetoPoint::new(1024, 9.0, 5500.0).with_ttft(Some(7000.0)),
        ];
        let f = pareto_front(points, ParetoBasis::Instance, false);
        assert_eq!(labels(&f), ["256", "1024"]);
    }

    #[test]
    fn near_ties_in_a_circle_keep_one_of_them() {
        // a beats b on the wait, b beats c on the wait, c beats a by 4.5 % per user: each
        // near-dominates the next. Kept shortest wait first: a stays, so b goes (a names
        // it), and c, which only b near-dominated, keeps its clear per-user edge over a.
        let points = vec![
            ParetoPoint::new(1, 10.0, 100.0).with_ttft(Some(100.0)),
            ParetoPoint::new(2, 10.2, 99.0).with_ttft(Some(300.0)),
            ParetoPoint::new(3, 10.45, 98.0).with_ttft(Some(1000.0)),
            ParetoPoint::new(4, 30.0, 40.0).with_ttft(Some(50.0)),
        ];
        let f = pareto_front(points, ParetoBasis::Instance, false);
        assert_eq!(labels(&f), ["4", "3", "1"]);
        let b = f.points.iter().find(|p| p.concurrency == 2).unwrap();
        assert_eq!(b.dominated_by.as_deref(), Some("1"));
    }

    #[test]
    fn near_ties_without_ttft_keep_both_and_a_clear_edge_wins() {
        // Within 3 % on both axes and neither clearly ahead: both stay.
        let points = vec![
            ParetoPoint::new(8, 10.0, 100.0),
            ParetoPoint::new(16, 9.9, 101.0),
        ];
        let f = pareto_front(points, ParetoBasis::Instance, false);
        assert_eq!(labels(&f), ["8", "16"]);
        // Within 3 % on throughput, 20 % faster per user: 8 takes it.
        let points = vec![
            ParetoPoint::new(8, 12.0, 100.0),
            ParetoPoint::new(16, 10.0, 101.0),
        ];
        let f = pareto_front(points, ParetoBasis::Instance, false);
        assert_eq!(labels(&f), ["8"]);
    }

    #[test]
    fn client_limited_and_failing_levels_are_never_on_the_front() {
        let points = vec![
            ParetoPoint::new(1, 60.0, 60.0),
            ParetoPoint::new(64, 20.0, 1200.0).client_limited(Some("timer lag".into())),
            ParetoPoint::new(32, 30.0, 900.0).meets_slas(Some(false)),
            ParetoPoint::new(16, 40.0, 600.0).meets_slas(Some(true)),
        ];
        let f = pareto_front(points.clone(), ParetoBasis::Instance, true);
        assert_eq!(labels(&f), ["1", "16"]);
        // without requiring SLAs the failing level counts; the limited one still does not
        let f = pareto_front(points, ParetoBasis::Instance, false);
        assert_eq!(labels(&f), ["1", "16", "32"]);
    }

    #[test]
    fn per_dollar_and_per_gpu_fronts_can_differ_from_per_instance() {
        // a big instance carries more per instance but costs more per token
        let points = vec![
            ParetoPoint::new(64, 30.0, 2000.0)
                .of("big")
                .gpus(4)
                .price_per_hour(10.0),
            ParetoPoint::new(64, 30.0, 800.0)
                .of("small")
                .gpus(1)
                .price_per_hour(2.0),
        ];
        let inst = pareto_front(points.clone(), ParetoBasis::Instance, true);
        assert_eq!(labels(&inst), ["big@64"]);
        let usd = pareto_front(points.clone(), ParetoBasis::Dollar, true);
        assert_eq!(labels(&usd), ["small@64"]);
        let gpu = pareto_front(points, ParetoBasis::Gpu, true);
        assert_eq!(labels(&gpu), ["small@64"]);
        assert_eq!(usd.points[1].per_dollar, Some(800.0 * 3600.0 / 2.0));
    }

    #[test]
    fn redraws_say_how_sure_each_front_point_is() {
        // 8 and 9 are nearly equal and noisy: each is on the front in part of the redraws; the
        // far point is always on it
        let points = vec![
            ParetoPoint::new(8, 30.0, 1000.0).with_spread(0.05, 0.05),
            ParetoPoint::new(9, 30.1, 1001.0).with_spread(0.05, 0.05),
            ParetoPoint::new(1, 100.0, 100.0).with_spread(0.01, 0.01),
        ];
        let f = pareto_front(points, ParetoBasis::Instance, false);
        assert_eq!(labels(&f), ["1", "9"]);
        let p = |c: u32| {
            f.points
                .iter()
                .find(|p| p.concurrency == c)
                .and_then(|p| p.front_probability)
                .unwrap()
        };
        assert_eq!(p(1), 1.0);
        assert!(p(8) > 0.2 && p(8) < 0.9, "{}", p(8));
        assert!(p(9) > 0.2 && p(9) < 0.9, "{}", p(9));
        assert!(f.sentence().contains("on it in"), "{}", f.sentence());
    }

    #[test]
    fn a_level_without_per_request_speed_puts_every_level_on_throughput_per_concurrency() {
        // 1 and 4 have per-request speeds; 16 does not (no streaming): all are read as
        // throughput ÷ concurrency (60, 100, 50), one measure on one axis, and no redraws
        let points = vec![
            ParetoPoint::new(1, 80.0, 60.0).with_spread(0.01, 0.01),
            ParetoPoint::new(4, 70.0, 400.0).with_spread(0.01, 0.01),
            ParetoPoint::without_per_request(16, 800.0),
        ];
        let f = pareto_front(points, ParetoBasis::Instance, false);
        assert_eq!(f.per_user, "throughput_per_concurrency");
        assert_eq!(labels(&f), ["4", "16"]);
        assert!(f.points.iter().all(|p| p.front_probability.is_none()));
        assert!(
            f.sentence().contains("(throughput ÷ concurrency)"),
            "{}",
            f.sentence()
        );
    }
}
