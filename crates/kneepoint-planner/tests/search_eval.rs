//! The search's figures on the widened curve family at SageMaker's default settings
//! (`concurrency_min` 16, `concurrency_max` 4096, `search_max_iterations` 10): the acceptance of
//! issue 16 plus the figures measured when it was built (docs/search.md), so that a change that
//! makes the search worse fails here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use kneepoint_planner::SearchConfig;
use support::curves::family;
use support::eval::{self, evaluate};

#[test]
fn noise_free_answers_are_within_5_percent_in_few_probes() {
    let cases = family();
    let f = evaluate(
        &cases,
        &SearchConfig::new(vec![]),
        (0.0, eval::SEED),
        |_| true,
    )
    .figures();
    eprintln!("{f:?}");
    assert!(f.cases > 900, "{} cases", f.cases);
    assert_eq!(f.errors, 0);
    // acceptance: at least 98 % within 5 %, median at most 6 probes
    assert!(f.within_5 >= 0.98, "{:.3} within 5 %", f.within_5);
    assert!(f.median_probes <= 6.0, "median {}", f.median_probes);
    // noise-free answers never exceed the boundary, and the interval always covers it
    assert_eq!(f.above, 0.0);
    assert_eq!(f.coverage, 1.0);
    // as measured (99.8 %, 8,143 requests on average): doubling + bisection 85.6 %, 10,343
    assert!(f.within_5 >= f.baseline_within_5 + 0.1);
    assert!(f.mean_requests <= 0.85 * f.baseline_mean_requests);
}

#[test]
fn under_3_percent_noise_identifiable_boundaries_are_found_within_5_percent() {
    let cases = family();
    let f = evaluate(
        &cases,
        &SearchConfig::new(vec![]),
        (0.03, eval::SEED),
        |_| true,
    )
    .figures();
    eprintln!("{f:?}");
    assert_eq!(f.errors, 0, "no search errs or panics");
    assert!(f.identifiable > 700, "{} identifiable", f.identifiable);
    // acceptance (issue 30): at least 95 % of identifiable cases within 5 % of the boundary,
    // at most 0.5 % more than 5 % above it, the 90 % interval covering at least 90 %
    assert!(f.identifiable_within_5 >= 0.95, "{f:?}");
    assert!(f.identifiable_over_5 <= 0.005, "{f:?}");
    assert!(f.coverage >= 0.9, "{f:?}");
    // as measured: 97.2 % within 5 % (doubling + bisection 75.1 %), coverage 95.2 %
    assert!(f.identifiable_within_5 >= f.baseline_identifiable_within_5 + 0.15);
}

#[test]
fn under_8_percent_noise_identifiable_boundaries_are_found_within_5_percent() {
    let cases = family();
    let f = evaluate(
        &cases,
        &SearchConfig::new(vec![]),
        (0.08, eval::SEED),
        |_| true,
    )
    .figures();
    eprintln!("{f:?}");
    assert_eq!(f.errors, 0);
    // acceptance (issue 30): at least 85 % within 5 %, at most 0.5 % more than 5 % above
    assert!(f.identifiable_within_5 >= 0.85, "{f:?}");
    assert!(f.identifiable_over_5 <= 0.005, "{f:?}");
    assert!(f.coverage >= 0.9, "{f:?}");
    // as measured: 95.1 % within 5 % (doubling + bisection 83.5 %)
    assert!(f.within_5 >= f.baseline_within_5, "{f:?}");
}

#[test]
fn noise_the_measurements_do_not_report_still_gets_honest_intervals() {
    // Run-to-run noise no bootstrap sees: the interval takes the search's own prediction
    // errors as the noise.
    let cases = family();
    for sigma in [0.03, 0.08] {
        let f = eval::evaluate_with(
            &cases,
            &SearchConfig::new(vec![]),
            (sigma, eval::SEED, false),
            |_| true,
        )
        .figures();
        eprintln!("{sigma}: {f:?}");
        assert_eq!(f.errors, 0);
        assert!(f.coverage >= 0.9, "{f:?}");
        assert!(f.identifiable_over_5 <= 0.005, "{f:?}");
    }
}
