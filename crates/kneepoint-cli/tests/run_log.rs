//! `logs/kneepoint.log` in every artifact folder: a sweep's, a search's, and a
//! recommendation's (its own and each candidate's), with the settings, the per-level lines and
//! the conclusion; replaced by `--overwrite` without touching the user's files beside it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use kneepoint_cli::{run_recommend_with, run_search, run_sweep, RecommendArgs};
use kneepoint_runner::CancelToken;

fn log(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("logs/kneepoint.log"))
        .unwrap_or_else(|e| panic!("no run log in {}: {e}", dir.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeps_and_searches_write_their_run_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sweep");
    let s =
        common::fast_sweep("4", &["--concurrency", "1,4", "--request-count", "8"], &dir).unwrap();
    run_sweep(&s, false).await.unwrap();
    let text = log(&dir);
    for want in [
        "INFO  kneepoint ",
        "settings: {",
        "concurrency 1: started, 8 measured requests",
        "level 1 done: 8 requests (0 failed",
        "level 4 done: 8 requests",
        "sweep done: ",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    // Every line starts with a UTC timestamp.
    assert!(text
        .lines()
        .filter(|l| !l.starts_with("    "))
        .all(|l| l.len() > 28 && &l[4..5] == "-" && l[..28].contains('Z')));

    // A rerun with --overwrite replaces the log and leaves the user's file in logs/ alone.
    std::fs::write(dir.join("logs/mine.txt"), "keep me").unwrap();
    let s = common::fast_sweep(
        "4",
        &["--concurrency", "2", "--request-count", "4", "--overwrite"],
        &dir,
    )
    .unwrap();
    run_sweep(&s, false).await.unwrap();
    let text = log(&dir);
    assert!(
        text.contains("level 2 done") && !text.contains("level 4 done"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("logs/mine.txt")).unwrap(),
        "keep me"
    );

    let dir = tmp.path().join("search");
    let s = common::fast_search(
        &[
            "--isl",
            "32",
            "--osl",
            "4",
            "--e2e-sla-ms",
            "60000",
            "--concurrency-min",
            "1",
            "--concurrency-max",
            "4",
            "--search-max-iterations",
            "2",
            "--request-count",
            "4",
            "--quiet",
        ],
        &dir,
    )
    .unwrap();
    run_search(&s, false).await.unwrap();
    let text = log(&dir);
    assert!(text.contains("probe 1 at concurrency 1: pass"), "{text}");
    assert!(text.contains("search done: "), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recommendation_logs_itself_and_each_candidate() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("rec.toml"),
        r#"
[workload]
prompt_input_tokens_mean = 32
output_tokens_mean = 4
[sweep_params]
concurrency = [1, 4]
request_count = 8
[[candidates]]
name = "a"
price_per_hour = 1.0
simulator = { profile = "fast", time_scale = 1.0 }
[[candidates]]
name = "b"
price_per_hour = 2.0
simulator = { profile = "fast", time_scale = 1.0 }
"#,
    )
    .unwrap();
    let out = tmp.path().join("out");
    let args = RecommendArgs {
        config: tmp.path().join("rec.toml"),
        options: kneepoint_config::RecommendOptions {
            artifact_dir: Some(out.clone()),
            ..Default::default()
        },
        quiet: true,
        ..Default::default()
    };
    run_recommend_with(&args, false, &CancelToken::new())
        .await
        .unwrap();
    let top = log(&out);
    assert!(
        top.contains("recommendation in ") && top.contains("2 candidates"),
        "{top}"
    );
    assert!(top.contains("candidate 1 of 2: a (sweep)"), "{top}");
    assert!(top.contains(" a: ") && top.contains(" b: "), "{top}");
    for c in ["candidate_a", "candidate_b"] {
        assert!(log(&out.join(c)).contains("level 4 done"), "{c}");
    }
}
