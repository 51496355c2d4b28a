//! Issue 57: the results store tried as a careless or hostile user would, through the binary:
//! checks that leave no verdict, killed and torn folders, labels on the recovery path,
//! locations that are not what they seem, reads that must make nothing, and imports at once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");

fn kneepoint(data: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("XDG_DATA_HOME", data)
        .env_remove("KNEEPOINT_STORE")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A small sweep of the simulator into `dir` (`requests` per level, at `scale` time scale).
fn sweep(data: &Path, dir: &Path, requests: &str, scale: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "sweep",
        "--sim-profile",
        "fast",
        "--sim-time-scale",
        scale,
        "--isl",
        "64",
        "--osl",
        "16",
        "--concurrency",
        "2",
        "--request-count",
        requests,
        "--quiet",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = kneepoint(data, &args);
    assert!(o.status.success(), "{}", text(&o));
    o
}

fn recorded_id(o: &Output) -> String {
    let said = String::from_utf8_lossy(&o.stderr);
    said.split("recorded as run ")
        .nth(1)
        .unwrap_or_else(|| panic!("{said}"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

fn history(data: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["history", "--json"];
    args.extend_from_slice(extra);
    let o = kneepoint(data, &args);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice::<Value>(&o.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// 57.4: levels too small for an interval leave a 3x slowdown unjudged: exit 2 with the
/// reason, not a pass; `--point-comparisons` judges the values (exit 1).
#[test]
fn a_check_of_levels_too_small_for_intervals_gives_no_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let base = recorded_id(&sweep(&data, &tmp.path().join("a"), "8", "1", &[]));
    let slow = recorded_id(&sweep(&data, &tmp.path().join("b"), "8", "3", &[]));
    let o = kneepoint(&data, &["check", "--baseline", &base, "--run", &slow]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--point-comparisons"), "{}", text(&o));
    let o = kneepoint(
        &data,
        &[
            "check",
            "--baseline",
            &base,
            "--run",
            &slow,
            "--point-comparisons",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("regressed"), "{}", text(&o));
}

/// 57.5 and 57.15: a killed sweep whose folder kept no settings, imported, is not comparable
/// (exit 2); a records file cut in half imports as incomplete; a recommendation killed
/// before its summary imports from its candidates.
#[test]
fn killed_and_torn_folders_import_as_what_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let base = recorded_id(&sweep(&data, &tmp.path().join("a"), "24", "1", &[]));
    // killed: no summary, no level summary (the settings were in them)
    let killed = tmp.path().join("killed");
    sweep(&data, &killed, "24", "1", &["--no-store"]);
    std::fs::remove_file(killed.join("sweep_summary.json")).unwrap();
    std::fs::remove_file(killed.join("concurrency_2/profile_export_aiperf.json")).unwrap();
    let o = kneepoint(&data, &["import", killed.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let o = kneepoint(
        &data,
        &[
            "check",
            "--baseline",
            &base,
            "--run",
            killed.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("keeps no settings"), "{}", text(&o));
    // torn: the records file cut in half
    let torn = tmp.path().join("torn");
    sweep(&data, &torn, "24", "1", &["--no-store"]);
    let records = torn.join("concurrency_2/profile_export.jsonl");
    let bytes = std::fs::read(&records).unwrap();
    let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    std::fs::write(&records, lines[..lines.len() / 2].concat()).unwrap();
    let o = kneepoint(&data, &["import", torn.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    // a recommendation killed before it wrote recommendations.json
    let rec = tmp.path().join("rec");
    std::fs::create_dir_all(&rec).unwrap();
    sweep(
        &data,
        &rec.join("candidate_small"),
        "24",
        "1",
        &["--no-store"],
    );
    let o = kneepoint(&data, &["import", rec.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let runs = history(&data, &[]);
    let status = |dir: &Path| {
        let dir = std::fs::canonicalize(dir).unwrap();
        runs.iter()
            .find(|r| r["artifact_dir"] == dir.to_str().unwrap())
            .map(|r| (r["command"].clone(), r["status"].clone()))
            .unwrap_or_else(|| panic!("{} not stored: {runs:#?}", dir.display()))
    };
    assert_eq!(status(&torn).1, "incomplete");
    assert_eq!(status(&rec), ("recommend".into(), "incomplete".into()));
}

/// 57.6: a run whose store cannot be written keeps its labels in its folder: imported later,
/// it is found by them.
#[test]
fn labels_survive_the_recovery_path() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = tmp.path().join("run");
    let o = sweep(
        &data,
        &dir,
        "8",
        "1",
        &[
            "--store",
            "/dev/null/x/results.db",
            "--label",
            "pipeline=nightly",
        ],
    );
    assert!(text(&o).contains("not recorded"), "{}", text(&o));
    assert!(dir.join("labels.json").is_file());
    let o = kneepoint(&data, &["import", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let found = history(&data, &["--label", "pipeline=nightly"]);
    assert_eq!(found.len(), 1, "{found:#?}");
}

/// 57.7, 57.14, 57.16: a libpq string is PostgreSQL (its password never printed, no file made
/// of it); an in-memory SQLite store is refused before anything is measured; reads make no
/// store; an ambiguous prefix says so; a check that cannot run exits 2, not 1.
#[test]
fn locations_reads_and_prefixes_say_what_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let libpq = "host=127.0.0.1 port=1 user=u password=s3cretpw9 connect_timeout=2";
    let o = Command::new(BIN)
        .current_dir(tmp.path())
        .args(["history", "--store", libpq])
        .env("XDG_DATA_HOME", &data)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!text(&o).contains("s3cretpw9"), "{}", text(&o));
    assert!(text(&o).contains("PostgreSQL"), "{}", text(&o));
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "a file was made"
    );
    for store in ["sqlite://", ":memory:"] {
        let o = kneepoint(
            &data,
            &[
                "sweep",
                "--sim-profile",
                "fast",
                "--store",
                store,
                "--quiet",
            ],
        );
        assert!(!o.status.success());
        assert!(text(&o).contains("file path"), "{}", text(&o));
    }
    let nowhere = tmp.path().join("nonexistent/x/y.db");
    let o = kneepoint(
        &data,
        &[
            "check",
            "--store",
            nowhere.to_str().unwrap(),
            "--baseline",
            "latest",
            "--run",
            "latest",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!tmp.path().join("nonexistent").exists());
    let o = kneepoint(&data, &["history", "--store", nowhere.to_str().unwrap()]);
    assert!(
        o.status.success() && text(&o).contains("no runs"),
        "{}",
        text(&o)
    );
    assert!(!tmp.path().join("nonexistent").exists());
    // two runs, then a prefix of both
    let a = recorded_id(&sweep(&data, &tmp.path().join("a"), "8", "1", &[]));
    let b = recorded_id(&sweep(&data, &tmp.path().join("b"), "8", "1", &[]));
    let common: String = a
        .chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect();
    if common.len() >= 4 {
        let o = kneepoint(&data, &["check", "--baseline", &common, "--run", &b]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("names 2 runs"), "{}", text(&o));
    }
    let o = kneepoint(
        &data,
        &["check", "--baseline", "0000000000000000", "--run", &b],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// 57.15: one folder imported by four processes at once into a store none of them made: all
/// succeed, the run stored once.
#[test]
fn four_imports_at_once_store_the_run_once() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = tmp.path().join("run");
    sweep(&data, &dir, "8", "1", &["--no-store"]);
    let store = tmp.path().join("new/results.db");
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(BIN)
                .args([
                    "import",
                    "--store",
                    store.to_str().unwrap(),
                    dir.to_str().unwrap(),
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = kneepoint(
        &data,
        &["history", "--json", "--store", store.to_str().unwrap()],
    );
    let runs: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(runs.len(), 1, "{runs:#?}");
}
