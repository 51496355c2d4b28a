//! Issue 47: `compare` refuses runs that measured different things (a lighter workload is not
//! an improvement), exit 2 naming what differs; `--force` compares them anyway.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");

fn sweep(dir: &Path, isl: &str) {
    let out = Command::new(BIN)
        .args(["sweep", "--sim-profile", "fast", "--sim-time-scale", "1"])
        .args(["--concurrency", "2", "--request-count", "24", "--osl", "4"])
        .args(["--isl", isl, "--quiet", "--artifact-dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn runs_of_different_workloads_are_refused_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    sweep(&a, "16");
    sweep(&b, "32");
    let out = Command::new(BIN)
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("workload.isl") && err.contains("--force"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("regressed"));
    let forced = Command::new(BIN)
        .args(["compare", "--force"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_ne!(forced.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&forced.stdout).contains("concurrency"));
}
