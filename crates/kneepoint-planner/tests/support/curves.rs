//! Synthetic response curves with a known SLA boundary, shared by the evaluation harness
//! (`examples/search_eval.rs`) and the tests.
//!
//! Curves: a closed-loop continuous-batching server with `n` sequence slots. Below `n`,
//! end-to-end latency grows gently with concurrency (bigger batches, slower steps); above it,
//! requests queue and latency grows in proportion to concurrency (Little's law). TTFT grows
//! with the prefill burst below `n` and with the queue above it. SLAs are set at multiples of
//! the latency at the knee, so the true boundary falls below, at, or above it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use kneepoint_planner::{Measurement, Search, SearchConfig, Sla};

#[derive(Clone, Copy)]
pub struct Curve {
    pub n: f64,
    pub step_ms: f64,
    pub per_seq_ms: f64,
    pub osl: f64,
    pub prefill_ms_per_req: f64,
}

impl Curve {
    pub fn e2e_p99(&self, c: f64) -> f64 {
        let service = self.osl * (self.step_ms + self.per_seq_ms * c.min(self.n));
        let queue = if c > self.n { c / self.n } else { 1.0 };
        1.08 * service * queue
    }
    pub fn ttft_p95(&self, c: f64) -> f64 {
        let burst = self.prefill_ms_per_req * c.min(self.n) * 0.95;
        let wait = if c > self.n {
            self.e2e_p99(c) * (1.0 - self.n / c)
        } else {
            0.0
        };
        self.step_ms + burst + wait
    }
    pub fn throughput(&self, c: f64) -> f64 {
        let c = c.min(self.n);
        c * 1000.0 / (self.step_ms + self.per_seq_ms * c)
    }
}

pub struct Rng(pub u64);
impl Rng {
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.next_f64().max(1e-12), self.next_f64());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

pub struct Case {
    pub curve: Curve,
    pub slas: Vec<Sla>,
}

pub fn holds(case: &Case, c: u32) -> bool {
    let m = measure(case, c, None);
    case.slas
        .iter()
        .all(|s| m.get(&s.metric, &s.stat).is_some_and(|v| s.holds(v)))
}

pub fn measure(case: &Case, c: u32, noise: Option<(&mut Rng, f64)>) -> Measurement {
    let c = f64::from(c);
    let (mut e2e, mut ttft) = (case.curve.e2e_p99(c), case.curve.ttft_p95(c));
    if let Some((rng, sigma)) = noise {
        e2e *= 1.0 + sigma * rng.normal();
        ttft *= 1.0 + sigma * rng.normal();
    }
    Measurement::new(case.curve.throughput(c))
        .with("request_latency", "p99", e2e)
        .with("time_to_first_token", "p95", ttft)
}

/// The largest concurrency in [1, max] meeting every SLA (curves are monotone).
pub fn truth(case: &Case, max: u32) -> Option<u32> {
    if !holds(case, 1) {
        return None;
    }
    let (mut lo, mut hi) = (1u32, max + 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if holds(case, mid) {
            lo = mid
        } else {
            hi = mid
        }
    }
    Some(lo)
}

/// How much the binding SLA's metric moves (relative) when concurrency grows 5 % past the
/// true boundary `t`: a boundary is identifiable under noise σ only if this is at least σ.
pub fn slope(case: &Case, t: u32) -> f64 {
    let above = measure(case, t + 1, None);
    let Some(s) = case
        .slas
        .iter()
        .find(|s| above.get(&s.metric, &s.stat).is_none_or(|v| !s.holds(v)))
    else {
        return f64::INFINITY;
    };
    let v0 = measure(case, t, None)
        .get(&s.metric, &s.stat)
        .unwrap_or(f64::NAN);
    let v1 = measure(case, ((f64::from(t) * 1.05).ceil() as u32).max(t + 1), None)
        .get(&s.metric, &s.stat)
        .unwrap_or(f64::NAN);
    (v1 / v0 - 1.0).abs()
}

/// Doubling from `min`, then integer bisection until (hi − lo) ≤ precision × hi.
pub fn baseline(
    case: &Case,
    cfg: &SearchConfig,
    mut noise: Option<(&mut Rng, f64)>,
) -> (Option<u32>, u32) {
    let mut probes = 0;
    let mut check = |c: u32, noise: &mut Option<(&mut Rng, f64)>| {
        probes += 1;
        let m = measure(case, c, noise.as_mut().map(|(r, s)| (&mut **r, *s)));
        case.slas
            .iter()
            .all(|s| m.get(&s.metric, &s.stat).is_some_and(|v| s.holds(v)))
    };
    let mut c = cfg.concurrency_min;
    if !check(c, &mut noise) {
        return (None, probes);
    }
    let (mut lo, mut hi);
    loop {
        let next = (c * 2).min(cfg.concurrency_max);
        if next == c {
            return (Some(c), probes);
        }
        if check(next, &mut noise) {
            c = next;
        } else {
            lo = c;
            hi = next;
            break;
        }
    }
    while hi - lo > 1 && f64::from(hi - lo) > cfg.precision * f64::from(hi) {
        let mid = lo + (hi - lo) / 2;
        if check(mid, &mut noise) {
            lo = mid
        } else {
            hi = mid
        }
    }
    (Some(lo), probes)
}

pub fn planner(
    case: &Case,
    cfg: &SearchConfig,
    mut noise: Option<(&mut Rng, f64)>,
) -> (Option<u32>, u32) {
    let mut s = Search::new(cfg.clone()).expect("valid config");
    while let Some(p) = s.next_probe() {
        let m = measure(
            case,
            p.concurrency,
            noise.as_mut().map(|(r, s)| (&mut **r, *s)),
        );
        s.observe(p.concurrency, &m).expect("pending probe");
    }
    let o = s.outcome();
    (o.feasible_max, o.probes)
}

pub fn family() -> Vec<Case> {
    let mut out = Vec::new();
    for n in [32.0, 64.0, 128.0, 256.0, 512.0] {
        for (step_ms, per_seq_ms) in [(20.0, 0.05), (28.0, 0.2), (15.0, 0.5)] {
            for osl in [128.0, 256.0] {
                let curve = Curve {
                    n,
                    step_ms,
                    per_seq_ms,
                    osl,
                    prefill_ms_per_req: 12.0,
                };
                let knee = curve.e2e_p99(n);
                for k in [0.93, 1.3, 2.0, 3.5] {
                    out.push(Case {
                        curve,
                        slas: vec![Sla::e2e_ms(knee * k).expect("finite")],
                    });
                }
                for t in [300.0, 1500.0] {
                    out.push(Case {
                        curve,
                        slas: vec![
                            Sla::e2e_ms(knee * 2.0).expect("finite"),
                            Sla::ttft_ms(t).expect("finite"),
                        ],
                    });
                }
            }
        }
    }
    out
}
