//! Ranking tests: the formula, each objective, fleets, unmet and provisional candidates.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;

fn cand(name: &str, price: f64, tput: f64, conc: u32, p99: f64) -> Candidate {
    Candidate {
        name: name.into(),
        instance_type: format!("type-{name}"),
        instance_count: 1,
        price_per_instance_hour: price,
        point: Some(OperatingPoint {
            concurrency: conc,
            output_token_throughput: tput,
            request_throughput: tput / 100.0,
            ttft_p50_ms: None,
            ttft_p99_ms: None,
            itl_p50_ms: None,
            itl_p99_ms: None,
            e2e_p50_ms: Some(p99 / 2.0),
            e2e_p90_ms: None,
            e2e_p99_ms: Some(p99),
            error_rate: 0.0,
            output_token_throughput_interval: None,
        }),
        curve: vec![
            CurvePoint {
                concurrency: 1,
                e2e_p99_ms: p99 / 4.0,
            },
            CurvePoint {
                concurrency: conc,
                e2e_p99_ms: p99,
            },
        ],
        unmet_reason: None,
        lower_bound: None,
        levels: Vec::new(),
        gpus_per_instance: None,
    }
}

fn order(recs: &[Recommendation]) -> Vec<&str> {
    recs.iter().map(|r| r.name.as_str()).collect()
}

#[test]
fn cost_per_million_tokens_follows_the_formula() {
    let recs = recommend(&[cand("a", 4.0, 2000.0, 64, 900.0)], Objective::Cost, None).unwrap();
    let expect = 4.0 / (3600.0 * 2000.0) * 1e6;
    assert!((recs[0].cost_per_million_output_tokens.unwrap() - expect).abs() < 1e-12);
    assert_eq!(recs[0].rank, Some(1));
}

#[test]
fn each_objective_picks_its_own_winner() {
    let c = [
        cand("fast-expensive", 10.0, 4000.0, 64, 500.0),
        cand("slow-cheap", 1.0, 1000.0, 64, 2000.0),
        cand("balanced", 3.0, 2000.0, 64, 1000.0),
    ];
    let cost = recommend(&c, Objective::Cost, None).unwrap();
    assert_eq!(order(&cost), ["slow-cheap", "balanced", "fast-expensive"]);
    let lat = recommend(&c, Objective::Latency, None).unwrap();
    assert_eq!(order(&lat), ["fast-expensive", "balanced", "slow-cheap"]);
    let tp = recommend(&c, Objective::Throughput, None).unwrap();
    assert_eq!(order(&tp), ["fast-expensive", "balanced", "slow-cheap"]);
    assert_eq!(tp[0].score, Some(4000.0));
    assert!(
        cost[0].explanation.contains("better than #2"),
        "{}",
        cost[0].explanation
    );
}

#[test]
fn fleet_cost_counts_instances_per_endpoint() {
    let mut c = cand("pair", 2.0, 1000.0, 100, 800.0);
    c.instance_count = 2;
    let peak = PeakPlan {
        peak: PeakTraffic::Concurrency(400.0),
        headroom: 0.2,
    };
    let r = &recommend(&[c], Objective::Cost, Some(peak)).unwrap()[0];
    // 400 / (100 × 0.8) = 5 endpoints of 2 instances.
    assert_eq!(r.fleet.as_ref().unwrap().instances, 5);
    assert_eq!(r.instances_for_peak, Some(10));
    assert!((r.monthly_cost.unwrap() - 10.0 * 2.0 * HOURS_PER_MONTH).abs() < 1e-9);
    assert_eq!(r.output_tokens_per_s_per_instance, Some(500.0));
    // Each endpoint carries 80 concurrent: latency read off the curve between 1 and 100.
    let expect = 200.0 + (80.0 - 1.0) / 99.0 * 600.0;
    assert!((r.latency_at_load_ms.unwrap() - expect).abs() < 1e-9);
}

#[test]
fn unmet_candidates_are_listed_last_without_a_rank() {
    let mut bad = cand("never", 0.5, 100.0, 1, 10.0);
    bad.point = None;
    bad.unmet_reason = Some("fails the TTFT SLA at concurrency 1".into());
    let recs = recommend(
        &[bad, cand("ok", 5.0, 1000.0, 8, 100.0)],
        Objective::Cost,
        None,
    )
    .unwrap();
    assert_eq!(order(&recs), ["ok", "never"]);
    assert_eq!(recs[1].rank, None);
    assert!(recs[1].explanation.contains("TTFT"));
}

