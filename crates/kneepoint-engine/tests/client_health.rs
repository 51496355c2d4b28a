//! The client's self-check: a sweep whose client is starved (its one runtime thread shared
//! with a CPU hog that blocks it most of the time) against a simulator that is not (on its own
//! runtime and thread) marks its levels `client_limited` and leaves them out of the knee and the
//! zone; the same sweep with a healthy client marks none.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kneepoint_engine::BenchOptions;
use std::sync::Arc;
use std::time::Duration;

use kneepoint_engine::{CancelToken, Sweep, SweepReport};
use kneepoint_sim::{SimProfile, SimServer};
use kneepoint_transport::{OpenAiConfig, OpenAiTransport};
use kneepoint_workload::{LengthDist, SyntheticWorkload};

/// A simulator on a runtime and thread of its own, so that starving the client's runtime does
/// not starve it; dropped with the returned sender.
fn server_elsewhere(profile: SimProfile) -> (String, tokio::sync::oneshot::Sender<()>) {
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let s = SimServer::start_local(profile).await.unwrap();
            url_tx.send(s.base_url()).unwrap();
            let _ = stop_rx.await;
            drop(s);
        });
    });
    (url_rx.recv().unwrap(), stop_tx)
}

async fn sweep(dir: &std::path::Path) -> anyhow::Result<SweepReport> {
    let profile = SimProfile::fast();
    let model = profile.model.clone();
    let (url, _stop) = server_elsewhere(profile);
    let transport = OpenAiTransport::new(OpenAiConfig::new(url, model))?;
    let workload = SyntheticWorkload::new(
        kneepoint_workload::load_tokenizer("builtin")?,
        LengthDist::Fixed(64),
        LengthDist::Fixed(48),
        1,
    )?;
    let levels = [4u32, 16];
    Ok(Sweep::builder(Arc::new(transport))
        .workload(workload)
        .plan(kneepoint_planner::SweepPlan::new(
            levels
                .iter()
                .map(|c| kneepoint_planner::SweepLevel {
                    concurrency: *c,
                    request_count: 4 * *c,
                })
                .collect(),
        )?)
        .artifacts(dir)
        .build()?
        .run(&CancelToken::new())
        .await?)
}

#[tokio::test(flavor = "current_thread")]
async fn a_starved_client_marks_its_levels_and_they_are_left_out() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // The hog shares the client's only runtime thread: it blocks it 150 ms in every 180.
    let hog = tokio::spawn(async {
        loop {
            std::thread::sleep(Duration::from_millis(150));
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    });
    let report = sweep(dir.path()).await?;
    hog.abort();
    let limited: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.client_limited.is_some())
        .collect();
    assert!(!limited.is_empty(), "{:?}", report.rows);
    for r in &limited {
        let why = r.client_limited.as_deref().unwrap();
        assert!(why.contains("late at p90"), "{why}");
        assert!(!r.is_knee && report.zone.ideal_balance != Some(r.concurrency));
    }
    assert!(
        report
            .zone
            .summary
            .contains("the client was the bottleneck"),
        "{}",
        report.zone.summary
    );
    // the health is in the level's files and survives a re-render
    let saved = std::fs::read_to_string(dir.path().join("sweep_summary.json"))?;
    assert!(saved.contains("client_limited"), "{saved}");
    Ok(())
}

#[tokio::test(flavor = "current_thread")]
async fn a_healthy_client_marks_nothing() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let report = sweep(dir.path()).await?;
    for r in &report.rows {
        assert!(r.client_limited.is_none(), "{r:?}");
    }
    let s = &report.summaries[0];
    let h = s.client.as_ref().expect("the client's health is recorded");
    eprintln!("{h:?}");
    assert!(h.wall_seconds > 0.0 && h.cores >= 1);
    assert!(h.in_flight_mean.unwrap() > 0.0, "{h:?}");
    assert!(!report.zone.summary.contains("bottleneck"));
    Ok(())
}
