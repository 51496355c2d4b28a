//! Unit tests of the parent module.

use super::*;
use crate::{Metric, Sla, Stat};

#[test]
fn roundest() {
    assert_eq!(roundest_in(312, 320), Some(320));
    assert_eq!(roundest_in(300, 330), Some(320));
    assert_eq!(roundest_in(81, 83), Some(82));
    assert_eq!(roundest_in(7, 7), Some(7));
    assert_eq!(roundest_in(0, 0), Some(0));
    assert_eq!(roundest_in(5, 4), None);
    assert_eq!(roundest_in(1, u32::MAX), Some(1 << 31));
}

#[test]
fn validation() {
    let ok = SearchConfig::new(vec![Sla::e2e_ms(1000.0).unwrap()]);
    ok.validate().unwrap();
    let mut c = ok.clone();
    c.slas.clear();
    assert!(matches!(
        c.validate(),
        Err(Error::InvalidSearch { field: "slas", .. })
    ));
    let mut c = ok.clone();
    c.concurrency_min = 100;
    c.concurrency_max = 10;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("greater than concurrency_max"));
    let mut c = ok.clone();
    c.slas.push(Sla::ttft_ms(100.0).unwrap());
    c.streaming = false;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("needs streaming"));
    let mut c = ok;
    c.precision = 0.0;
    assert!(c.validate().is_err());
}

#[test]
fn levels_another_search_chose_replay_into_the_same_bracket() {
    let cfg = SearchConfig::new(vec![Sla::e2e_ms(1000.0).unwrap()]);
    let m =
        |c: u32| Measurement::new(1.0).with(Metric::RequestLatency, Stat::P99, 3.0 * f64::from(c));
    let mut s = SearchPlanner::new(cfg).unwrap();
    // doubling + bisection's levels, not the ones this search would choose
    for (i, c) in [16, 32, 64, 128, 256, 512, 384, 320, 352, 336, 328]
        .into_iter()
        .enumerate()
    {
        let _ = s.next_probe();
        let saved = Probe {
            iteration: i as u32 + 1,
            concurrency: c,
            request_count: 1024,
            phase: if i < 6 {
                ProbePhase::Bracket
            } else {
                ProbePhase::Bisect
            },
            expect_pass: None,
        };
        s.replay(saved, &m(c)).unwrap();
    }
    let o = s.outcome();
    assert_eq!((o.feasible_max, o.infeasible_min), (Some(328), Some(336)));
    assert_eq!(o.probes, 11);
    assert_eq!(s.history()[5].probe.phase, ProbePhase::Bracket, "as saved");
    assert_eq!(s.history()[6].probe.phase, ProbePhase::Bisect);
    // a level outside the range is refused
    let mut bad = s.history()[0].probe;
    bad.concurrency = 5000;
    assert!(s.replay(bad, &m(5000)).is_err());
    bad.concurrency = 0;
    assert!(s.replay(bad, &m(0)).is_err());
    assert_eq!(s.history().len(), 11);
    // and the search decides from there: converged (the readings lie on a straight line,
    // so the close call at 328 needs no repeat)
    assert_eq!(s.next_probe(), None);
    assert_eq!(s.outcome().stop_reason, Some(StopReason::Converged));
}

#[test]
fn observe_must_match_the_pending_probe() {
    let mut s = SearchPlanner::new(SearchConfig::new(vec![Sla::e2e_ms(1.0).unwrap()])).unwrap();
    assert!(s.observe(16, &Measurement::new(1.0)).is_err());
    let p = s.next_probe().unwrap();
    assert_eq!(s.next_probe(), Some(p));
    assert!(matches!(
        s.observe(17, &Measurement::new(1.0)),
        Err(Error::UnexpectedObservation {
            got: 17,
            expected: Some(16)
        })
    ));
}

