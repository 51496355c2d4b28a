//! The examples run here, so `cargo test` keeps them working, checks what they claim, and
//! holds them to the size the README promises: a downstream crate that depends only on
//! `kneepoint` sweeps its own transport, or embeds the search, in at most 30 lines besides the
//! transport (its imports, the builder, the run and a `main` that prints the answer).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
#[path = "../examples/config_search.rs"]
mod config_search;
#[allow(dead_code)]
#[path = "../examples/custom_transport_sweep.rs"]
mod custom_transport_sweep;
#[allow(dead_code)]
#[path = "../examples/embed_search.rs"]
mod embed_search;
#[allow(dead_code)]
#[path = "../examples/openai_against_sim.rs"]
mod openai_against_sim;

use kneepoint::report::{Artifact, RunKind};
use kneepoint::types::{Metric, Stat};

/// The lines between `// NAME: begin` and `// NAME: end` in an example.
fn lines_between(source: &str, name: &str) -> usize {
    let (begin, end) = (format!("// {name}: begin"), format!("// {name}: end"));
    let start = source.find(&begin).expect("begin marker") + begin.len();
    let stop = source.find(&end).expect("end marker");
    source[start..stop].trim().lines().count()
}

#[test]
fn the_examples_are_as_short_as_the_readme_says() {
    let sweep = lines_between(
        include_str!("../examples/custom_transport_sweep.rs"),
        "sweep",
    );
    let search = lines_between(include_str!("../examples/embed_search.rs"), "search");
    assert!(
        sweep <= 30,
        "the custom-transport sweep takes {sweep} lines"
    );
    assert!(search <= 30, "the embedded search takes {search} lines");
    let plan = lines_between(include_str!("../examples/config_search.rs"), "plan");
    assert!(
        plan <= 40,
        "the embedded configuration search takes {plan} lines"
    );
}

#[test]
fn config_search_finds_the_cheapest_configuration_of_the_grid_with_fewer_launches() {
    let (settings, cost, launches) = config_search::cheapest().unwrap();
    // The grid, by brute force over the same closed form.
    let mut grid = f64::MAX;
    for tp in ["1", "2", "4"] {
        for seqs in ["32", "128", "512"] {
            for kv in ["auto", "fp8"] {
                let s = [
                    ("tensor_parallel_size", tp),
                    ("max_num_seqs", seqs),
                    ("kv_cache_dtype", kv),
                ];
                grid = grid.min(config_search::launch(&s));
            }
        }
    }
    assert!(
        cost <= grid * 1.05,
        "{settings}: {cost} vs the grid's {grid}"
    );
    assert!(launches < 18, "{launches} launches");
}

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
    for f in ["sweep_summary.json", "report.html", "logs/kneepoint.log"] {
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
    // An example a newcomer copies runs again as it is, into the same folder.
    let again = custom_transport_sweep::sweep_into(dir.path()).await?;
    assert_eq!(again.sent, vec![64, 64, 64]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embed_search_finds_a_boundary_inside_the_range() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let report = embed_search::search_into(dir.path()).await?;
    assert!(!report.history.is_empty());
    assert!(!report.interrupted);
    assert_eq!(report.history.len(), report.summaries.len());
    // The builder's request count is each probe's.
    assert!(report.summaries.iter().all(|s| s.request_count == 64));
    // Every probe has its folder.
    for p in &report.history {
        let d = kneepoint::engine::probe_dir(&p.probe);
        assert!(
            dir.path().join(&d).join("profile_export.jsonl").is_file(),
            "{d}"
        );
    }
    assert_eq!(Artifact::load(dir.path())?.kind, RunKind::Search);
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
        // counting with the same tokenizer by default, agrees: no ISL warning.
        let isl = s
            .value(Metric::InputSequenceLength, Stat::Avg)
            .unwrap_or_default();
        assert_eq!(isl, 128.0, "ISL avg {isl}");
        let osl = s
            .value(Metric::OutputSequenceLength, Stat::Avg)
            .unwrap_or_default();
        assert_eq!(osl, 16.0, "OSL avg {osl}");
        assert!(
            s.warnings.iter().all(|w| !w.contains("input lengths")),
            "{:?}",
            s.warnings
        );
    }
    Ok(())
}
