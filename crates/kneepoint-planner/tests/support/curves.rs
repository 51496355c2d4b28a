//! Synthetic response curves with a known SLA boundary, shared by the evaluation harness
//! (`examples/search_eval.rs`) and the tests (`tests/search_eval.rs`).
//!
//! The family (`family()`), each curve a closed-loop server seen from the client:
//! - **batching**: a continuous-batching server with `n` sequence slots. Below `n`, end-to-end
//!   latency grows gently with concurrency (bigger batches, slower steps); above it requests
//!   queue and latency grows in proportion to concurrency (Little's law). TTFT grows with the
//!   prefill burst below `n` and with the queue above it. Three step-time shapes, one of them
//!   shallow (latency nearly flat up to the knee), at four slot counts.
//! - **kv step**: the same server whose KV cache holds only `m < n` sequences: once more than
//!   5 % of requests wait for a free sequence, TTFT p95 jumps by a queue wait.
//! - **linear**: latency `a + b·c` everywhere (no knee).
//! - **cliff**: latency flat until a hard limit, then several times higher.
//! - **dip**: a batching curve whose latency is 12 % lower over a band of concurrency (a batch
//!   size the server handles better), so latency is not monotone.
//! - **errors**: the server rejects requests beyond a capacity, the error rate rising from 0.
//!
//! SLAs are placed so that true boundaries spread from 20 to beyond `concurrency_max` (4096):
//! a threshold is the metric's value at a target concurrency. The true boundary is the highest
//! concurrency below the first failing one (the conservative reading of a non-monotone curve).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use kneepoint_planner::{Measurement, Metric, SearchConfig, SearchPlanner, Sla, Stat};

/// Target boundaries (×√2 apart, and two beyond `concurrency_max`).
pub const TARGETS: [f64; 18] = [
    20.0, 28.0, 40.0, 56.0, 80.0, 113.0, 160.0, 226.0, 320.0, 453.0, 640.0, 905.0, 1280.0, 1810.0,
    2560.0, 3620.0, 4500.0, 6000.0,
];

/// A continuous-batching server.
#[derive(Clone, Copy, Debug)]
pub struct Batching {
    pub n: f64,
    pub step_ms: f64,
    pub per_seq_ms: f64,
    pub osl: f64,
    pub prefill_ms_per_req: f64,
}

impl Batching {
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

/// A response curve.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Batching(Batching),
    KvStep {
        server: Batching,
        m: f64,
    },
    Linear {
        a: f64,
        b: f64,
    },
    Cliff {
        a: f64,
        b: f64,
        at: f64,
        factor: f64,
    },
    Dip {
        server: Batching,
        from: f64,
    },
    Errors {
        server: Batching,
        capacity: f64,
    },
    /// Latency flat at `flat` until a knee at `knee`, then growing in proportion to
    /// concurrency; `sharpness` sets how abruptly (a soft maximum of the two).
    Hockey {
        flat: f64,
        knee: f64,
        sharpness: f64,
    },
}

/// What a curve reads at one concurrency.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    pub e2e: f64,
    pub ttft: f64,
    pub error_rate: f64,
    pub throughput: f64,
}

