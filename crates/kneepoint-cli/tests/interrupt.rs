//! Ctrl-C in the middle of a sweep: the binary stops, every finished request is in a valid
//! profile_export.jsonl, the level is written and marked partial, and the sweep summary says
//! it was interrupted. Two quick Ctrl-Cs quit at once, saying so, and `report` rebuilds the
//! summaries of the records left.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[cfg(unix)]
#[test]
fn sigint_mid_sweep_keeps_everything_measured() {
    let tmp = tempfile::tempdir().unwrap();
    // ~90 ms per request, 4 at a time, 2,000 requests: far longer than the test waits.
    let mut child = long_sweep(tmp.path());
    let jsonl = tmp.path().join("concurrency_4/profile_export.jsonl");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let t1 = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        assert!(
            t1.elapsed() < Duration::from_secs(30),
            "the sweep did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(130));

    let text = std::fs::read_to_string(&jsonl).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is valid JSON"))
        .collect();
    assert!(records.len() >= 20 && records.len() < 2000);
    let cancelled = records
        .iter()
        .filter(|r| r["metadata"]["was_cancelled"] == true)
        .count();
    assert!(
        cancelled <= 4,
        "at most the requests in flight are cancelled"
    );
    let ok = records.iter().filter(|r| r["error"].is_null()).count();
    assert_eq!(
        ok + records.iter().filter(|r| !r["error"].is_null()).count(),
        records.len()
    );

    let agg: serde_json::Value = serde_json::from_slice(
        &std::fs::read(tmp.path().join("concurrency_4/profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(agg["was_cancelled"], true);
    assert_eq!(agg["kneepoint"]["partial"], true);
    assert_eq!(agg["kneepoint"]["requests_recorded"], records.len());
    let summary =
        std::fs::read_to_string(tmp.path().join("concurrency_4/benchmark_summary.txt")).unwrap();
    assert!(summary.contains("PARTIAL"));
    let sweep: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("sweep_summary.json")).unwrap())
            .unwrap();
    assert_eq!(sweep["interrupted"], true);
    assert_eq!(sweep["complete"], false);
    assert_eq!(
        sweep["levels"].as_array().unwrap().len(),
        1,
        "the next level never ran"
    );
    assert!(!tmp.path().join("concurrency_8").exists());
}

/// Starts a long sweep into `dir` and waits for its first records.
fn long_sweep(dir: &std::path::Path) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args([
            "sweep",
            "--sim-profile",
            "fast",
            "--sim-time-scale",
            "1",
            "--concurrency",
            "4,8",
            "--request-count",
            "2000",
            "--isl",
            "32",
            "--osl",
            "16",
            "--quiet",
            "--artifact-dir",
            dir.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let jsonl = dir.join("concurrency_4/profile_export.jsonl");
    let t0 = Instant::now();
    while lines(&jsonl) < 20 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no records appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// Issue 46 item 12: `timeout` and supervisors send one signal to the process and one to its
/// group; two signals a few milliseconds apart are one request to stop, which writes every
/// summary.
#[cfg(unix)]
#[test]
fn two_signals_milliseconds_apart_are_one_orderly_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let child = long_sweep(tmp.path());
    let pid = child.id().to_string();
    for signal in ["-TERM", "-INT"] {
        let status = Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("second interrupt"), "{err}");
    let sweep: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("sweep_summary.json")).unwrap())
            .unwrap();
    assert_eq!(sweep["interrupted"], true);
    assert!(tmp
        .path()
        .join("concurrency_4/profile_export_aiperf.json")
        .exists());
}

/// Issue 34, item 5: after two quick Ctrl-Cs there was no `sweep_summary.json`, so `report`
/// refused a folder whose records were intact, and the second Ctrl-C printed nothing.
#[cfg(unix)]
#[test]
fn two_quick_interrupts_quit_and_report_rebuilds_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let child = long_sweep(tmp.path());
    let pid = child.id().to_string();
    let status = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(status.success());
    // A second press, after the half second within which a signal is the same request. The
    // orderly stop may have finished by then; either way, `report` rebuilds the folder.
    std::thread::sleep(Duration::from_millis(600));
    let second = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let err = String::from_utf8_lossy(&out.stderr);
    if second.success() && !err.contains("interrupted: everything measured so far is written") {
        assert!(err.contains("second interrupt: quitting at once"), "{err}");
    }

    let report = Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args(["report", tmp.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let sweep: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("sweep_summary.json")).unwrap())
            .unwrap();
    assert_eq!(sweep["interrupted"], true);
    assert_eq!(sweep["levels"].as_array().unwrap().len(), 1);
    let agg: serde_json::Value = serde_json::from_slice(
        &std::fs::read(tmp.path().join("concurrency_4/profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(agg["kneepoint"]["partial"], true);
    let whole = std::fs::read_to_string(tmp.path().join("concurrency_4/profile_export.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
        .count();
    assert_eq!(agg["kneepoint"]["requests_recorded"], whole);
}