#[test]
fn ties_break_on_the_second_key_then_the_name() {
    let c = [
        cand("b", 2.0, 1000.0, 8, 100.0),
        cand("a", 2.0, 1000.0, 8, 100.0),
        cand("c", 2.0, 1000.0, 8, 50.0),
    ];
    let recs = recommend(&c, Objective::Cost, None).unwrap();
    assert_eq!(order(&recs), ["c", "a", "b"]);
    assert!(recs[0].explanation.contains("tied"));
}

#[test]
fn invalid_prices_are_errors() {
    let mut c = cand("x", -1.0, 1.0, 1, 1.0);
    assert!(recommend(&[c.clone()], Objective::Cost, None).is_err());
    c.price_per_instance_hour = 1.0;
    c.instance_count = 0;
    assert!(recommend(&[c], Objective::Cost, None).is_err());
}

#[test]
fn latency_interpolation_clamps_at_the_ends() {
    let curve = [
        CurvePoint {
            concurrency: 4,
            e2e_p99_ms: 10.0,
        },
        CurvePoint {
            concurrency: 8,
            e2e_p99_ms: 30.0,
        },
    ];
    assert_eq!(latency_at(&curve, 1.0), Some(10.0));
    assert_eq!(latency_at(&curve, 6.0), Some(20.0));
    assert_eq!(latency_at(&curve, 100.0), Some(30.0));
    assert_eq!(latency_at(&[], 1.0), None);
}

#[test]
fn a_lower_bound_is_not_ranked() {
    // The new user's case: both still rising at the highest level (64); the cheaper per token
    // would rank last on a concurrency peak, sized at the 64 it was measured at.
    let mut cheap = cand("cheap-per-token", 4.0, 3500.0, 64, 900.0);
    cheap.lower_bound = Some("throughput still rising at concurrency 64".into());
    let other = cand("other", 1.0, 1000.0, 64, 900.0);
    let peak = PeakPlan {
        peak: PeakTraffic::Concurrency(500.0),
        headroom: 0.2,
    };
    let recs = recommend(&[cheap.clone(), other.clone()], Objective::Cost, Some(peak)).unwrap();
    assert_eq!(order(&recs), ["other", "cheap-per-token"]);
    assert_eq!(recs[0].rank, Some(1));
    assert_eq!(recs[1].rank, None);
    assert!(recs[1]
        .provisional
        .as_deref()
        .unwrap()
        .contains("still rising"));
    assert!(
        recs[1].explanation.starts_with("not ranked"),
        "{}",
        recs[1].explanation
    );
    // Its numbers are still there, as bounds.
    assert!(recs[1].monthly_cost.is_some() && recs[1].cost_per_million_output_tokens.is_some());
    // Once both are established, the ranking is on the numbers.
    cheap.lower_bound = None;
    let recs = recommend(&[cheap, other], Objective::Cost, Some(peak)).unwrap();
    assert!(recs
        .iter()
        .all(|r| r.rank.is_some() && r.provisional.is_none()));
    // A candidate without an operating point is never provisional.
    let mut none = cand("none", 1.0, 1.0, 1, 1.0);
    none.point = None;
    none.lower_bound = Some("x".into());
    let recs = recommend(&[none], Objective::Cost, None).unwrap();
    assert_eq!((recs[0].rank, recs[0].provisional.clone()), (None, None));
}

#[test]
fn fleets_from_requests_or_tokens_per_second() {
    // 11 requests/s and 2,823 tokens/s per instance at concurrency 256 (the articles' knee).
    let c = cand("a", 4.0, 2823.0, 256, 28_000.0);
    let rps = PeakPlan {
        peak: PeakTraffic::RequestsPerSecond(100.0),
        headroom: 0.2,
    };
    let r = &recommend(std::slice::from_ref(&c), Objective::Cost, Some(rps)).unwrap()[0];
    // 100 / (28.23 × 0.8) = 4.43 → 5 instances.
    assert_eq!(r.instances_for_peak, Some(5));
    let toks = PeakPlan {
        peak: PeakTraffic::OutputTokensPerSecond(20_000.0),
        headroom: 0.0,
    };
    let r = &recommend(&[c], Objective::Cost, Some(toks)).unwrap()[0];
    assert_eq!(r.instances_for_peak, Some(8));
}