impl Shape {
    pub fn at(&self, c: f64) -> Reading {
        let of = |s: &Batching| Reading {
            e2e: s.e2e_p99(c),
            ttft: s.ttft_p95(c),
            error_rate: 0.0,
            throughput: s.throughput(c),
        };
        match self {
            Shape::Batching(s) => of(s),
            Shape::KvStep { server, m } => {
                let mut r = of(server);
                if c > m / 0.95 {
                    r.ttft += 0.5 * server.osl * (server.step_ms + server.per_seq_ms * m);
                    r.e2e *= 1.0 + 0.3 * (1.0 - m / c);
                }
                r
            }
            Shape::Linear { a, b } => Reading {
                e2e: a + b * c,
                ttft: 0.05 * (a + b * c),
                error_rate: 0.0,
                throughput: c * 1000.0 / (a + b * c),
            },
            Shape::Cliff { a, b, at, factor } => {
                let l = (a + b * c) * if c > *at { *factor } else { 1.0 };
                Reading {
                    e2e: l,
                    ttft: 0.05 * l,
                    error_rate: 0.0,
                    throughput: c * 1000.0 / l,
                }
            }
            Shape::Dip { server, from } => {
                let mut r = of(server);
                if c >= *from && c <= from * 1.2 {
                    r.e2e *= 0.88;
                    r.ttft *= 0.88;
                }
                r
            }
            Shape::Hockey {
                flat,
                knee,
                sharpness,
            } => {
                let l = flat * (1.0 + (c / knee).powf(*sharpness)).powf(1.0 / sharpness);
                Reading {
                    e2e: l,
                    ttft: 0.05 * l * (1.0 + c / knee),
                    error_rate: 0.0,
                    throughput: c * 1000.0 / l,
                }
            }
            Shape::Errors { server, capacity } => {
                let mut r = of(server);
                r.error_rate = ((c - capacity) / capacity * 0.3).clamp(0.0, 1.0);
                r
            }
        }
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

/// Measurement noise with common random numbers: the draws depend only on the case's seed, the
/// level and how often that level was measured before, so two methods probing the same level
/// see the same noise, and one case's probe count does not reshuffle the others'.
pub struct Noise {
    pub sigma: f64,
    pub seed: u64,
    /// Whether measurements report their standard error (as a bootstrap would).
    pub reported: bool,
    /// Each reading multiplied by `exp(σ·N(0,1))` rather than `1 + σ·N(0,1)`.
    pub lognormal: bool,
    seen: std::collections::HashMap<u32, u64>,
}

impl Noise {
    pub fn new(sigma: f64, seed: u64) -> Self {
        Noise {
            sigma,
            seed,
            reported: true,
            lognormal: false,
            seen: Default::default(),
        }
    }

    /// Noise the measurements do not report (between runs, invisible to a bootstrap).
    pub fn unreported(mut self) -> Self {
        self.reported = false;
        self
    }

    fn rng(&mut self, c: u32) -> Rng {
        let k = self.seen.entry(c).or_insert(0);
        *k += 1;
        // splitmix64 of (seed, level, repeat): never zero for the xorshift
        let mut z = self.seed ^ (u64::from(c) << 20) ^ *k;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }
}

pub struct Case {
    pub label: &'static str,
    pub shape: Shape,
    pub slas: Vec<Sla>,
    /// `(concurrency_min, concurrency_max)` when not SageMaker's defaults.
    pub range: Option<(u32, u32)>,
}

fn value(sla: &Sla, r: &Reading) -> f64 {
    match sla.metric {
        Metric::RequestLatency => r.e2e,
        Metric::TimeToFirstToken => r.ttft,
        Metric::ErrorRate => r.error_rate,
        _ => f64::NAN,
    }
}

pub fn holds(case: &Case, c: u32) -> bool {
    let r = case.shape.at(f64::from(c));
    case.slas.iter().all(|s| s.holds(value(s, &r)))
}

/// What a probe at `c` measures. Under noise, each metric is multiplied by `1 + σ·N(0,1)`,
/// and the measurement reports the relative standard error a bootstrap over the level's
/// requests would estimate: σ, itself off by a factor `exp(0.25·N(0,1))` (an estimate from one
/// level), unless the noise is [`Noise::unreported`] (run-to-run noise no bootstrap sees).
pub fn measure(case: &Case, c: u32, noise: Option<&mut Noise>) -> Measurement {
    let mut r = case.shape.at(f64::from(c));
    let mut spread = None;
    if let Some(n) = noise {
        let (mut rng, sigma, lognormal) = (n.rng(c), n.sigma, n.lognormal);
        let mut factor = || {
            let z = sigma * rng.normal();
            if lognormal {
                z.exp()
            } else {
                1.0 + z
            }
        };
        r.e2e *= factor();
        r.ttft *= factor();
        r.error_rate = (r.error_rate * factor()).clamp(0.0, 1.0);
        let estimated = sigma * (0.25 * rng.normal()).exp();
        spread = (n.reported && sigma > 0.0).then_some(estimated);
    }
    let m = Measurement::new(r.throughput)
        .with(Metric::RequestLatency, Stat::P99, r.e2e)
        .with(Metric::TimeToFirstToken, Stat::P95, r.ttft)
        .with(Metric::ErrorRate, Stat::Avg, r.error_rate);
    match spread {
        Some(s) => m
            .with_spread(Metric::RequestLatency, Stat::P99, s)
            .with_spread(Metric::TimeToFirstToken, Stat::P95, s)
            .with_spread(Metric::ErrorRate, Stat::Avg, s),
        None => m,
    }
}

/// The highest concurrency in [1, max] below the first one that fails an SLA (`max` when none
/// fails); `None` when concurrency 1 already fails.
pub fn truth(case: &Case, max: u32) -> Option<u32> {
    (1..=max)
        .find(|&c| !holds(case, c))
        .map_or(Some(max), |c| c.checked_sub(1).filter(|&t| t > 0))
}

/// How much the binding SLA's metric moves (relative) when concurrency grows 5 % past the
/// true boundary `t`: a boundary is identifiable under noise σ only if this is at least σ.
pub fn slope(case: &Case, t: u32) -> f64 {
    let above = case.shape.at(f64::from(t + 1));
    let Some(s) = case.slas.iter().find(|s| !s.holds(value(s, &above))) else {
        return f64::INFINITY;
    };
    let v0 = value(s, &case.shape.at(f64::from(t)));
    let v1 = value(
        s,
        &case
            .shape
            .at((f64::from(t) * 1.05).ceil().max(f64::from(t + 1))),
    );
    if v0 <= 0.0 {
        return if v1 > 0.0 { f64::INFINITY } else { 0.0 };
    }
    (v1 / v0 - 1.0).abs()
}

/// What one search spent and answered.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub answer: Option<u32>,
    /// The point estimate (the answer, for the baseline).
    pub estimate: Option<u32>,
    pub probes: u32,
    pub requests: u64,
    /// The planner's interval on the boundary (none for the baseline).
    pub interval: Option<kneepoint_planner::BoundaryInterval>,
}

fn requests_at(cfg: &SearchConfig, c: u32) -> u64 {
    u64::from(cfg.request_count.max(c))
}

/// Doubling from `concurrency_min` (×2; `search_initial_points` is not used by the
/// evaluation), then integer bisection until (hi − lo) ≤ precision × hi, within the same probe
/// budget.
pub fn baseline(case: &Case, cfg: &SearchConfig, mut noise: Option<&mut Noise>) -> Run {
    let (probes, requests) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u64));
    let check = |c: u32, noise: &mut Option<&mut Noise>| {
        probes.set(probes.get() + 1);
        requests.set(requests.get() + requests_at(cfg, c));
        let m = measure(case, c, noise.as_deref_mut());
        case.slas
            .iter()
            .all(|s| m.value(s.metric, s.stat).is_some_and(|v| s.holds(v)))
    };
    let budget = cfg.max_iterations;
    let mut c = cfg.concurrency_min;
    let done = |answer| Run {
        answer,
        estimate: answer,
        probes: probes.get(),
        requests: requests.get(),
        interval: None,
    };
    if !check(c, &mut noise) {
        return done(None);
    }
    let (mut lo, mut hi);
    loop {
        let next = (c * 2).min(cfg.concurrency_max);
        if next == c || probes.get() >= budget {
            return done(Some(c));
        }
        if check(next, &mut noise) {
            c = next;
        } else {
            lo = c;
            hi = next;
            break;
        }
    }
    while hi - lo > 1 && f64::from(hi - lo) > cfg.precision * f64::from(hi) && probes.get() < budget
    {
        let mid = lo + (hi - lo) / 2;
        if check(mid, &mut noise) {
            lo = mid
        } else {
            hi = mid
        }
    }
    done(Some(lo))
}

