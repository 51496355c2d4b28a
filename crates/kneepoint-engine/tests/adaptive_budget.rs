//! Issue 57, item 10: the adaptive strategy's budget holds when launches fail. A launch that
//! fails to start counts (one launch, and its instance-hours until it failed), nothing is
//! launched once the budget is spent, `spent` is written even when every launch failed, and a
//! `max_instance_hours` that cannot pay for one launch is refused before anything runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kneepoint_engine::{
    CancelToken, CandidateSource, CandidateSpec, DeployError, Prepared, Recommend, Strategy,
};
use kneepoint_planner::config_search::Budget;
use kneepoint_planner::Objective;

/// Launches a server for every candidate, each of which fails to start after `fails_after`.
struct Failing {
    prepared: Arc<AtomicUsize>,
    fails_after: Duration,
}

#[kneepoint_core::async_trait]
impl CandidateSource for Failing {
    async fn prepare(
        &self,
        c: &CandidateSpec,
        _dir: &Path,
        _cancel: &CancelToken,
    ) -> Result<Prepared, DeployError> {
        self.prepared.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.fails_after).await;
        Err(format!("{} exited (exit status: 2) before it was ready", c.name).into())
    }

    fn launches(&self, _candidate: &CandidateSpec) -> bool {
        true
    }
}

/// An adaptive recommendation over four combinations of one setting, within `budget`.
fn recommend(
    dir: &Path,
    source: Failing,
    budget: Budget,
) -> Result<Recommend, kneepoint_engine::Error> {
    let mut r =
        Recommend::builder(Objective::Throughput, dir, source).strategy(Strategy::Adaptive(budget));
    for v in ["a", "b", "c", "d"] {
        let spec = CandidateSpec::new(format!("sim profile={v}"), "local", 2.0)
            .with_settings(vec![("profile".to_owned(), v.to_owned())]);
        r = r.candidate(spec);
    }
    r.build()
}

/// `max_instance_hours` of 1.1 s of one instance, and launches that fail after 1.2 s: the
/// first failure spends the budget, and nothing else is launched (all four were, before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_launch_spends_the_budget_and_stops_the_search() {
    let tmp = tempfile::tempdir().unwrap();
    let prepared = Arc::new(AtomicUsize::new(0));
    let source = Failing {
        prepared: prepared.clone(),
        fails_after: Duration::from_millis(1200),
    };
    let budget = Budget {
        max_launches: None,
        max_instance_hours: Some(1.1 / 3600.0),
    };
    let report = recommend(tmp.path(), source, budget)
        .unwrap()
        .run(&CancelToken::new())
        .await
        .unwrap();
    assert_eq!(
        prepared.load(Ordering::SeqCst),
        1,
        "one launch, then the budget is spent"
    );
    let spent = report
        .spent
        .as_ref()
        .expect("spent, though every launch failed");
    assert_eq!(spent.launches, 1, "{spent:?}");
    assert!(spent.instance_hours >= 1.2 / 3600.0, "{spent:?}");
    assert!(
        (spent.cost - spent.instance_hours * 2.0).abs() < 1e-12,
        "{spent:?}"
    );
    let stop = report.search_stop.as_deref().unwrap_or_default();
    assert!(stop.starts_with("budget: 1 launch and "), "{stop}");
    // the file says the same
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("recommendations.json")).unwrap())
            .unwrap();
    assert_eq!(doc["spent"]["launches"], 1, "{doc:#}");
    let failed: Vec<&serde_json::Value> = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["deployment"]["up_s"].as_f64().is_some_and(|s| s >= 1.2))
        .collect();
    assert_eq!(
        failed.len(),
        1,
        "the failed launch's time is recorded: {doc:#}"
    );
    let untried = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["explanation"]
                .as_str()
                .unwrap_or_default()
                .contains("the budget ran out first")
        })
        .count();
    assert_eq!(untried, 3, "{doc:#}");
}

/// `max_launches = 2` and every launch failing at once: two launches, not four.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_launches_count_against_max_launches() {
    let tmp = tempfile::tempdir().unwrap();
    let prepared = Arc::new(AtomicUsize::new(0));
    let source = Failing {
        prepared: prepared.clone(),
        fails_after: Duration::ZERO,
    };
    let budget = Budget {
        max_launches: Some(2),
        max_instance_hours: None,
    };
    let report = recommend(tmp.path(), source, budget)
        .unwrap()
        .run(&CancelToken::new())
        .await
        .unwrap();
    assert_eq!(prepared.load(Ordering::SeqCst), 2);
    assert_eq!(report.spent.map(|s| s.launches), Some(2));
}

/// A budget of 1e-300 instance-hours launched once all the same: it is refused up front,
/// naming the budget and the least a launch costs, before the artifact folder is made.
#[test]
fn a_budget_below_one_launch_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let prepared = Arc::new(AtomicUsize::new(0));
    let source = Failing {
        prepared: prepared.clone(),
        fails_after: Duration::ZERO,
    };
    let budget = Budget {
        max_launches: None,
        max_instance_hours: Some(1e-300),
    };
    let Err(e) = recommend(&out, source, budget) else {
        panic!("a budget of 1e-300 instance-hours was accepted");
    };
    let text = e.to_string();
    assert!(
        text.contains("max_instance_hours = 1e-300 cannot pay for one launch"),
        "{text}"
    );
    assert!(text.contains("at least 0.000278 instance-hours"), "{text}");
    assert!(!out.exists(), "nothing was written");
    assert_eq!(prepared.load(Ordering::SeqCst), 0);
}
