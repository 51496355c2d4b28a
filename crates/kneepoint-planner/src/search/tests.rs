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
