//! The live view: on a terminal (a tmux pane, read back with `capture-pane`), a panel under the
//! level's bar with requests done and in flight, throughput, TTFT/ITL percentiles so far,
//! errors and the server's running / waiting / KV usage; without a terminal, plain lines.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_kneepoint");

/// A sweep long enough to be watched: the fast simulator at 16 concurrent, 600 requests
/// (measured: about 5 s), its /metrics scraped every 0.2 s.
fn sweep_args(dir: &std::path::Path) -> Vec<String> {
    [
        "sweep",
        "--sim-profile",
        "fast",
        "--concurrency",
        "16",
        "--request-count",
        "600",
        "--server-metrics-interval",
        "0.2",
        "--artifact-dir",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([dir.display().to_string()])
    .collect()
}

#[test]
fn without_a_terminal_the_figures_are_plain_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(EXE)
        .args(sweep_args(tmp.path()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("concurrency 16: done 600/600"))
        .unwrap_or_else(|| panic!("no final line in:\n{err}"));
    assert!(line.contains("in flight 0"), "{line}");
    assert!(
        line.contains("TTFT p50 ") && line.contains("errors 0"),
        "{line}"
    );
    assert!(line.contains("| server running "), "{line}");
    // No bar drawing escapes when stderr is not a terminal.
    assert!(!err.contains('\u{1b}'), "{err}");
}

#[test]
fn on_a_terminal_a_live_panel_shows_the_level_and_the_server() {
    if Command::new("tmux").arg("-V").output().is_err() {
        // `.ci/run` installs tmux; a machine with only the Rust toolchain has none.
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is missing in CI: .ci/run installs it"
        );
        eprintln!("tmux is not installed: the live view is checked where it is (.ci/run)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let session = "live";
    // A private tmux server (its own socket), killed at the end: the user's sessions are
    // never touched.
    let socket = format!("kneepoint-live-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", socket.as_str()])
            .args(args)
            .output()
            .unwrap()
    };
    let args: Vec<String> = sweep_args(&tmp.path().join("run"))
        .into_iter()
        .map(|a| format!("'{a}'"))
        .collect();
    // stdout to a file (the final table), stderr to the pane (the live view).
    let command = format!(
        "{EXE} {} > {}/stdout.txt; sleep 30",
        args.join(" "),
        tmp.path().display()
    );
    let started = tmux(&[
        "new-session",
        "-d",
        "-x",
        "220",
        "-y",
        "12",
        "-s",
        session,
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    let capture = || {
        let out = tmux(&["capture-pane", "-p", "-t", session]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Watch the pane until the panel shows the server's state mid-level (a wide bound: the
    // level lasts about 5 s; a loaded machine may take longer to start).
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = None;
    while Instant::now() < deadline {
        let pane = capture();
        if pane.contains("in flight") && pane.contains("| server running") {
            seen = Some(pane);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pane_at_end = capture();
    tmux(&["kill-server"]);
    let pane = seen.unwrap_or_else(|| panic!("no live panel in the pane:\n{pane_at_end}"));
    let bar = pane
        .lines()
        .find(|l| l.contains("concurrency 16") && l.contains("requests"))
        .unwrap_or_else(|| panic!("no bar in:\n{pane}"));
    assert!(bar.contains("/600 requests"), "{bar}");
    let panel = pane
        .lines()
        .find(|l| l.contains("in flight"))
        .unwrap_or_else(|| panic!("no panel in:\n{pane}"));
    for part in [
        "done ", "tok/s", "TTFT p50", "ITL p95", "errors 0", "waiting", "KV ",
    ] {
        assert!(panel.contains(part), "{part:?} missing from {panel:?}");
    }
}
