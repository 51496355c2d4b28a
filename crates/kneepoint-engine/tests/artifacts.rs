//! Issue 20, item 10: the artifact-folder policy. A folder that holds a run is refused
//! (a new run used to mix its levels and plots with the stale ones, and `report` rendered
//! both); `overwrite` replaces exactly what a run writes; a run whose settings are refused
//! creates no folder.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kneepoint_engine::BenchOptions;
use std::sync::Arc;

use kneepoint_engine::{CancelToken, Sweep};
use kneepoint_testkit::{MockTransport, Model};
use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticWorkload};

fn workload() -> SyntheticWorkload {
    SyntheticWorkload::new(
        load_tokenizer("builtin").unwrap(),
        LengthDist::Fixed(16),
        LengthDist::Fixed(2),
        1,
    )
    .unwrap()
}

async fn sweep(dir: &std::path::Path, levels: &[u32], overwrite: bool) -> Result<(), String> {
    let (t, _) = MockTransport::new(Model::instant(2));
    let s = Sweep::builder(Arc::new(t))
        .workload(workload())
        .levels(levels.iter().copied())
        .request_count(4)
        .artifacts(dir)
        .overwrite(overwrite)
        .build()
        .map_err(|e| e.to_string())?;
    s.run(&CancelToken::new())
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_with_a_run_is_refused_unless_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    sweep(&dir, &[1, 4], false).await.unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let e = sweep(&dir, &[2], false).await.unwrap_err();
    assert!(e.contains("already holds a kneepoint run"), "{e}");
    assert!(
        dir.join("concurrency_4").is_dir(),
        "a refused run touches nothing"
    );
    sweep(&dir, &[2], true).await.unwrap();
    assert!(dir.join("concurrency_2").is_dir());
    assert!(!dir.join("concurrency_1").exists() && !dir.join("concurrency_4").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "mine"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_settings_create_no_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("never");
    let e = sweep(&dir, &[0], false).await.unwrap_err();
    assert!(e.contains("concurrency"), "{e}");
    assert!(!dir.exists());
    // (no levels at all is the default sweep since issue 48: tests/default_sweep.rs)
}

/// A workload that counts the prompts it made and fires `cancel` on its third call (as a
/// Ctrl-C would arrive while a million prompts are being prepared).
struct Interrupting {
    drawn: Arc<std::sync::atomic::AtomicUsize>,
    calls: usize,
    cancel: CancelToken,
}

impl kneepoint_workload::Workload for Interrupting {
    fn requests(
        &mut self,
        count: usize,
    ) -> Result<Vec<kneepoint_core::Request>, kneepoint_workload::Error> {
        self.calls += 1;
        if self.calls == 3 {
            self.cancel.cancel();
        }
        let start = self
            .drawn
            .fetch_add(count, std::sync::atomic::Ordering::SeqCst);
        Ok((start..start + count)
            .map(|i| kneepoint_core::Request::text(i as u64, "x"))
            .collect())
    }
}

/// `n` requests a level, prepared in full whatever their size (a level too large for
/// `prepared_bytes` is drawn as it goes instead: `tests/drawn_levels.rs`).
fn prepared_in_full(n: u32) -> kneepoint_engine::LevelSettings {
    let mut s = kneepoint_engine::LevelSettings::default();
    s.request_count = n;
    s.prepared_bytes = usize::MAX;
    s
}

/// Issue 20, item 4: during the preparation of a huge level the first Ctrl-C printed
/// "cancelling" and the process went on preparing. Preparation is now batched and stops at
/// the interrupt; the level is written, empty and partial, and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_during_preparation_stops_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cancel = CancelToken::new();
    let drawn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (t, handle) = MockTransport::new(Model::instant(2));
    let report = Sweep::builder(Arc::new(t))
        .workload(Interrupting {
            drawn: drawn.clone(),
            calls: 0,
            cancel: cancel.clone(),
        })
        .levels([4])
        .settings(prepared_in_full(1_000_000))
        .artifacts(tmp.path())
        .build()
        .unwrap()
        .run(&cancel)
        .await
        .unwrap();
    assert!(report.interrupted);
    assert_eq!(report.sent, vec![0]);
    assert_eq!(handle.sent(), 0);
    let n = drawn.load(std::sync::atomic::Ordering::SeqCst);
    assert!(n <= 3 * 2048, "{n} prompts made after the interrupt");
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(tmp.path().join("concurrency_4/profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    assert!(
        doc.to_string().contains("partial"),
        "the level is marked partial"
    );
}
