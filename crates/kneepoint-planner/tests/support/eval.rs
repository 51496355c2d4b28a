//! The figures of the search evaluation (`examples/search_eval.rs`, asserted by
//! `tests/search_eval.rs`): the planner and doubling + bisection on every case of the curve
//! family, with the same noise at the same level.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use super::curves::{baseline, planner, slope, truth, Case, Noise, Run};
use kneepoint_planner::SearchConfig;

/// One case's result.
pub struct Entry {
    pub label: &'static str,
    pub truth: u32,
    pub planner: Result<Run, String>,
    pub baseline: Run,
    /// Moving 5 % past the boundary changes the binding metric by at least the noise.
    pub identifiable: bool,
}

impl Entry {
    fn error(&self, answer: Option<u32>) -> f64 {
        answer.map_or(-1.0, |a| {
            (f64::from(a) - f64::from(self.truth)) / f64::from(self.truth)
        })
    }
    /// The planner's relative error (−1 when it errored or gave no answer).
    pub fn planner_error(&self) -> f64 {
        self.error(self.planner.as_ref().ok().and_then(|r| r.answer))
    }
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: truth {}, planner {:?} ({:+.1} %), baseline {:?}",
            self.label,
            self.truth,
            self.planner.as_ref().map(|r| (r.answer, r.probes)),
            self.planner_error() * 100.0,
            (self.baseline.answer, self.baseline.probes)
        )
    }
}

pub struct Runs(pub Vec<Entry>);

/// The noise seed of the recorded figures (docs/search.md).
pub const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// The noise seed of case `i`.
pub fn case_seed(base_seed: u64, i: usize) -> u64 {
    base_seed ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Runs every selected case whose true boundary lies at or above `concurrency_min`; a boundary
/// beyond `concurrency_max` counts as `concurrency_max` (the answer a search can give).
pub fn evaluate(
    cases: &[Case],
    cfg: &SearchConfig,
    (sigma, base_seed): (f64, u64),
    select: impl Fn(&Case) -> bool,
) -> Runs {
    evaluate_with(cases, cfg, (sigma, base_seed, true, false), select)
}

/// [`evaluate`], choosing whether the measurements report their noise (`reported`).
pub fn evaluate_with(
    cases: &[Case],
    cfg: &SearchConfig,
    (sigma, base_seed, reported, lognormal): (f64, u64, bool, bool),
    select: impl Fn(&Case) -> bool,
) -> Runs {
    let mut out = Vec::new();
    for (i, case) in cases.iter().enumerate().filter(|(_, c)| select(c)) {
        let mut c = cfg.clone();
        c.slas = case.slas.clone();
        if let Some((min, max)) = case.range {
            (c.concurrency_min, c.concurrency_max) = (min, max);
        }
        let Some(t) = truth(case, c.concurrency_max) else {
            continue;
        };
        if t < c.concurrency_min {
            continue;
        }
        // the same noise for both methods at the same level (common random numbers)
        let seed = case_seed(base_seed, i);
        let (mut noise_p, mut noise_b) = (Noise::new(sigma, seed), Noise::new(sigma, seed));
        if !reported {
            noise_p = noise_p.unreported();
            noise_b = noise_b.unreported();
        }
        (noise_p.lognormal, noise_b.lognormal) = (lognormal, lognormal);
        let noisy = sigma > 0.0;
        let planner = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            planner(case, &c, noisy.then_some(&mut noise_p)).map_err(|e| e.to_string())
        }))
        .unwrap_or_else(|_| Err("panicked".to_owned()));
        out.push(Entry {
            label: case.label,
            truth: t,
            planner,
            baseline: baseline(case, &c, noisy.then_some(&mut noise_b)),
            identifiable: t >= c.concurrency_max || slope(case, t) >= sigma,
        });
    }
    Runs(out)
}

/// The summary figures of a set of runs.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    pub cases: usize,
    pub errors: usize,
    pub median_probes: f64,
    pub max_probes: u32,
    pub baseline_median_probes: f64,
    pub baseline_max_probes: u32,
    pub mean_requests: f64,
    pub baseline_mean_requests: f64,
    pub within_5: f64,
    pub baseline_within_5: f64,
    pub above: f64,
    /// Answers more than 5 % above the true boundary, over every case.
    pub over_5: f64,
    pub worst_overshoot: f64,
    pub identifiable: usize,
    pub identifiable_over_5: f64,
    pub baseline_identifiable_over_5: f64,
    /// Identifiable cases answered within 5 % of the boundary.
    pub identifiable_within_5: f64,
    pub baseline_identifiable_within_5: f64,
    /// Identifiable cases whose point estimate lies within 5 % of the boundary.
    pub estimate_within_5: f64,
    /// Share of the planner's answers whose interval covers the true boundary.
    pub coverage: f64,
    /// Median relative width of the planner's intervals (closed ones).
    pub median_width: f64,
}

