//! Issue 34, item 1: a count-bound level too large to prepare in full (`--request-count
//! 4000000`, or a concurrency of a million at four requests per slot) used to make every prompt
//! before sending the first, growing memory until the process aborted. Such a level now draws
//! its requests just ahead of the senders, and the same seed gives the same prompts as a level
//! prepared in full.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kneepoint_engine::BenchOptions;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kneepoint_engine::{CancelToken, LevelSettings, Sweep};
use kneepoint_testkit::{MockTransport, Model};
use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticWorkload};

/// One-byte prompts, counted as they are made; `cancel` fires once `stop_after` are made (as
/// a Ctrl-C a while into the level).
struct Counting {
    made: Arc<AtomicUsize>,
    stop_after: usize,
    cancel: CancelToken,
}

impl kneepoint_workload::Workload for Counting {
    fn requests(
        &mut self,
        count: usize,
    ) -> Result<Vec<kneepoint_core::Request>, kneepoint_workload::Error> {
        let start = self.made.fetch_add(count, Ordering::SeqCst);
        if start + count >= self.stop_after {
            self.cancel.cancel();
        }
        Ok((start..start + count)
            .map(|i| kneepoint_core::Request::text(i as u64, "x"))
            .collect())
    }
}

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_million_request_level_makes_prompts_only_just_ahead_of_the_senders() {
    let tmp = tempfile::tempdir().unwrap();
    let cancel = CancelToken::new();
    let made = Arc::new(AtomicUsize::new(0));
    let (t, handle) = MockTransport::new(Model::instant(2));
    let report = Sweep::builder(Arc::new(t))
        .workload(Counting {
            made: made.clone(),
            stop_after: 3_000,
            cancel: cancel.clone(),
        })
        .levels([8])
        .request_count(10_000_000)
        .artifacts(tmp.path())
        .build()
        .unwrap()
        .run(&cancel)
        .await
        .unwrap();
    assert!(report.interrupted);
    let sent = report.sent[0];
    // Requests taken as the interrupt came are recorded as cancelled without reaching it.
    assert!(handle.sent() <= sent && handle.sent() + 8 >= sent);
    let made = made.load(Ordering::SeqCst);
    // Prepared in full, the level would have made 10,000,000 prompts before sending one.
    // Drawn as it goes, it makes at most what was sent plus the generator's lead: a channel
    // of 64, a batch of 64 in hand, and the first batch looked at before the level.
    assert!(sent > 0 && made >= 3_000, "sent {sent}, made {made}");
    assert!(made <= sent + 3 * 64, "{made} prompts made for {sent} sent");
    // Every request taken is listed and recorded once.
    let level = tmp.path().join("concurrency_8");
    assert_eq!(lines(&level.join("profile_export.jsonl")), sent);
    let inputs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(level.join("inputs.json")).unwrap()).unwrap();
    assert_eq!(inputs["data"].as_array().unwrap().len(), sent);
}

