//! `Recommend` and what candidate sources launch: every launched candidate is torn down once
//! its run ends (measured, interrupted, or when taking it down fails), a candidate whose
//! launch fails is listed with the reason while the others are measured, and each launch's
//! recipe and times land in `recommendations.json`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kneepoint_engine::BenchOptions;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kneepoint_engine::{
    CancelToken, CandidateRun, CandidateSource, CandidateSpec, DeployError, Deployment, Prepared,
    Recommend, Sweep,
};
use kneepoint_planner::Objective;
use kneepoint_testkit::{MockTransport, Model};
use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticWorkload};

#[derive(Debug)]
struct Fake {
    name: String,
    torn_down: Arc<AtomicUsize>,
    fails: bool,
}

#[kneepoint_core::async_trait]
impl Deployment for Fake {
    async fn teardown(&mut self) -> Result<(), DeployError> {
        self.torn_down.fetch_add(1, Ordering::SeqCst);
        if self.fails {
            return Err(format!("{} would not stop", self.name).into());
        }
        Ok(())
    }

    fn recipe(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({"command": format!("serve {}", self.name)}))
    }
}

/// Launches a fake for every candidate, except `broken` (its launch fails); `stubborn`'s
/// teardown fails; `cancel_on` fires the token while its run is being made.
struct Source {
    torn_down: Arc<AtomicUsize>,
    prepared: Arc<AtomicUsize>,
    cancel_on: Option<(String, CancelToken)>,
    /// Every launch waits here for the others of its group: only candidates measured at the
    /// same time get past it.
    together: Option<Arc<tokio::sync::Barrier>>,
}

#[kneepoint_core::async_trait]
impl CandidateSource for Source {
    async fn prepare(
        &self,
        c: &CandidateSpec,
        dir: &Path,
        _cancel: &CancelToken,
    ) -> Result<Prepared, DeployError> {
        self.prepared.fetch_add(1, Ordering::SeqCst);
        if let Some(b) = &self.together {
            b.wait().await;
        }
        if c.name == "broken" {
            return Err(
                "broken exited (exit status: 2) before it was ready: error: bad flag".into(),
            );
        }
        if let Some((name, token)) = &self.cancel_on {
            if name == &c.name {
                token.cancel();
            }
        }
        let (t, _) = MockTransport::new(Model::instant(2));
        let workload = SyntheticWorkload::new(
            load_tokenizer("builtin")?,
            LengthDist::Fixed(16),
            LengthDist::Fixed(2),
            1,
        )?;
        let sweep = Sweep::builder(Arc::new(t))
            .workload(workload)
            .levels([1, 4])
            .request_count(8)
            .artifacts(dir)
            .build()?;
        let fake = Fake {
            name: c.name.clone(),
            torn_down: self.torn_down.clone(),
            fails: c.name == "stubborn",
        };
        Ok(Prepared::launched(
            CandidateRun::Sweep(sweep),
            Box::new(fake),
        ))
    }
}

fn recommend(dir: &Path, names: &[&str], source: Source) -> Recommend {
    let mut r = Recommend::builder(Objective::Throughput, dir, source);
    for n in names {
        r = r.candidate(CandidateSpec::new(*n, "local", 2.0));
    }
    r.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_launch_is_torn_down_and_a_failed_launch_fails_only_its_candidate() {
    let tmp = tempfile::tempdir().unwrap();
    let torn_down = Arc::new(AtomicUsize::new(0));
    let source = Source {
        torn_down: torn_down.clone(),
        prepared: Arc::new(AtomicUsize::new(0)),
        cancel_on: None,
        together: None,
    };
    let report = recommend(tmp.path(), &["a", "broken", "stubborn", "b"], source)
        .run(&CancelToken::new())
        .await
        .unwrap();
    assert_eq!(torn_down.load(Ordering::SeqCst), 3, "a, stubborn and b");
    assert!(!report.interrupted);
    let by = |n: &str| {
        report
            .candidates
            .iter()
            .find(|c| c.recommendation.name == n)
            .unwrap()
    };
    let broken = by("broken");
    assert!(broken.deployment.is_none());
    assert!(broken.artifact_dir.is_none(), "no run to show");
    assert!(tmp.path().join("report.html").is_file());
    assert!(
        broken
            .recommendation
            .explanation
            .contains("error: bad flag"),
        "{}",
        broken.recommendation.explanation
    );
    for n in ["a", "b", "stubborn"] {
        let d = by(n).deployment.as_ref().unwrap();
        assert_eq!(d.recipe.as_ref().unwrap()["command"], format!("serve {n}"));
        assert!(d.up_s > 0.0 && d.teardown_s >= 0.0);
        assert!((d.benchmark_cost - d.up_s / 3600.0 * 2.0).abs() < 1e-12);
        assert_eq!(d.teardown_error.is_some(), n == "stubborn");
    }
    let saved = std::fs::read_to_string(tmp.path().join("recommendations.json")).unwrap();
    assert!(saved.contains("stubborn would not stop"), "{saved}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_tears_down_the_running_candidate_and_launches_no_more() {
    let tmp = tempfile::tempdir().unwrap();
    let torn_down = Arc::new(AtomicUsize::new(0));
    let prepared = Arc::new(AtomicUsize::new(0));
    let cancel = CancelToken::new();
    let source = Source {
        torn_down: torn_down.clone(),
        prepared: prepared.clone(),
        cancel_on: Some(("second".into(), cancel.clone())),
        together: None,
    };
    let report = recommend(tmp.path(), &["first", "second", "third"], source)
        .run(&cancel)
        .await
        .unwrap();
    assert!(report.interrupted);
    assert_eq!(
        prepared.load(Ordering::SeqCst),
        2,
        "third was never launched"
    );
    assert_eq!(torn_down.load(Ordering::SeqCst), 2, "first and second");
    assert!(report
        .candidates
        .iter()
        .any(|c| c.recommendation.name == "second" && c.deployment.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_that_share_nothing_are_measured_two_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let torn_down = Arc::new(AtomicUsize::new(0));
    let source = Source {
        torn_down: torn_down.clone(),
        prepared: Arc::new(AtomicUsize::new(0)),
        cancel_on: None,
        // Two launches must be under way at once, or this waits forever.
        together: Some(Arc::new(tokio::sync::Barrier::new(2))),
    };
    let mut r = Recommend::builder(Objective::Throughput, tmp.path(), source).parallel(2);
    for n in ["a", "b", "c", "d"] {
        r = r.candidate(CandidateSpec::new(n, "local", 2.0));
    }
    let cancel = CancelToken::new();
    let run = r.build().unwrap().run(&cancel);
    let report = tokio::time::timeout(std::time::Duration::from_secs(600), run)
        .await
        .expect("two candidates at a time")
        .unwrap();
    assert_eq!(torn_down.load(Ordering::SeqCst), 4);
    let names: Vec<&str> = report
        .candidates
        .iter()
        .map(|c| c.recommendation.name.as_str())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
}
