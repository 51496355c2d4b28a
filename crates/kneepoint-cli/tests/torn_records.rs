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
        "4",
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
