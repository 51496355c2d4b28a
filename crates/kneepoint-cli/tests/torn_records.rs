//! Issue 34, item 4: `kneepoint report` on a records file cut short used to exit 0 and rewrite
//! the level's aggregates from 13 of its 20 records, `partial: false`, with no warning, over
//! the correct summary. Now the folder is refused and left as saved, unless the user asks to
//! recompute: then the level is rebuilt from the records left, marked partial, with the counts
//! in a warning that later re-renders keep. A malformed line is named by its own line number.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use clap::Parser;
use kneepoint_cli::{run_report, run_sweep, Cli, Command, SweepSettings};

async fn sweep(dir: &Path) {
    sweep_at(dir, "4").await
}

async fn sweep_at(dir: &Path, levels: &str) {
    let args = [
        "kneepoint",
        "sweep",
        "--sim-profile",
        "fast",
        "--sim-time-scale=1",
        "--isl",
        "32",
        "--osl",
        "4",
        "--concurrency",
        levels,
        "--request-count",
        "20",
        "--quiet",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    let Command::Sweep(a) = Cli::parse_from(args).command else {
        panic!()
    };
    run_sweep(&SweepSettings::resolve(&a).unwrap(), false)
        .await
        .unwrap();
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_records_file_cut_short_is_refused_unless_recomputed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    sweep(&dir).await;
    let level = dir.join("concurrency_4");
    let records = level.join("profile_export.jsonl");
    let summary = level.join("profile_export_aiperf.json");
    let text = std::fs::read_to_string(&records).unwrap();
    assert_eq!(text.lines().count(), 20);
    // Cut in the middle of the 14th line: 13 whole records and a torn one.
    let cut: usize = text.lines().take(13).map(|l| l.len() + 1).sum::<usize>() + 40;
    std::fs::write(&records, &text[..cut]).unwrap();
    let saved = std::fs::read(&summary).unwrap();

    let e = format!("{:#}", run_report(&dir, false).unwrap_err());
    assert!(e.contains("holds 13 of the 20 measured records"), "{e}");
    assert!(e.contains("--recompute"), "{e}");
    assert_eq!(std::fs::read(&summary).unwrap(), saved, "left as saved");

    let o = run_report(&dir, true).unwrap();
    assert_eq!(o.short_levels.len(), 1);
    assert_eq!((o.short_levels[0].1, o.short_levels[0].2), (13, 20));
    let doc = json(&summary);
    assert_eq!(doc["request_count"]["avg"], 13.0);
    assert_eq!(doc["kneepoint"]["partial"], true);
    let warnings = doc["kneepoint"]["warnings"].to_string();
    assert!(
        warnings.contains("recomputed from 13 of the 20 measured records"),
        "{warnings}"
    );
    // Re-rendered again, the recomputed level is what the folder now says: nothing changes.
    let recomputed = std::fs::read(&summary).unwrap();
    run_report(&dir, false).unwrap();
    assert_eq!(std::fs::read(&summary).unwrap(), recomputed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_line_is_named_by_its_line_number() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    sweep(&dir).await;
    let records = dir.join("concurrency_4/profile_export.jsonl");
    let text = std::fs::read_to_string(&records).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[5] = r#"{"metadata": {"x_request_id": "#;
    std::fs::write(&records, lines.join("\n") + "\n").unwrap();
    let e = format!("{:#}", run_report(&dir, false).unwrap_err());
    assert!(e.contains("profile_export.jsonl:6:"), "{e}");
    assert!(!e.contains("line 2"), "{e}");
}

/// Issue 34, item 5: a sweep killed before it wrote its summary (two quick Ctrl-Cs, SIGKILL)
/// was refused by `report` although its records were intact. Its level folders now say what
/// it was: the summary is rebuilt, marked interrupted, the killed level partial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_killed_before_its_summary_is_rebuilt_from_its_levels() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    sweep_at(&dir, "2,4").await;
    // As a kill in the level of 4 leaves it: no summaries, the records written.
    for f in [
        "sweep_summary.json",
        "concurrency_4/profile_export_aiperf.json",
    ] {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    let o = run_report(&dir, false).unwrap();
    assert!(o.html.is_file());
    let doc = json(&dir.join("sweep_summary.json"));
    assert_eq!(doc["interrupted"], true);
    let dirs: Vec<&str> = doc["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["dir"].as_str().unwrap())
        .collect();
    assert_eq!(dirs, ["concurrency_2", "concurrency_4"]);
    let killed = json(&dir.join("concurrency_4/profile_export_aiperf.json"));
    assert_eq!(killed["kneepoint"]["partial"], true);
    assert_eq!(killed["request_count"]["avg"], 20.0);
    assert_eq!(
        json(&dir.join("concurrency_2/profile_export_aiperf.json"))["kneepoint"]["partial"],
        false
    );
}