/// The planner's search; `Err` when it refused the configuration or an observation.
pub fn planner(
    case: &Case,
    cfg: &SearchConfig,
    mut noise: Option<&mut Noise>,
) -> Result<Run, kneepoint_planner::Error> {
    let mut s = SearchPlanner::new(cfg.clone())?;
    let mut requests = 0u64;
    while let Some(p) = s.next_probe() {
        requests += u64::from(p.request_count);
        let m = measure(case, p.concurrency, noise.as_deref_mut());
        s.observe(p.concurrency, &m)?;
    }
    let o = s.outcome();
    Ok(Run {
        answer: o.feasible_max,
        estimate: o.estimate,
        probes: o.probes,
        requests,
        interval: o.interval,
    })
}

fn e2e(ms: f64) -> Sla {
    Sla::e2e_ms(ms).expect("finite")
}

fn ttft(ms: f64) -> Sla {
    Sla::ttft_ms(ms).expect("finite")
}

/// The widened family: 945 cases (see the module docs).
pub fn family() -> Vec<Case> {
    let mut out = Vec::new();
    let shapes = [(20.0, 0.05), (28.0, 0.2), (60.0, 0.005)];
    for n in [32.0, 128.0, 512.0, 2048.0] {
        for (step_ms, per_seq_ms) in shapes {
            let server = Batching {
                n,
                step_ms,
                per_seq_ms,
                osl: 256.0,
                prefill_ms_per_req: 12.0,
            };
            let s = Shape::Batching(server);
            for b in TARGETS {
                let r = s.at(b);
                out.push(Case {
                    label: "batching e2e",
                    shape: s,
                    slas: vec![e2e(r.e2e)],
                    range: None,
                });
                out.push(Case {
                    label: "batching ttft",
                    shape: s,
                    slas: vec![e2e(r.e2e * 4.0), ttft(r.ttft)],
                    range: None,
                });
            }
            for &b in TARGETS.iter().step_by(2) {
                let kv = Shape::KvStep {
                    server,
                    m: (b * 0.95).max(1.0),
                };
                let before = kv.at(b * 0.95);
                out.push(Case {
                    label: "kv step ttft",
                    shape: kv,
                    slas: vec![e2e(before.e2e * 4.0), ttft(before.ttft * 1.5)],
                    range: None,
                });
                let dip = Shape::Dip {
                    server,
                    from: b * 0.7,
                };
                out.push(Case {
                    label: "dip e2e",
                    shape: dip,
                    slas: vec![e2e(server.e2e_p99(b))],
                    range: None,
                });
                let err = Shape::Errors {
                    server,
                    capacity: b,
                };
                for limit in [0.01, 0.05] {
                    out.push(Case {
                        label: "errors",
                        shape: err,
                        slas: vec![
                            e2e(server.e2e_p99(b) * 3.0),
                            Sla::error_rate(limit).unwrap(),
                        ],
                        range: None,
                    });
                }
            }
        }
    }
    for (a, b) in [(2_000.0, 5.0), (8_000.0, 1.0), (500.0, 40.0)] {
        let s = Shape::Linear { a, b };
        for t in TARGETS {
            out.push(Case {
                label: "linear e2e",
                shape: s,
                slas: vec![e2e(a + b * t)],
                range: None,
            });
        }
        for &t in TARGETS.iter().step_by(2) {
            let c = Shape::Cliff {
                a,
                b,
                at: t,
                factor: 4.0,
            };
            out.push(Case {
                label: "cliff e2e",
                shape: c,
                slas: vec![e2e((a + b * t) * 1.5)],
                range: None,
            });
        }
    }
    out
}