#[test]
fn observing_a_probe_returns_its_verdict() {
    let mut s = SearchPlanner::new(SearchConfig::new(vec![Sla::e2e_ms(1000.0).unwrap()])).unwrap();
    let p = s.next_probe().unwrap();
    let fast = Measurement::new(1.0).with(Metric::RequestLatency, Stat::P99, 10.0);
    let r = s.observe(p.concurrency, &fast).unwrap();
    assert!(r.pass && r.first_breach.is_none());
    assert_eq!(
        (r.checks[0].metric, r.checks[0].stat),
        (Metric::RequestLatency, Stat::P99)
    );
    let p = s.next_probe().unwrap();
    let slow = Measurement::new(1.0).with(Metric::RequestLatency, Stat::P99, 5000.0);
    let r = s.observe(p.concurrency, &slow).unwrap();
    assert_eq!(
        (r.pass, r.first_breach.as_deref()),
        (false, Some("e2e_sla_ms"))
    );
    // An observation nobody asked for is refused.
    assert!(s.observe(p.concurrency + 1, &slow).is_err());
}

/// Runs a search on `p99(c)` (ms) against a 50 s e2e SLA, each reading reporting `spread`.
fn run(p99: impl Fn(u32, u32) -> f64, spread: Option<f64>) -> SearchPlanner {
    run_with(
        SearchConfig::new(vec![Sla::e2e_ms(50_000.0).unwrap()]),
        p99,
        spread,
    )
}

fn run_with(
    config: SearchConfig,
    p99: impl Fn(u32, u32) -> f64,
    spread: Option<f64>,
) -> SearchPlanner {
    let mut s = SearchPlanner::new(config).unwrap();
    let mut seen: BTreeMap<u32, u32> = BTreeMap::new();
    while let Some(p) = s.next_probe() {
        let k = seen.entry(p.concurrency).or_default();
        *k += 1;
        let mut m =
            Measurement::new(1.0).with(Metric::RequestLatency, Stat::P99, p99(p.concurrency, *k));
        if let Some(r) = spread {
            m = m.with_spread(Metric::RequestLatency, Stat::P99, r);
        }
        s.observe(p.concurrency, &m).unwrap();
    }
    s
}

/// A p99 crossing 50 s at 330 in proportion to concurrency, each reading off by a fixed pattern
/// of ±`amplitude` (by level and repeat).
fn wobble(amplitude: f64) -> impl Fn(u32, u32) -> f64 + Copy {
    move |c: u32, k: u32| {
        let sign = if (c / 8 + k).is_multiple_of(2) {
            1.0
        } else {
            -1.0
        };
        50_000.0 * f64::from(c) / 330.0 * (1.0 + amplitude * sign)
    }
}

#[test]
fn exact_readings_give_the_bracket_as_the_interval() {
    // p99 crosses 50 s at 330 (proportional growth above 100)
    let s = run(|c, _| 50_000.0 * f64::from(c) / 330.0, None);
    let o = s.outcome();
    let i = o.interval.unwrap();
    assert!(i.covers(330), "{i} {o:?}");
    assert_eq!(i.low, o.feasible_max);
    assert!(i.relative_width().unwrap() <= 0.1, "{i}");
    assert!(o.explanation.contains("90 % interval"), "{}", o.explanation);
    assert!(!o.cliff && o.noise.is_none());
}

#[test]
fn a_close_call_under_reported_noise_is_measured_again_and_the_interval_widens() {
    // The same curve, each reading off by a fixed pattern of ±4 % and reporting 4 % noise:
    // verdicts near 330 are not certain, so the ends of the bracket are measured again.
    let wobble = wobble(0.04);
    let s = run(wobble, Some(0.04));
    let o = s.outcome();
    assert!(
        s.history()
            .iter()
            .any(|r| r.probe.phase == ProbePhase::Confirm),
        "{:?}",
        s.history()
    );
    let i = o.interval.unwrap();
    assert!(i.covers(330), "{i}");
    let exact = run(|c, _| 50_000.0 * f64::from(c) / 330.0, None).outcome();
    assert!(
        i.relative_width() >= exact.interval.unwrap().relative_width(),
        "{i}"
    );
    // the reported noise, or the spread between repeats when that is larger
    assert!(o.noise.unwrap() >= 0.04, "{o:?}");
    // never above a level whose pooled reading failed
    let fails: Vec<u32> = s
        .verdicts()
        .iter()
        .filter(|(_, v)| !v.pass)
        .map(|(c, _)| *c)
        .collect();
    assert!(fails.iter().all(|f| o.feasible_max.unwrap() < *f));
}

