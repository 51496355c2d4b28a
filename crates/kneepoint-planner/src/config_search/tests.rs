#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

/// A closed-form engine: throughput per instance (higher is better) of a tensor-parallel
/// degree, a batch limit and a KV dtype, with its cost per million tokens at `price × tp`.
fn engine(tp: f64, seqs: f64, fp8: bool) -> (f64, f64) {
    let kv_room = 300.0 * tp * if fp8 { 1.9 } else { 1.0 };
    let batch = seqs.min(kv_room);
    let step = 10.0 / tp.powf(0.8) + 0.02 * batch;
    let throughput = batch * 1000.0 / step * if fp8 { 0.97 } else { 1.0 };
    let cost = 2.0 * tp / (3600.0 * throughput) * 1e6;
    (throughput, cost)
}

fn space() -> Vec<Dimension> {
    vec![
        Dimension::new("tensor_parallel_size", ["1", "2", "4"]),
        Dimension::new("max_num_seqs", ["32", "128", "512"]),
        Dimension::new("kv_cache_dtype", ["auto", "fp8"]),
    ]
}

fn score(s: &ConfigSearch, i: usize, goal: Goal) -> f64 {
    let v = s.settings(i);
    let (t, c) = engine(
        v[0].1.parse().unwrap(),
        v[1].1.parse().unwrap(),
        v[2].1 == "fp8",
    );
    match goal {
        Goal::Maximize => t,
        Goal::Minimize => c,
    }
}

/// Runs a search with screenings off by `screen_bias` of the truth and full measurements at
/// 2 % noise; returns it, and the grid's best score.
fn run(goal: Goal, screen_bias: f64) -> (ConfigSearch, f64) {
    let mut s = ConfigSearch::new(space(), goal).unwrap();
    let grid: Vec<f64> = (0..s.len()).map(|i| score(&s, i, goal)).collect();
    let best = match goal {
        Goal::Maximize => grid.iter().copied().fold(f64::MIN, f64::max),
        Goal::Minimize => grid.iter().copied().fold(f64::MAX, f64::min),
    };
    while let Some(t) = s.next_trial() {
        let truth = score(&s, t.combination, goal);
        let o = match t.fidelity {
            Fidelity::Screen => TrialOutcome::measured(truth * (1.0 + screen_bias), 0.05, 0.1),
            Fidelity::Full => TrialOutcome::measured(truth, 0.02, 1.0),
        };
        s.observe(t, o);
    }
    (s, best)
}

#[test]
fn the_adaptive_winner_is_the_grids_best_for_fewer_full_searches() {
    for goal in [Goal::Maximize, Goal::Minimize] {
        for bias in [-0.05, 0.0, 0.05] {
            let (s, best) = run(goal, bias);
            let a = s.answer();
            let won = score(&s, a.best.unwrap(), goal);
            assert!(
                (won / best - 1.0).abs() <= 0.05,
                "{goal:?} {bias}: {won} vs {best}"
            );
            let full = (0..s.len())
                .filter(|i| matches!(s.status(*i), Some(Status::Searched(..))))
                .count();
            // The grid searches all 18 fully; screenings cost a tenth of a full one here.
            let hours = a.instance_hours;
            assert!(full <= 6, "{goal:?} {bias}: {full} full searches");
            assert!(
                hours <= 0.4 * 18.0,
                "{goal:?} {bias}: {hours} instance-hours"
            );
            assert!(a.stop.is_some());
        }
    }
}

