//! A second curve family, built to break the search rather than to describe servers kindly
//! (issue 51): hockey sticks whose knee sits anywhere from far below to far above the
//! boundary, two SLAs that break at the same concurrency, a latency dip just above the
//! boundary (a passing band beyond the first failure), small cliffs the noise can hide, error
//! onsets, a KV step just past the boundary, and awkward ranges (`concurrency_min` 1 or 100,
//! `concurrency_max` 64, 200 or 100,000, boundaries next to either end). Evaluated with
//! log-normal noise (`examples/search_eval.rs`, `HOSTILE=1`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use super::curves::{Batching, Case, Shape};
use kneepoint_planner::Sla;

fn e2e(ms: f64) -> Sla {
    Sla::e2e_ms(ms).expect("finite")
}

fn ttft(ms: f64) -> Sla {
    Sla::ttft_ms(ms).expect("finite")
}

fn server(n: f64, (step_ms, per_seq_ms): (f64, f64)) -> Batching {
    Batching {
        n,
        step_ms,
        per_seq_ms,
        osl: 256.0,
        prefill_ms_per_req: 12.0,
    }
}

fn case(label: &'static str, shape: Shape, slas: Vec<Sla>) -> Case {
    Case {
        label,
        shape,
        slas,
        range: None,
    }
}

/// The hostile family (see the module docs).
pub fn hostile() -> Vec<Case> {
    let mut out = Vec::new();
    for flat in [1_000.0, 5_000.0] {
        for knee in [50.0, 200.0, 800.0] {
            for sharpness in [2.0, 6.0, 20.0] {
                let s = Shape::Hockey {
                    flat,
                    knee,
                    sharpness,
                };
                for at in [0.7, 1.0, 1.5, 3.0] {
                    out.push(case("hockey stick", s, vec![e2e(s.at(knee * at).e2e)]));
                }
            }
        }
    }
    let shapes = [(20.0, 0.05), (28.0, 0.2)];
    for n in [64.0, 256.0, 1024.0] {
        for sh in shapes {
            let b = server(n, sh);
            let s = Shape::Batching(b);
            for at in [0.5, 0.8, 1.2, 2.0, 4.0] {
                let r = s.at(n * at);
                out.push(case("two slas", s, vec![e2e(r.e2e), ttft(r.ttft)]));
            }
            for at in [1.5, 3.0] {
                let t = n * at;
                let dip = Shape::Dip {
                    server: b,
                    from: t * 1.1,
                };
                out.push(case("late dip", dip, vec![e2e(b.e2e_p99(t))]));
                let kv = Shape::KvStep { server: b, m: t };
                let before = kv.at(t);
                out.push(case(
                    "late kv step",
                    kv,
                    vec![e2e(before.e2e * 4.0), ttft(before.ttft * 1.2)],
                ));
                let err = Shape::Errors {
                    server: b,
                    capacity: t,
                };
                for limit in [0.005, 0.02] {
                    out.push(case(
                        "error onset",
                        err,
                        vec![e2e(b.e2e_p99(t) * 2.0), Sla::error_rate(limit).unwrap()],
                    ));
                }
            }
        }
    }
    for (a, b) in [(3_000.0, 10.0), (1_000.0, 2.0)] {
        for t in [60.0, 300.0, 1_500.0] {
            for factor in [1.15, 1.4] {
                let s = Shape::Cliff {
                    a,
                    b,
                    at: t,
                    factor,
                };
                out.push(case("small cliff", s, vec![e2e((a + b * t) * 1.07)]));
            }
        }
    }
    let ranges: [((u32, u32), &[f64]); 4] = [
        ((1, 64), &[3.0, 10.0, 40.0, 60.0]),
        ((100, 200), &[105.0, 150.0, 195.0]),
        ((16, 4096), &[17.0, 18.0, 3_900.0]),
        ((2, 100_000), &[5_000.0, 30_000.0]),
    ];
    for (range, targets) in ranges {
        for sh in shapes {
            for n in [32.0, 512.0] {
                let s = Shape::Batching(server(n, sh));
                for t in targets {
                    let mut c = case("awkward range", s, vec![e2e(s.at(*t).e2e)]);
                    c.range = Some(range);
                    out.push(c);
                }
            }
        }
    }
    out
}