#[test]
fn costs_carry_intervals_and_rankings_say_how_sure_they_are() {
    let with = |mut c: Candidate, low: f64, high: f64| {
        if let Some(p) = c.point.as_mut() {
            p.output_token_throughput_interval = Some([low, high]);
        }
        c
    };
    // a: 1000 tok/s (950–1050) at 2/h; b: 980 tok/s (930–1030) at 2/h (a near tie); c: 500
    let cands = [
        with(cand("a", 2.0, 1000.0, 64, 900.0), 950.0, 1050.0),
        with(cand("b", 2.0, 980.0, 64, 900.0), 930.0, 1030.0),
        with(cand("c", 2.0, 500.0, 64, 900.0), 480.0, 520.0),
    ];
    let peak = PeakPlan {
        peak: PeakTraffic::OutputTokensPerSecond(9_500.0),
        headroom: 0.0,
    };
    let recs = recommend(&cands, Objective::Cost, None).unwrap();
    assert_eq!(order(&recs), ["a", "b", "c"]);
    let [lo, hi] = recs[0].cost_per_million_interval.unwrap();
    let cost = recs[0].cost_per_million_output_tokens.unwrap();
    assert!(lo < cost && cost < hi, "{lo} {cost} {hi}");
    let near_tie = recs[0].ahead_of_next.unwrap();
    let clear = recs[1].ahead_of_next.unwrap();
    assert!((0.5..0.8).contains(&near_tie), "{near_tie}");
    assert!(clear > 0.999, "{clear}");
    assert!(recs[2].ahead_of_next.is_none());
    assert!(
        recs[0].explanation.contains("ahead with probability"),
        "{}",
        recs[0].explanation
    );
    assert!(
        recs[0].explanation.contains("90 % interval"),
        "{}",
        recs[0].explanation
    );
    // the fleet for the peak: 9.5k tok/s over 950–1050 per endpoint
    let recs = recommend(&cands, Objective::Cost, Some(peak)).unwrap();
    let f = recs[0].fleet.as_ref().unwrap();
    assert_eq!(f.instances, 10);
    assert_eq!(f.instances_interval, Some([10, 10]));
    let fc = recs
        .iter()
        .find(|r| r.name == "c")
        .unwrap()
        .fleet
        .clone()
        .unwrap();
    assert_eq!(fc.instances_interval, Some([19, 20]), "{fc:?}");
}

#[test]
fn the_pareto_objective_lists_the_non_dominated_candidates_fastest_per_user_first() {
    // per endpoint: (concurrency, tok/s per user, tok/s, meets SLAs). By hand, per dollar
    // (tok/s × 3600 / price): fast@1 = 100×3600/4 = 90,000 at 100/user; fast@16 =
    // 1,200×900 = 1,080,000 at 75/user; cheap@16 = 800×3600/1 = 2,880,000 at 50/user;
    // cheap@64 = 1,000×3600 = 3,600,000 at 15/user but fails the SLAs; slow@16 = 700×3600/1 =
    // 2,520,000 at 45/user: beaten by cheap@16 on both. Front: fast@1, fast@16, cheap@16.
    let level = |c: u32, u: f64, t: f64, ok: bool| ParetoPoint::new(c, u, t).meets_slas(Some(ok));
    let mut fast = cand("fast", 4.0, 1200.0, 16, 900.0);
    fast.levels = vec![level(1, 100.0, 100.0, true), level(16, 75.0, 1200.0, true)];
    let mut cheap = cand("cheap", 1.0, 800.0, 16, 1500.0);
    cheap.levels = vec![level(16, 50.0, 800.0, true), level(64, 15.0, 1000.0, false)];
    let mut slow = cand("slow", 1.0, 700.0, 16, 2000.0);
    slow.levels = vec![level(16, 45.0, 700.0, true)];
    let front = candidates_front(&[fast.clone(), cheap.clone(), slow.clone()]).unwrap();
    assert_eq!(front.basis, crate::ParetoBasis::Dollar);
    let labels: Vec<String> = front.front().iter().map(|p| p.label()).collect();
    assert_eq!(labels, ["fast@1", "fast@16", "cheap@16"]);
    let out = recommend(&[slow, cheap, fast], Objective::Pareto, None).unwrap();
    let names: Vec<(&str, Option<u32>)> = out.iter().map(|r| (r.name.as_str(), r.rank)).collect();
    assert_eq!(
        names,
        [("fast", Some(1)), ("cheap", Some(2)), ("slow", None)]
    );
    assert_eq!(out[0].pareto.as_ref().unwrap().on_front, [1, 16]);
    assert!(
        out[0]
            .explanation
            .contains("on the Pareto front at concurrency 1, 16"),
        "{}",
        out[0].explanation
    );
    assert!(
        out[2].explanation.contains("cheap@16"),
        "{}",
        out[2].explanation
    );
    assert_eq!(Objective::parse("pareto"), Some(Objective::Pareto));
}

#[test]
fn large_numbers_are_grouped_by_thousands() {
    use super::front::grouped;
    assert_eq!(grouped(11_737_842.4), "11,737,842");
    assert_eq!(grouped(999.6), "1,000");
    assert_eq!(grouped(12.0), "12");
    assert_eq!(grouped(-1234.0), "-1,234");
    assert_eq!(grouped(f64::NAN), "-");
}