#[test]
fn what_cannot_fit_is_never_launched_and_priors_skip_losers() {
    let mut s = ConfigSearch::new(space(), Goal::Maximize).unwrap();
    for i in 0..s.len() {
        let truth = score(&s, i, Goal::Maximize);
        let tp1_big = s.settings(i)[0].1 == "1" && s.settings(i)[1].1 == "512";
        s.set_prior(
            i,
            Prior {
                cannot_fit: tp1_big.then(|| "KV cache too small".to_owned()),
                predicted: Some(truth * 1.1),
                ..Default::default()
            },
        );
    }
    let mut launched = Vec::new();
    while let Some(t) = s.next_trial() {
        launched.push(t.combination);
        let truth = score(&s, t.combination, Goal::Maximize);
        s.observe(t, TrialOutcome::measured(truth, 0.03, 0.5));
    }
    for i in 0..s.len() {
        if s.settings(i)[0].1 == "1" && s.settings(i)[1].1 == "512" {
            assert!(!launched.contains(&i));
            assert!(matches!(s.status(i), Some(Status::Skipped(w)) if w.contains("cannot fit")));
        }
    }
    let skipped = (0..s.len())
        .filter(|i| matches!(s.status(*i), Some(Status::Skipped(w)) if w.contains("cannot win")))
        .count();
    assert!(skipped > 0, "good priors skip some losers");
    assert!(launched.len() < s.len());
}

#[test]
fn the_budget_stops_the_search_and_says_so() {
    let mut s = ConfigSearch::new(space(), Goal::Maximize)
        .unwrap()
        .with_budget(Budget {
            max_launches: Some(4),
            max_instance_hours: None,
        });
    while let Some(t) = s.next_trial() {
        s.observe(
            t,
            TrialOutcome::measured(100.0 + t.combination as f64, 0.02, 0.1),
        );
    }
    let a = s.answer();
    assert_eq!((a.launches, a.stop), (4, Some(Stop::Budget)));
}

/// Issue 57, item 10: launches that fail to start count against the budget, one launch and
/// their hours each, and nothing more is launched once it is spent.
#[test]
fn launches_that_fail_to_start_spend_the_budget() {
    let hours = Budget {
        max_launches: None,
        max_instance_hours: Some(1.0),
    };
    let mut s = ConfigSearch::new(space(), Goal::Maximize)
        .unwrap()
        .with_budget(hours);
    let mut launched = 0;
    while let Some(t) = s.next_trial() {
        launched += 1;
        s.observe(t, TrialOutcome::did_not_start(0.3));
    }
    let a = s.answer();
    assert_eq!((launched, a.launches), (3, 3), "{a:?}");
    assert_eq!(a.stop, Some(Stop::Budget));
    assert!((a.instance_hours - 0.9).abs() < 1e-9, "{a:?}");
    // one failed start far above the budget: nothing after it
    let mut s = ConfigSearch::new(space(), Goal::Maximize)
        .unwrap()
        .with_budget(hours);
    let t = s.next_trial().unwrap();
    s.observe(t, TrialOutcome::did_not_start(5.0));
    assert_eq!(s.next_trial(), None);
    assert_eq!(
        (s.answer().launches, s.answer().stop),
        (1, Some(Stop::Budget))
    );
    // and under max_launches, a failed start is a launch
    let mut s = ConfigSearch::new(space(), Goal::Maximize)
        .unwrap()
        .with_budget(Budget {
            max_launches: Some(2),
            max_instance_hours: None,
        });
    let mut launched = 0;
    while let Some(t) = s.next_trial() {
        launched += 1;
        s.observe(t, TrialOutcome::did_not_start(0.01));
    }
    assert_eq!(launched, 2);
    // a failed start does not make a measured launch look cheap: after a full measurement of
    // 1 h, the next full one is expected to cost 1 h, not the mean with a failed start
    let mut s = ConfigSearch::new(space(), Goal::Maximize)
        .unwrap()
        .with_budget(Budget {
            max_launches: None,
            max_instance_hours: Some(2.05),
        });
    s.direct_below = usize::MAX;
    let t = s.next_trial().unwrap();
    assert_eq!(t.fidelity, Fidelity::Full);
    s.observe(t, TrialOutcome::measured(100.0, 0.02, 1.0));
    let t = s.next_trial().unwrap();
    s.observe(t, TrialOutcome::did_not_start(0.1));
    // 1.1 h spent and a full launch expected at 1 h overruns 2.05 h (at a mean of 0.55 h
    // with the failed start, it would not)
    assert_eq!(s.next_trial(), None);
    assert_eq!(s.answer().stop, Some(Stop::Budget));
}