#[test]
fn a_cliff_is_named() {
    // flat at 30 s, 4x past 300
    let s = run(
        |c, _| if c > 300 { 120_000.0 } else { 30_000.0 },
        Some(0.03),
    );
    let o = s.outcome();
    assert!(o.cliff, "{o:?}");
    assert!(o.explanation.contains("cliff"), "{}", o.explanation);
    assert!(
        o.feasible_max.unwrap() <= 300 && o.feasible_max.unwrap() >= 285,
        "{o:?}"
    );
    let smooth = run(
        |c, _| 50_000.0 * (f64::from(c) / 330.0).powf(1.5),
        Some(0.03),
    )
    .outcome();
    assert!(!smooth.cliff, "{smooth:?}");
}

#[test]
fn a_threshold_of_zero_is_compared_as_written_even_with_reported_noise() {
    // no errors at all up to 300, then some: `error_rate <= 0` holds below
    let sla = Sla::parse("error_rate:avg:le:0").unwrap();
    let mut s = SearchPlanner::new(SearchConfig::new(vec![sla])).unwrap();
    while let Some(p) = s.next_probe() {
        let e = if p.concurrency > 300 { 0.02 } else { 0.0 };
        let m = Measurement::new(1.0)
            .with(Metric::ErrorRate, Stat::Avg, e)
            .with_spread(Metric::ErrorRate, Stat::Avg, 0.1);
        s.observe(p.concurrency, &m).unwrap();
    }
    let o = s.outcome();
    let a = o.feasible_max.unwrap();
    assert!((285..=300).contains(&a), "{o:?}");
    assert!(o.interval.unwrap().covers(300), "{o:?}");
}

/// The goodput objective (issue 31): the share of requests missing an SLO, at most 1 % (99 %
/// attainment), on a curve whose boundary is known: request latencies lognormal with median
/// 20 ms per concurrent request and σ 0.5, SLO 8 s. The miss rate at `c` is
/// `1 − Φ((ln 8000 − ln 20c) / 0.5)`, 1 % where `20c = 8000·e^(−0.5·z₀.₉₉)`: c* = 124.997.
#[test]
fn the_goodput_objective_finds_the_highest_concurrency_whose_attainment_holds() {
    use statrs::distribution::{ContinuousCDF, Normal};
    let n = Normal::standard();
    let miss = |c: u32| 1.0 - n.cdf(((8000.0f64).ln() - (20.0 * f64::from(c)).ln()) / 0.5);
    let truth = 8000.0 * (-0.5 * n.inverse_cdf(0.99)).exp() / 20.0;
    assert!((truth - 124.997).abs() < 0.001, "{truth}");
    let sla = Sla::new(
        "goodput_attainment_0.99",
        Metric::SloMissRate,
        Stat::Avg,
        crate::Op::Le,
        0.01,
    )
    .unwrap();
    let mut s = SearchPlanner::new(SearchConfig::new(vec![sla])).unwrap();
    while let Some(p) = s.next_probe() {
        let m = Measurement::new(1.0).with(Metric::SloMissRate, Stat::Avg, miss(p.concurrency));
        s.observe(p.concurrency, &m).unwrap();
    }
    let o = s.outcome();
    let answer = o.feasible_max.unwrap();
    // never above the boundary, within the search's 5 % precision below it
    assert!(f64::from(answer) <= truth, "{o:?}");
    assert!(f64::from(answer) >= 0.95 * truth, "{o:?}");
    assert!(o.interval.unwrap().covers(124), "{o:?}");
    assert!(o.probes <= 10, "{o:?}");
    // the answer's own reading holds and the first failure's does not
    assert!(miss(answer) <= 0.01 && miss(o.infeasible_min.unwrap()) > 0.01);
}

