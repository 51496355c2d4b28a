//! Issue 34, item 1: `kneepoint sweep --concurrency 1000000` under `ulimit -v 2000000` (inside
//! the documented cap of a million) prepared four million prompts and aborted on a failed
//! allocation. A concurrency this machine cannot hold is now refused before anything is sent,
//! with the reason: file descriptors over HTTP/1.1, memory over HTTP/2.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary with `args` under a 2 GB address-space limit; its exit code and stderr.
fn under_two_gigabytes(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -v 2000000 && exec "$@""#)
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_kneepoint"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A refusal takes milliseconds; a run that was not refused is stopped here (generous, as
    // this machine may be busy) and fails the test below.
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_million_connections_are_refused_before_anything_is_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let dir = dir.to_str().unwrap();
    let (code, err) =
        under_two_gigabytes(&["sweep", "--concurrency", "1000000", "--artifact-dir", dir]);
    assert_eq!(code, Some(1), "{err}");
    // The descriptors run out first wherever the hard limit is below two million (the
    // simulator's side of each connection is in this process too); memory otherwise.
    assert!(
        err.contains("1000000 concurrent connections need about 2000064 file descriptors")
            || err.contains("1000000 streams in flight"),
        "{err}"
    );
    let (code, err) = under_two_gigabytes(&[
        "sweep",
        "--concurrency",
        "1000000",
        "--http2",
        "--artifact-dir",
        dir,
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("1000000 streams in flight") && err.contains("ulimit -v"),
        "{err}"
    );
    assert!(!tmp.path().join("run").exists(), "nothing was written");
}

/// Issue 34, item 5: a disk filling up mid-level reported "record sink … failed" without the
/// OS error, in colour on a stderr that was not a terminal, and not in `logs/kneepoint.log`.
/// A file-size limit (`ulimit -f`, with SIGXFSZ ignored so that writes fail with EFBIG, as
/// they fail with ENOSPC on a full disk) stops the records file at 300 KB here.
#[test]
fn records_that_cannot_be_written_are_reported_with_the_os_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 600 && exec "$@""#)
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_kneepoint"))
        .args([
            "sweep",
            "--sim-profile",
            "fast",
            "--sim-time-scale",
            "1",
            "--concurrency",
            "4",
            "--request-count",
            "1000",
            "--isl",
            "16",
            "--osl",
            "4",
            "--inputs-limit",
            "10",
            "--artifact-dir",
            dir.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let cause = "profile_export.jsonl failed: File too large (os error 27)";
    assert!(err.contains(cause), "{err}");
    assert!(!err.contains('\u{1b}'), "no colour on a pipe: {err}");
    let log = std::fs::read_to_string(dir.join("logs/kneepoint.log")).unwrap();
    assert!(
        log.lines().any(|l| l.contains("WARN") && l.contains(cause)),
        "{log}"
    );
    // Sending stopped at the failure; the records in memory made the level's summary.
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("concurrency_4/profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    let warnings = doc["kneepoint"]["warnings"].to_string();
    assert!(warnings.contains("records not stored"), "{warnings}");
    assert!(warnings.contains("os error 27"), "{warnings}");
    assert_eq!(doc["kneepoint"]["partial"], true);
}