fn median_f(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn median(mut v: Vec<u32>) -> f64 {
    v.sort_unstable();
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => f64::from(v[n / 2]),
        n => f64::from(v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl Runs {
    /// The entries more than `tol` away from the truth.
    pub fn off(&self, tol: f64) -> impl Iterator<Item = &Entry> {
        self.0.iter().filter(move |e| e.planner_error().abs() > tol)
    }

    pub fn figures(&self) -> Figures {
        let e = &self.0;
        let n = e.len().max(1) as f64;
        let ok: Vec<&Run> = e.iter().filter_map(|x| x.planner.as_ref().ok()).collect();
        let share = |f: &dyn Fn(&Entry) -> bool| e.iter().filter(|x| f(x)).count() as f64 / n;
        let ident: Vec<&Entry> = e.iter().filter(|x| x.identifiable).collect();
        let ident_share = |f: &dyn Fn(&Entry) -> bool| {
            ident.iter().filter(|x| f(x)).count() as f64 / ident.len().max(1) as f64
        };
        Figures {
            cases: e.len(),
            errors: e.len() - ok.len(),
            median_probes: median(ok.iter().map(|r| r.probes).collect()),
            max_probes: ok.iter().map(|r| r.probes).max().unwrap_or(0),
            baseline_median_probes: median(e.iter().map(|x| x.baseline.probes).collect()),
            baseline_max_probes: e.iter().map(|x| x.baseline.probes).max().unwrap_or(0),
            mean_requests: ok.iter().map(|r| r.requests as f64).sum::<f64>()
                / ok.len().max(1) as f64,
            baseline_mean_requests: e.iter().map(|x| x.baseline.requests as f64).sum::<f64>() / n,
            within_5: share(&|x| x.planner_error().abs() <= 0.05),
            baseline_within_5: share(&|x| x.error(x.baseline.answer).abs() <= 0.05),
            above: share(&|x| x.planner_error() > 0.0),
            over_5: share(&|x| x.planner_error() > 0.05),
            worst_overshoot: e.iter().map(Entry::planner_error).fold(0.0, f64::max),
            identifiable: ident.len(),
            identifiable_over_5: ident_share(&|x| x.planner_error() > 0.05),
            baseline_identifiable_over_5: ident_share(&|x| x.error(x.baseline.answer) > 0.05),
            identifiable_within_5: ident_share(&|x| x.planner_error().abs() <= 0.05),
            baseline_identifiable_within_5: ident_share(&|x| {
                x.error(x.baseline.answer).abs() <= 0.05
            }),
            estimate_within_5: ident_share(&|x| {
                x.error(x.planner.as_ref().ok().and_then(|r| r.estimate))
                    .abs()
                    <= 0.05
            }),
            coverage: ok
                .iter()
                .zip(e.iter().filter(|x| x.planner.is_ok()))
                .filter(|(r, x)| r.interval.is_some_and(|i| i.covers(x.truth)))
                .count() as f64
                / ok.len().max(1) as f64,
            median_width: median_f(
                ok.iter()
                    .filter_map(|r| r.interval.and_then(|i| i.relative_width()))
                    .collect(),
            ),
        }
    }
}

impl Figures {
    pub fn header() -> String {
        [
            "| noise | curves | cases | errors | probes median / max: planner | doubling+bisection | mean requests: planner | doubling+bisection | within 5 %: planner | doubling+bisection | above the boundary | > 5 % above | worst overshoot | identifiable | within 5 %, identifiable: planner | doubling+bisection | > 5 % above, identifiable: planner | doubling+bisection | point estimate within 5 %, identifiable | 90 % interval covers | median width |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        .join("\n")
    }

    pub fn row(&self, noise: &str, curves: &str) -> String {
        let pct = |x: f64| format!("{:.1} %", x * 100.0);
        format!(
            "| {noise} | {curves} | {} | {} | {} / {} | {} / {} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.cases,
            self.errors,
            self.median_probes,
            self.max_probes,
            self.baseline_median_probes,
            self.baseline_max_probes,
            self.mean_requests,
            self.baseline_mean_requests,
            pct(self.within_5),
            pct(self.baseline_within_5),
            pct(self.above),
            pct(self.over_5),
            pct(self.worst_overshoot),
            self.identifiable,
            pct(self.identifiable_within_5),
            pct(self.baseline_identifiable_within_5),
            pct(self.identifiable_over_5),
            pct(self.baseline_identifiable_over_5),
            pct(self.estimate_within_5),
            pct(self.coverage),
            pct(self.median_width),
        )
    }
}

/// The probes of one search, for people (`TRACE=label:truth` in the example).
pub fn trace(case: &Case, cfg: &SearchConfig, mut noise: Option<&mut Noise>) -> Vec<String> {
    let mut c = cfg.clone();
    c.slas = case.slas.clone();
    if let Some((min, max)) = case.range {
        (c.concurrency_min, c.concurrency_max) = (min, max);
    }
    let mut s = kneepoint_planner::SearchPlanner::new(c).expect("valid");
    let mut out = Vec::new();
    while let Some(p) = s.next_probe() {
        let m = super::curves::measure(case, p.concurrency, noise.as_deref_mut());
        s.observe(p.concurrency, &m).expect("pending");
        let r = s.history().last().expect("observed");
        let loads: Vec<String> = r
            .checks
            .iter()
            .map(|k| format!("{}={:.3}", k.sla, k.value.unwrap_or(f64::NAN) / k.threshold))
            .collect();
        out.push(format!(
            "{:>5} {:?} expect {:?} pass {} {}",
            p.concurrency,
            p.phase,
            p.expect_pass,
            r.pass,
            loads.join(" ")
        ));
    }
    let o = s.outcome();
    out.push(format!(
        "answer {:?} (bracket {:?}–{:?}), interval {:?}: {}",
        o.feasible_max, o.estimate, o.infeasible_min, o.interval, o.explanation
    ));
    out
}
