//! The printed table names a level whose server counted the prompts otherwise than the client
//! (another tokenizer on the server): the summary's ISL is what was sent, not what was
//! processed, and the user is told.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use kneepoint_core::ApproxTokenCounter;
use kneepoint_sim::{SimProfile, SimServer};

mod common;

#[test]
fn a_server_counting_prompts_otherwise_is_named_under_the_table() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A server that estimates prompt lengths from whitespace words (kneepoint's client tells
    // the built-in simulator the length only when it starts it itself, not at a --url).
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let counter = Arc::new(ApproxTokenCounter);
    let server = rt
        .block_on(SimServer::start_with_counter(
            SimProfile::fast(),
            addr,
            counter,
        ))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stdout = sweep_at(&server.base_url(), dir.path());
    let line = stdout
        .lines()
        .find(|l| l.starts_with("warning (concurrency 2): input lengths"))
        .unwrap_or_else(|| panic!("no ISL warning in:\n{stdout}"));
    assert!(line.contains("where the client counted 256.0"), "{line}");

    // `report` keeps the run's verdict: the saved warning, byte for byte...
    let level = dir.path().join("run/concurrency_2");
    let files = ["profile_export_aiperf.json", "benchmark_summary.txt"];
    let before: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(level.join(f)).unwrap())
        .collect();
    report(&dir.path().join("run"));
    for (f, b) in files.iter().zip(&before) {
        assert_eq!(&std::fs::read(level.join(f)).unwrap(), b, "{f} changed");
    }
    // ...and adds none to a level saved without one (as by a version without the check).
    let json = level.join("profile_export_aiperf.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let warnings = doc["kneepoint"]["warnings"].as_array_mut().unwrap();
    warnings.retain(|w| !w.as_str().unwrap().starts_with("input lengths"));
    std::fs::write(&json, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    report(&dir.path().join("run"));
    let text = std::fs::read_to_string(level.join("benchmark_summary.txt")).unwrap();
    assert!(!text.contains("input lengths"), "{text}");
}

/// `kneepoint report DIR`.
fn report(dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .arg("report")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kneepoint sweep --url URL` of two small levels; its stdout.
fn sweep_at(url: &str, dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args(["sweep", "--url", url, "--concurrency", "2"])
        .args([
            "--request-count",
            "8",
            "--isl",
            "256",
            "--osl",
            "8",
            "--quiet",
        ])
        .arg("--artifact-dir")
        .arg(dir.join("run"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn sim_serve_counting_with_the_builtin_tokenizer_agrees_with_the_client() {
    let flags = [
        "--profile",
        "fast",
        "--time-scale",
        "1",
        "--prompt-tokens",
        "builtin",
    ];
    let (mut child, url) = common::sim_serve(&flags);
    let dir = tempfile::tempdir().unwrap();
    let stdout = sweep_at(&url, dir.path());
    let _ = child.kill();
    let _ = child.wait();
    assert!(!stdout.contains("input lengths"), "{stdout}");
}
