//! The acceptance of the search on the noise-free curve family: within 5 % of the true boundary
//! in every case, never more probes than doubling + bisection on average, fewer in most; and
//! under 3 % noise, never more than 5 % above the boundary where the boundary is identifiable.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use kneepoint_planner::SearchConfig;
use support::curves::*;

#[test]
fn planner_beats_doubling_and_bisection_on_the_curve_family() {
    let mut cfg = SearchConfig::new(vec![]);
    cfg.max_iterations = 40;
    let (mut n, mut p_sum, mut b_sum, mut fewer) = (0u32, 0u32, 0u32, 0u32);
    for case in family() {
        let mut c = cfg.clone();
        c.slas = case.slas.clone();
        let Some(t) = truth(&case, c.concurrency_max) else {
            continue;
        };
        if t >= c.concurrency_max || t < c.concurrency_min {
            continue;
        }
        let (pa, pp) = planner(&case, &c, None);
        let (_, bp) = baseline(&case, &c, None);
        let a = pa.expect("an answer");
        let err = (f64::from(a) - f64::from(t)).abs() / f64::from(t);
        assert!(err <= 0.05, "answer {a} vs truth {t}");
        assert!(a <= t, "noise-free answers never exceed the truth");
        n += 1;
        p_sum += pp;
        b_sum += bp;
        fewer += u32::from(pp < bp);
    }
    assert!(n > 150, "{n} curves");
    assert!(p_sum <= b_sum, "planner {p_sum} probes vs baseline {b_sum}");
    assert!(fewer * 2 > n, "fewer probes in {fewer} of {n}");
}

#[test]
fn under_noise_identifiable_boundaries_are_not_overshot() {
    let mut cfg = SearchConfig::new(vec![]);
    cfg.max_iterations = 40;
    let sigma = 0.03;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut checked = 0;
    for case in family() {
        let mut c = cfg.clone();
        c.slas = case.slas.clone();
        let Some(t) = truth(&case, c.concurrency_max) else {
            continue;
        };
        if t >= c.concurrency_max || t < c.concurrency_min || slope(&case, t) < sigma {
            continue;
        }
        let (pa, _) = planner(&case, &c, Some((&mut rng, sigma)));
        if let Some(a) = pa {
            assert!(
                f64::from(a) <= f64::from(t) * 1.05,
                "answer {a} vs truth {t}"
            );
        }
        checked += 1;
    }
    assert!(checked > 150);
}