/// Issue 57, item 10: a budget below the least a launch can cost launched once all the same.
#[test]
fn a_budget_below_the_least_launch_launches_nothing() {
    let mut s = ConfigSearch::new(space(), Goal::Maximize)
        .unwrap()
        .with_budget(Budget {
            max_launches: None,
            max_instance_hours: Some(1e-300),
        });
    s.least_launch_hours = 1.0 / 3600.0;
    assert_eq!(s.next_trial(), None);
    let a = s.answer();
    assert_eq!((a.launches, a.stop), (0, Some(Stop::Budget)));
}

#[test]
fn an_empty_dimension_is_refused() {
    assert!(ConfigSearch::new(
        vec![Dimension::new("x", Vec::<String>::new())],
        Goal::Maximize
    )
    .is_err());
}

#[test]
fn predictions_off_by_a_common_factor_are_calibrated_before_they_skip() {
    // Predictions 20 times too low (a simulator's time scale, an efficiency assumed wrong)
    // but in the right order: uncalibrated, every one would read "far behind the best
    // measured" after the first measurement and the search would stop there.
    for goal in [Goal::Maximize, Goal::Minimize] {
        let mut s = ConfigSearch::new(space(), goal).unwrap();
        for i in 0..s.len() {
            let truth = score(&s, i, goal);
            let off = if goal == Goal::Maximize {
                1.0 / 20.0
            } else {
                20.0
            };
            s.set_prior(
                i,
                Prior {
                    cannot_fit: None,
                    predicted: Some(truth * off),
                    ..Default::default()
                },
            );
        }
        let grid_best = (0..s.len())
            .map(|i| score(&s, i, goal))
            .fold(None, |b: Option<f64>, v| {
                Some(b.map_or(v, |b| {
                    if (goal == Goal::Maximize) == (v > b) {
                        v
                    } else {
                        b
                    }
                }))
            })
            .unwrap();
        while let Some(t) = s.next_trial() {
            let truth = score(&s, t.combination, goal);
            s.observe(t, TrialOutcome::measured(truth, 0.02, 1.0));
        }
        let won = score(&s, s.answer().best.unwrap(), goal);
        assert!(
            (won / grid_best - 1.0).abs() <= 0.05,
            "{goal:?}: {won} vs {grid_best}"
        );
        let skipped: Vec<String> = (0..s.len())
            .filter_map(|i| match s.status(i) {
                Some(Status::Skipped(w)) => Some(w.clone()),
                _ => None,
            })
            .collect();
        assert!(
            !skipped.is_empty(),
            "{goal:?}: calibrated priors skip clear losers"
        );
        assert!(
            skipped.iter().all(|w| w.contains("calibrated")),
            "{skipped:?}"
        );
    }
}

#[test]
fn a_prior_that_misorders_widens_its_own_error() {
    // Predictions right for half the space and 3 times too optimistic for the other half:
    // the gaps between prediction and measurement spread, so the error the skip rule allows
    // grows past the default and the true best is not skipped.
    let goal = Goal::Maximize;
    let mut s = ConfigSearch::new(space(), goal).unwrap();
    for i in 0..s.len() {
        let truth = score(&s, i, goal);
        let wrong = s.settings(i)[2].1 == "fp8";
        s.set_prior(
            i,
            Prior {
                cannot_fit: None,
                predicted: Some(truth * if wrong { 3.0 } else { 1.0 }),
                ..Default::default()
            },
        );
    }
    let best = (0..s.len())
        .map(|i| score(&s, i, goal))
        .fold(f64::MIN, f64::max);
    while let Some(t) = s.next_trial() {
        let truth = score(&s, t.combination, goal);
        s.observe(t, TrialOutcome::measured(truth, 0.02, 1.0));
    }
    let won = score(&s, s.answer().best.unwrap(), goal);
    assert!(won >= 0.95 * best, "{won} vs {best}");
}