/// Issue 47: confidence never reads high beside an interval wider than ±10 % of the answer
/// (or open at an end), over straight, steep and stepped curves with noise reported or not.
#[test]
fn a_wide_interval_is_never_high_confidence() {
    let mut wide = 0;
    for boundary in [20u32, 40, 130, 330, 700] {
        for noise in [0.0, 0.03, 0.08, 0.15, 0.3] {
            for reported in [false, true] {
                for shape in 0..3 {
                    let wobble = move |c: u32, k: u32| {
                        let sign = if (c / 8 + k).is_multiple_of(2) {
                            1.0
                        } else {
                            -1.0
                        };
                        let x = f64::from(c) / f64::from(boundary);
                        let base = match shape {
                            0 => x,
                            1 => x.powi(4),
                            _ if x < 1.0 => 0.5 + 0.4 * x,
                            _ => 2.0 * x,
                        };
                        50_000.0 * base * (1.0 + noise * sign)
                    };
                    let o = run(wobble, (reported && noise > 0.0).then_some(noise)).outcome();
                    let (Some(answer), Some(i)) = (o.feasible_max, o.interval) else {
                        continue;
                    };
                    let spans = match (i.low, i.high) {
                        (Some(l), Some(h)) => f64::from(h - l) > 0.2 * f64::from(answer),
                        _ => true,
                    };
                    if spans {
                        wide += 1;
                        assert_ne!(o.confidence, Confidence::High, "{i} around {answer}");
                    }
                }
            }
        }
    }
    assert!(
        wide > 0,
        "no case gave a wide interval: the check was not exercised"
    );
}

/// A search fed the given readings (concurrency, e2e load, TTFT load), each reporting 3 % noise,
/// against an e2e p99 SLA of 1 s and a TTFT p95 SLA of 1 s.
fn fed(readings: &[(u32, f64, f64)]) -> SearchPlanner {
    let slas = vec![Sla::e2e_ms(1000.0).unwrap(), Sla::ttft_ms(1000.0).unwrap()];
    let mut s = SearchPlanner::new(SearchConfig::new(slas)).unwrap();
    for (i, &(c, e2e, ttft)) in readings.iter().enumerate() {
        let m = Measurement::new(1.0)
            .with(Metric::RequestLatency, Stat::P99, 1000.0 * e2e)
            .with(Metric::TimeToFirstToken, Stat::P95, 1000.0 * ttft)
            .with_spread(Metric::RequestLatency, Stat::P99, 0.03)
            .with_spread(Metric::TimeToFirstToken, Stat::P95, 0.03);
        s.replay(Probe::replayed(i as u32 + 1, c, 1024), &m)
            .unwrap();
    }
    s
}

#[test]
fn a_level_whose_every_reading_failed_one_sla_or_the_other_is_not_the_answer() {
    // at 200 each SLA's pooled value passes (1.02 and 0.97 average under 1), but neither reading
    // passed both: judged jointly, 200 more likely fails than holds
    let s = fed(&[
        (100, 0.5, 0.5),
        (200, 1.02, 0.97),
        (200, 0.97, 1.02),
        (240, 1.2, 1.2),
    ]);
    let v = s.verdicts();
    assert!(!v[&200].pass, "{:?}", v[&200]);
    assert!(v[&200].pass_probability < 0.5, "{:?}", v[&200]);
    let o = s.outcome();
    assert_eq!(o.feasible_max, Some(100), "{o:?}");
    assert_eq!(o.infeasible_min, Some(200));
}

