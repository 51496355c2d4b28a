//! The examples run here, so `cargo test` keeps them working (and checks what they claim).

#[allow(dead_code)]
#[path = "../examples/custom_transport_sweep.rs"]
mod custom_transport_sweep;
#[allow(dead_code)]
#[path = "../examples/embed_planner.rs"]
mod embed_planner;
#[allow(dead_code)]
#[path = "../examples/openai_against_sim.rs"]
mod openai_against_sim;

use kneepoint_report::{Artifact, RunKind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_transport_sweep_writes_a_full_folder_with_a_knee() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let report = custom_transport_sweep::sweep_into(dir.path()).await?;
    assert_eq!(report.sent, vec![64, 64, 64]);
    assert!(report.rows.iter().all(|r| r.error_count == 0));
    for level in ["concurrency_1", "concurrency_8", "concurrency_32"] {
        for f in [
            "inputs.json",
            "profile_export.jsonl",
            "profile_export_aiperf.json",
            "profile_export_aiperf.csv",
            "benchmark_summary.txt",
        ] {
            assert!(dir.path().join(level).join(f).is_file(), "{level}/{f}");
        }
    }
    for f in ["sweep_summary.json", "report.html"] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    // The model runs eight requests at full speed: 1 -> 8 multiplies throughput by about 8;
    // 8 -> 32 makes each gap 16 times longer, so throughput falls by about 4x while latency
    // grows about 16x. A busy machine adds a few ms to every sleep, which changes neither.
    let tps: Vec<f64> = report
        .rows
        .iter()
        .map(|r| r.output_token_throughput)
        .collect();
    assert!(tps[1] > tps[0] * 4.0, "{tps:?}");
    assert_eq!(report.zone.knee.knee, Some(8), "{:?}", report.zone.knee);
    assert!(report.rows[1].is_knee);
    let a = Artifact::load(dir.path())?;
    assert_eq!(a.kind, RunKind::Sweep);
    assert_eq!(a.levels.len(), 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embed_planner_finds_a_boundary_inside_the_range() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let report = embed_planner::search_into(dir.path()).await?;
    assert!(!report.history.is_empty());
    assert!(!report.interrupted);
    assert_eq!(report.history.len(), report.summaries.len());
    // Every probe has its folder and the history names it.
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("search_history.json"))?)?;
    assert_eq!(
        doc["schema_version"],
        kneepoint_report::schema::SCHEMA_VERSION
    );
    for p in doc["probes"].as_array().into_iter().flatten() {
        let d = p["dir"].as_str().unwrap_or_default();
        assert!(
            dir.path().join(d).join("profile_export.jsonl").is_file(),
            "{d}"
        );
    }
    // The model's latency grows with load; the planner's answer passes every SLA it probed.
    if let Some(c) = report.outcome.feasible_max {
        assert!(report
            .history
            .iter()
            .any(|r| r.probe.concurrency == c && r.pass));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_against_sim_counts_with_the_workload_tokenizer() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let report = openai_against_sim::sweep_sim_into(dir.path()).await?;
    assert_eq!(report.sent, vec![32, 32]);
    for s in &report.summaries {
        assert_eq!(s.error_count, 0);
        // The prompts are exactly 128 tokens in the workload's tokenizer, and the simulator,
        // counting with the same tokenizer, reports 128.
        let isl = s.stat("input_sequence_length", "avg").unwrap_or_default();
        assert_eq!(isl, 128.0, "ISL avg {isl}");
        let osl = s.stat("output_sequence_length", "avg").unwrap_or_default();
        assert_eq!(osl, 16.0, "OSL avg {osl}");
    }
    Ok(())
}