/// Throughput per GPU of a closed-form engine on hardware `speed` times as fast as modelled,
/// under an ITL SLA of 15 ms: the best batch up to `seqs` whose step meets it (`None`: none).
fn per_gpu(tp: f64, seqs: f64, speed: f64) -> Option<f64> {
    let step = |b: f64| (20.0 / tp + 0.1 * b) / speed;
    let mut best = None;
    let mut b = 1.0;
    while b <= seqs {
        if step(b) <= 15.0 {
            best = Some(b * 1000.0 / step(b) / tp);
        }
        b *= 2.0;
    }
    best
}

#[test]
fn a_prior_on_slower_hardware_is_read_at_the_speed_measured() {
    // The launched engines run 5 times as fast as the prior's hardware (a simulator at
    // --time-scale 0.2): at the modelled speed TP 1 meets the SLA at no batch, at the measured
    // speed it is the best per GPU. The search fits the speed and finds it.
    let dims = vec![
        Dimension::new("tensor_parallel_size", ["1", "2", "4"]),
        Dimension::new("max_num_seqs", ["32", "128", "512"]),
    ];
    let mut s = ConfigSearch::new(dims, Goal::Maximize).unwrap();
    let parse = |s: &ConfigSearch, i: usize| -> (f64, f64) {
        let v = s.settings(i);
        (v[0].1.parse().unwrap(), v[1].1.parse().unwrap())
    };
    for i in 0..s.len() {
        let (tp, seqs) = parse(&s, i);
        s.set_prior(
            i,
            Prior::from_speeds(None, |speed| per_gpu(tp, seqs, speed)),
        );
    }
    assert_eq!(per_gpu(1.0, 512.0, 1.0), None);
    let truth = |s: &ConfigSearch, i: usize| {
        let (tp, seqs) = parse(s, i);
        per_gpu(tp, seqs, 5.0)
    };
    let best = (0..s.len())
        .filter_map(|i| truth(&s, i))
        .fold(0.0, f64::max);
    while let Some(t) = s.next_trial() {
        let o = match truth(&s, t.combination) {
            Some(v) => TrialOutcome::measured(v, 0.02, 1.0),
            None => TrialOutcome::unusable(1.0),
        };
        s.observe(t, o);
    }
    let a = s.answer();
    let won = truth(&s, a.best.unwrap()).unwrap();
    assert!(won >= 0.95 * best, "{won} vs {best}");
    assert_eq!(s.settings(a.best.unwrap())[0].1, "1");
    assert!(a.launches < 9, "{} launches of 9", a.launches);
}

#[test]
fn without_predictions_a_monotone_batch_limit_skips_what_it_dominates() {
    // A real engine with no model to predict it: throughput grows with the batch limit (as
    // a larger limit runs every level a smaller one does), and the block size matters apart.
    let dims = vec![
        Dimension::new("max_num_seqs", ["2", "8", "32"]).monotone(),
        Dimension::new("max_num_batched_tokens", ["512", "2048"]),
    ];
    let mut s = ConfigSearch::new(dims, Goal::Maximize).unwrap();
    let truth = |s: &ConfigSearch, i: usize| {
        let v = s.settings(i);
        let seqs: f64 = v[0].1.parse().unwrap();
        let budget = if v[1].1 == "2048" { 1.3 } else { 1.0 };
        100.0 * seqs.sqrt() * budget
    };
    let mut launched = Vec::new();
    while let Some(t) = s.next_trial() {
        launched.push(t.combination);
        let v = truth(&s, t.combination);
        s.observe(t, TrialOutcome::measured(v, 0.02, 1.0));
    }
    let a = s.answer();
    assert_eq!(s.settings(a.best.unwrap())[0].1, "32");
    assert_eq!(s.settings(a.best.unwrap())[1].1, "2048");
    assert_eq!(launched.len(), 2, "{launched:?}");
    let dominated = (0..s.len())
        .filter(|i| matches!(s.status(*i), Some(Status::Skipped(w)) if w.contains("max_num_seqs 32 was measured")))
        .count();
    assert_eq!(dominated, 4);
}