/// The `inputs.json` of each level of a sweep over `levels` (40 requests and 3 warm-up ones a
/// level, seed 7), with levels drawn as they go (`prepared_bytes` 0) or prepared in full.
async fn inputs(levels: &[u32], prepared_bytes: usize) -> Vec<serde_json::Value> {
    let tmp = tempfile::tempdir().unwrap();
    let (t, _) = MockTransport::new(Model::instant(2));
    let mut settings = LevelSettings::default();
    settings.request_count = 40;
    settings.warmup_requests = 3;
    settings.prepared_bytes = prepared_bytes;
    let workload = SyntheticWorkload::new(
        load_tokenizer("builtin").unwrap(),
        LengthDist::mean_stddev(24.0, 6.0),
        LengthDist::Fixed(2),
        7,
    )
    .unwrap();
    Sweep::builder(Arc::new(t))
        .workload(workload)
        .levels(levels.iter().copied())
        .settings(settings)
        .artifacts(tmp.path())
        .build()
        .unwrap()
        .run(&CancelToken::new())
        .await
        .unwrap();
    levels
        .iter()
        .map(|c| {
            let path = tmp.path().join(format!("concurrency_{c}/inputs.json"));
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_gives_the_same_prompts_drawn_or_prepared() {
    let drawn = inputs(&[4, 16], 0).await;
    let prepared = inputs(&[4, 16], usize::MAX).await;
    for (d, p) in drawn.iter().zip(&prepared) {
        assert_eq!(d["data"].as_array().unwrap().len(), 40);
        assert_eq!(d, p);
    }
    assert_ne!(
        drawn[0], drawn[1],
        "the second level has prompts of its own"
    );
}

/// A fresh-eyes review of the first version: the look at a level's first requests (to decide
/// how to prepare it) cut conversations in two when a level's count or warm-up fell inside
/// one, so a level began with a conversation's later turns, without their history. Every
/// level here gets whole conversations, warm-up and measured apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_are_never_split_between_levels() {
    let tmp = tempfile::tempdir().unwrap();
    let (t, _) = MockTransport::new(Model::instant(2));
    let mut config =
        kneepoint_workload::SyntheticConfig::new(LengthDist::Fixed(16), LengthDist::Fixed(2), 3);
    config.conversations = Some(kneepoint_workload::Conversations::new(LengthDist::Fixed(3)));
    let workload =
        SyntheticWorkload::from_config(load_tokenizer("builtin").unwrap(), config).unwrap();
    let mut settings = LevelSettings::default();
    settings.request_count = 10;
    settings.warmup_requests = 2;
    Sweep::builder(Arc::new(t))
        .workload(workload)
        .levels([2, 4, 8])
        .settings(settings)
        .artifacts(tmp.path())
        .build()
        .unwrap()
        .run(&CancelToken::new())
        .await
        .unwrap();
    for c in [2, 4, 8] {
        let level = tmp.path().join(format!("concurrency_{c}"));
        let text = std::fs::read_to_string(level.join("profile_export.jsonl")).unwrap();
        let mut turns: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
        for line in text.lines() {
            let r: serde_json::Value = serde_json::from_str(line).unwrap();
            let md = &r["metadata"];
            turns
                .entry(md["conversation_id"].as_str().unwrap().to_owned())
                .or_default()
                .push(md["turn_index"].as_u64().unwrap());
        }
        assert!(turns.len() >= 4, "level {c}: {turns:?}");
        for (id, mut t) in turns {
            t.sort_unstable();
            assert_eq!(t, [0, 1, 2], "level {c}, {id}");
        }
    }
}

/// A workload that fails after `ok` requests.
struct Failing {
    made: usize,
    ok: usize,
}

impl kneepoint_workload::Workload for Failing {
    fn requests(
        &mut self,
        count: usize,
    ) -> Result<Vec<kneepoint_core::Request>, kneepoint_workload::Error> {
        if self.made >= self.ok {
            return Err(kneepoint_workload::Error::Dataset {
                path: "prompts.jsonl".into(),
                line: Some(self.made + 1),
                reason: "the file went away".into(),
            });
        }
        let start = self.made;
        self.made += count;
        Ok((start..start + count)
            .map(|i| kneepoint_core::Request::text(i as u64, "x"))
            .collect())
    }
}

/// The review, again: a workload failing while a drawn level ran ended the level early and
/// silently, written as complete. Now the level's files are written and the run fails naming
/// the workload's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_failing_mid_level_is_an_error_after_the_files_are_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (t, _) = MockTransport::new(Model::instant(2));
    let mut settings = LevelSettings::default();
    settings.request_count = 1_000;
    settings.prepared_bytes = 0;
    let e = Sweep::builder(Arc::new(t))
        .workload(Failing { made: 0, ok: 320 })
        .levels([4])
        .settings(settings)
        .artifacts(tmp.path())
        .build()
        .unwrap()
        .run(&CancelToken::new())
        .await
        .unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("the workload failed after"), "{e}");
    assert!(e.contains("prompts.jsonl:321: the file went away"), "{e}");
    let level = tmp.path().join("concurrency_4");
    assert_eq!(lines(&level.join("profile_export.jsonl")), 320);
    assert!(level.join("profile_export_aiperf.json").is_file());
}
