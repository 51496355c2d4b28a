//! Ctrl-C in the middle of a sweep: the binary stops, every finished request is in a valid
//! profile_export.jsonl, the level is written and marked partial, and the sweep summary says
//! it was interrupted. Two quick Ctrl-Cs quit at once, saying so, and `report` rebuilds the
//! summaries of the records left. A hangup (a closed terminal) stops a recommendation as
//! SIGTERM does, its launched server taken down, unless SIGHUP was ignored at start (`nohup`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
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
fn long_sweep(dir: &Path) -> std::process::Child {
    long_sweep_under(dir, Command::new(env!("CARGO_BIN_EXE_kneepoint")))
}

/// [`long_sweep`] started by `cmd`: kneepoint, or a shell that execs it, the sweep's
/// arguments added.
fn long_sweep_under(dir: &Path, mut cmd: Command) -> std::process::Child {
    let child = cmd
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

/// Whether this process ignores SIGHUP (the tests run under `nohup`): a kneepoint started
/// from it does too, and rightly leaves a hangup ignored.
#[cfg(target_os = "linux")]
fn hangup_ignored_here() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        })
        .is_some_and(|mask| mask & 1 != 0)
}

/// Records written so far by the candidates of a recommendation into `out`.
#[cfg(target_os = "linux")]
fn measured(out: &Path) -> usize {
    std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| lines(&e.path().join("concurrency_4/profile_export.jsonl")))
        .sum()
}

/// Issue 57 item 13: SIGHUP (a closed terminal) ended `kneepoint recommend` without its
/// teardown, and the server it launched ran on, reparented to PID 1. A hangup now stops the
/// run as SIGTERM does: what was measured is written, the server taken down, exit 130.
#[cfg(target_os = "linux")]
#[test]
fn a_hangup_tears_down_the_launched_server_as_sigterm_does() {
    if hangup_ignored_here() {
        eprintln!("skipped: SIGHUP is ignored here (nohup), and kneepoint rightly keeps it so");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // One candidate with a batch of 1 and 2,000 requests: far longer than the test waits.
    let config = format!(
        r#"
objective = "throughput"
artifact_dir = {out:?}

[workload]
prompt_input_tokens_mean = 32
output_tokens_mean = 4

[sweep_params]
concurrency = [4]
request_count = 2000

[[candidates]]
name = "sim"
instance_type = "local"
price_per_hour = 2.0
[candidates.deploy]
command = ["{{kneepoint}}", "sim", "serve", "--port", "{{port}}", "--profile", "fast", "--time-scale", "1", "--max-num-seqs", "1"]
ready_path = "/health"
ready_timeout_s = 120
stop_grace_s = 10
"#
    );
    std::fs::write(tmp.path().join("rec.toml"), config).unwrap();
    let log = tmp.path().join("stderr.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args(["recommend", "--quiet", "--config"])
        .arg(tmp.path().join("rec.toml"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let stderr = || std::fs::read_to_string(&log).unwrap_or_default();
    let t0 = Instant::now();
    while measured(&out) < 5 {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "the candidate never started measuring"
        );
        assert!(child.try_wait().unwrap().is_none(), "exited: {}", stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = child.id();
    assert_eq!(
        kneepoint_deploy::launched_by(pid).len(),
        1,
        "the server runs"
    );
    let sent = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t1.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("still running after SIGHUP: {}", stderr());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // A server left running fails the test, and is stopped here all the same.
    let left = kneepoint_deploy::launched_by(pid);
    for (server, _) in &left {
        let _ = Command::new("kill")
            .args(["-9", &server.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "the launched server outlived kneepoint: {left:?}"
    );
    assert_eq!(status.code(), Some(130), "{status}: {}", stderr());
    assert!(stderr().contains("interrupt: cancelling"), "{}", stderr());
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("recommendations.json")).unwrap()).unwrap();
    assert_eq!(doc["interrupted"], true);
    for c in doc["candidates"].as_array().unwrap() {
        assert!(c["deployment"]["teardown_error"].is_null(), "{c}");
    }
}

/// Issue 57 item 13, the other side: SIGHUP ignored at start (`nohup`; here the shell's
/// `trap '' HUP`) stays ignored, and the run goes on through a hangup.
#[cfg(target_os = "linux")]
#[test]
fn a_hangup_ignored_at_start_stays_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sh = Command::new("sh");
    sh.args([
        "-c",
        "trap '' HUP; exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_kneepoint"),
    ]);
    let mut child = long_sweep_under(tmp.path(), sh);
    let pid = child.id().to_string();
    let jsonl = tmp.path().join("concurrency_4/profile_export.jsonl");
    let sent = Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    assert!(sent.success());
    std::thread::sleep(Duration::from_secs(2));
    let before = lines(&jsonl);
    std::thread::sleep(Duration::from_millis(500));
    let going_on = child.try_wait().unwrap().is_none() && lines(&jsonl) > before;
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(going_on, "a hangup under nohup stopped the sweep: {err}");
    assert_eq!(out.status.code(), Some(130), "{err}");
}
