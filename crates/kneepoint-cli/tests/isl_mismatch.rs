//! The printed table names a level whose server counted the prompts otherwise than the client
//! (another tokenizer on the server): the summary's ISL is what was sent, not what was
//! processed, and the user is told.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use kneepoint_core::ApproxTokenCounter;
use kneepoint_sim::{SimProfile, SimServer};

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
    let mut child = Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args([
            "sim",
            "serve",
            "--port",
            "0",
            "--profile",
            "fast",
            "--time-scale",
            "1",
        ])
        .args(["--prompt-tokens", "builtin"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split("listening on ")
        .nth(1)
        .unwrap()
        .trim()
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let stdout = sweep_at(&url, dir.path());
    let _ = child.kill();
    let _ = child.wait();
    assert!(!stdout.contains("input lengths"), "{stdout}");
}