#[test]
fn the_answer_holds_with_95_percent_and_the_point_estimate_is_reported_beside_it() {
    // 190 passes on its reading (0.98), but 3 % noise leaves a 25 % chance that it fails
    let s = fed(&[(100, 0.5, 0.5), (190, 0.98, 0.5), (210, 1.1, 0.6)]);
    let o = s.outcome();
    assert_eq!(o.feasible_max, Some(100), "{o:?}");
    assert_eq!(o.estimate, Some(190), "{o:?}");
    assert!(
        o.explanation.contains("the answer is 100")
            && o.explanation.contains("point estimate is 190"),
        "{}",
        o.explanation
    );
    assert!(o.interval.unwrap().covers(190));
    // exact readings (no noise reported): the answer is the highest pass, as before
    let slas = vec![Sla::e2e_ms(1000.0).unwrap()];
    let mut exact = SearchPlanner::new(SearchConfig::new(slas)).unwrap();
    for (i, (c, l)) in [(100, 0.5), (190, 0.98), (210, 1.1)]
        .into_iter()
        .enumerate()
    {
        let m = Measurement::new(1.0).with(Metric::RequestLatency, Stat::P99, 1000.0 * l);
        exact
            .replay(Probe::replayed(i as u32 + 1, c, 1024), &m)
            .unwrap();
    }
    let o = exact.outcome();
    assert_eq!(
        (o.feasible_max, o.estimate),
        (Some(190), Some(190)),
        "{o:?}"
    );
}

#[test]
fn readings_just_above_a_level_make_it_certain() {
    // alone, 180 (0.955) holds with probability 0.94 and 190 (0.965) with 0.88; on loads that
    // grow with concurrency 180's load is at most their mean, which holds with 0.97
    let s = fed(&[
        (100, 0.5, 0.5),
        (180, 0.955, 0.5),
        (190, 0.965, 0.5),
        (210, 1.1, 0.6),
    ]);
    let v = s.verdicts();
    assert!(v[&180].certain_pass() && !v[&190].certain_pass(), "{v:?}");
    assert_eq!(s.outcome().feasible_max, Some(180));
    // a single reading of 180 alone is not enough
    let alone = fed(&[(100, 0.5, 0.5), (180, 0.955, 0.5), (210, 1.1, 0.6)]);
    assert_eq!(alone.outcome().feasible_max, Some(100));
}

#[test]
fn a_noisy_search_spends_extra_probes_only_while_its_interval_is_wide() {
    // readings off by a fixed ±8 % pattern, reporting 8 % noise
    let wobble = wobble(0.08);
    let s = run(wobble, Some(0.08));
    let cfg = s.config().clone();
    let n = s.history().len();
    // at 8 % noise the interval is still wide after 10 probes: the extra probes are spent
    assert!(n as u32 > cfg.max_iterations, "{n}");
    assert!(n as u32 <= cfg.max_iterations + cfg.noise_iterations, "{n}");
    // the extra probes were spent because the interval was still wide without them
    let mut first = SearchPlanner::new(cfg.clone()).unwrap();
    for r in &s.history()[..cfg.max_iterations as usize] {
        let m = Measurement::new(1.0)
            .with(
                Metric::RequestLatency,
                Stat::P99,
                r.checks[0].value.unwrap(),
            )
            .with_spread(Metric::RequestLatency, Stat::P99, 0.08);
        first.replay(r.probe, &m).unwrap();
    }
    let w = first.outcome().interval.unwrap().relative_width();
    assert!(w.is_none_or(|w| w > 2.0 * cfg.precision), "{w:?}");
    // 0 makes search_max_iterations a hard cap
    let mut capped = cfg.clone();
    capped.noise_iterations = 0;
    let hard = run_with(capped.clone(), wobble, Some(0.08));
    assert!(hard.history().len() as u32 <= capped.max_iterations);
}
