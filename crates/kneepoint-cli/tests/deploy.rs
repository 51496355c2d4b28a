//! `kneepoint recommend` launching its candidates: local servers (`kneepoint sim serve` with a
//! matrix of `--max-num-seqs` values, a fourth with a flag the server refuses) are started one
//! at a time, measured, stopped and ranked; nothing of the run is left and the ports are free.
//! Then Ctrl-C during the second candidate's measurement: exit 130, the first candidate's
//! results kept, the running server stopped. The binary runs as a child process, so the
//! processes it launched are told apart by their tag (`KNEEPOINT_DEPLOYMENT=<its pid>:...`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");

/// A recommendation of local `sim serve` candidates (steps of 5 ms, 4 output tokens: a batch
/// limit of 1 against 16 is a tenfold difference in throughput, whatever the machine's load).
fn config(dir: &Path, matrix: &str, levels: &str, extra: &str) -> String {
    format!(
        r#"
objective = "throughput"
artifact_dir = {out:?}

[workload]
prompt_input_tokens_mean = 32
output_tokens_mean = 4

[sweep_params]
concurrency = [{levels}]
request_count = 32

[[candidates]]
name = "sim"
instance_type = "local"
price_per_hour = 2.0
[candidates.deploy]
command = ["{{kneepoint}}", "sim", "serve", "--port", "{{port}}", "--profile", "fast", "--time-scale", "1", "--max-num-seqs", "{{max_num_seqs}}"]
ready_path = "/health"
ready_timeout_s = 120
stop_grace_s = 10
[candidates.deploy.kubernetes]
image = "kneepoint:latest"
[candidates.matrix]
max_num_seqs = [{matrix}]
{extra}
"#,
        out = dir.join("out"),
    )
}

/// Processes still running that the kneepoint process `launcher` launched.
fn launched_by(launcher: u32) -> Vec<(i32, String)> {
    kneepoint_deploy::launched_by(launcher)
}

/// The ports the launched servers used (from each candidate's recipe), all free again.
fn assert_ports_free(doc: &Value) {
    for c in doc["candidates"].as_array().unwrap() {
        let Some(ready) = c["deployment"]["recipe"]["ready"].as_str() else {
            continue;
        };
        let port: u16 = ready
            .trim_start_matches("http://127.0.0.1:")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        std::net::TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("port {port} of {} is still taken: {e}", c["name"]));
    }
}

#[test]
fn launched_candidates_are_measured_stopped_and_ranked() {
    let tmp = tempfile::tempdir().unwrap();
    let broken = format!(
        r#"
[[candidates]]
name = "broken"
instance_type = "local"
price_per_hour = 2.0
[candidates.deploy]
command = [{BIN:?}, "sim", "serve", "--port", "{{port}}", "--no-such-engine-flag"]
ready_timeout_s = 60
"#
    );
    std::fs::write(
        tmp.path().join("rec.toml"),
        config(tmp.path(), "1, 4, 16", "2, 8, 64", &broken),
    )
    .unwrap();
    let child = Command::new(BIN)
        .args(["recommend", "--config"])
        .arg(tmp.path().join("rec.toml"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("out/recommendations.json")).unwrap(),
    )
    .unwrap();
    let by_name = |n: &str| {
        doc["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == n)
            .unwrap_or_else(|| panic!("{n} missing: {doc}"))
            .clone()
    };
    // The broken candidate is listed with the server's own words; the others still rank.
    let b = by_name("broken");
    assert!(b["rank"].is_null(), "{b}");
    let why = b["explanation"].as_str().unwrap_or_default().to_owned()
        + b["unmet_reason"].as_str().unwrap_or_default();
    assert!(
        why.contains("unexpected argument '--no-such-engine-flag'"),
        "the server's error line is in the reason: {b}"
    );
    // The ranking by throughput agrees with each launched server's measured throughput.
    let ranked: Vec<(String, f64)> = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["rank"].is_u64())
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["point"]["output_token_throughput"].as_f64().unwrap(),
            )
        })
        .collect();
    let names: Vec<&str> = ranked.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "sim max_num_seqs=16",
            "sim max_num_seqs=4",
            "sim max_num_seqs=1"
        ],
        "{doc}"
    );
    assert!(ranked.windows(2).all(|w| w[0].1 >= w[1].1), "{ranked:?}");
    assert!(
        ranked[0].1 > 4.0 * ranked[2].1,
        "a batch of 16 carries several times a batch of 1: {ranked:?}"
    );
    // Each launch is recorded: how it was started, how long it was up, what that cost.
    for (name, _) in &ranked {
        let d = &by_name(name)["deployment"];
        let argv = d["recipe"]["argv"].as_array().unwrap();
        let seqs = name.rsplit('=').next().unwrap();
        assert!(argv.iter().any(|a| a == seqs), "{d}");
        assert!(d["teardown_error"].is_null(), "{d}");
        let up = d["up_s"].as_f64().unwrap();
        assert!(up > 0.0 && d["launch_s"].as_f64().unwrap() <= up, "{d}");
        let cost = d["benchmark_cost"].as_f64().unwrap();
        assert!((cost - up / 3600.0 * 2.0).abs() < 1e-9, "{d}");
        let log = tmp
            .path()
            .join("out")
            .join(by_name(name)["artifact_dir"].as_str().unwrap());
        let manifest = log.join("kubernetes/deployment.json");
        let log = std::fs::read_to_string(log.join("logs/server.log")).unwrap();
        assert!(log.contains("kneepoint-sim (fast profile"), "{log}");
        // The same server as a Kubernetes Deployment: the container's command is the one
        // run here, on the container's port.
        let m: Value = serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
        let c = &m["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "kneepoint:latest");
        assert_eq!(c["command"][0], "kneepoint");
        assert_eq!(c["command"][4], "8000");
        assert_eq!(c["command"][10], seqs);
        assert_eq!(d["recipe"]["kubernetes"][1]["kind"], "Service");
    }
    assert!(
        stdout.contains("deploy sim max_num_seqs=16 with: ")
            && stdout.contains("--max-num-seqs 16"),
        "{stdout}"
    );
    assert!(b["artifact_dir"].is_null(), "no run to show: {b}");
    assert!(
        tmp.path().join("out/report.html").is_file(),
        "the recommendation's page"
    );
    // Nothing of the run is left, and the ports are free.
    assert!(launched_by(launcher).is_empty());
    assert_ports_free(&doc);
    let left = Command::new(BIN)
        .args(["cleanup", "--dry-run"])
        .output()
        .unwrap();
    assert!(left.status.success());
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(
        !left.contains(&format!("launched by pid {launcher})")),
        "{left}"
    );
}

#[cfg(unix)]
#[test]
fn ctrl_c_during_the_second_candidate_stops_its_server_and_keeps_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    // Candidate 1 (a batch of 16) is quick; candidate 2 (a batch of 1, 2,000 requests at a
    // level) takes far longer than the test waits.
    let cfg =
        config(tmp.path(), "16, 1", "4", "").replace("request_count = 32", "request_count = 2000");
    std::fs::write(tmp.path().join("rec.toml"), cfg).unwrap();
    let mut child = Command::new(BIN)
        .args(["recommend", "--quiet", "--config"])
        .arg(tmp.path().join("rec.toml"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let records = tmp
        .path()
        .join("out/candidate_sim_max_num_seqs_1/concurrency_4/profile_export.jsonl");
    let t0 = Instant::now();
    while std::fs::read_to_string(&records).map_or(0, |s| s.lines().count()) < 5 {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "the second candidate never started measuring"
        );
        assert!(child.try_wait().unwrap().is_none(), "exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(launched_by(child.id()).len(), 1, "the second server runs");
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(120),
            "still running after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    assert!(
        launched_by(child.id()).is_empty(),
        "the running server was stopped"
    );
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("out/recommendations.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(doc["interrupted"], true);
    let first = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "sim max_num_seqs=16")
        .unwrap();
    assert!(
        first["point"]["output_token_throughput"].as_f64().unwrap() > 0.0,
        "{first}"
    );
    assert!(first["deployment"]["teardown_error"].is_null(), "{first}");
    assert_ports_free(&doc);
}

#[test]
fn without_a_matrix_the_objective_proposes_the_engine_settings_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    // The command names {max_num_seqs} and nothing gives it: latency proposes 16 and 64.
    let cfg = config(tmp.path(), "1", "2, 8", "")
        .replace("objective = \"throughput\"", "objective = \"latency\"")
        .replace("[candidates.matrix]\nmax_num_seqs = [1]\n", "");
    assert!(!cfg.contains("[candidates.matrix]"), "{cfg}");
    std::fs::write(tmp.path().join("rec.toml"), cfg).unwrap();
    let out = Command::new(BIN)
        .args(["recommend", "--config"])
        .arg(tmp.path().join("rec.toml"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(
            "tried: candidate \"sim\": max_num_seqs = 16, 64 proposed for Latency: small batches"
        ),
        "{stdout}"
    );
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("out/recommendations.json")).unwrap(),
    )
    .unwrap();
    let mut names: Vec<&str> = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["sim max_num_seqs=16", "sim max_num_seqs=64"]);
    assert!(
        doc["proposals"][0]
            .as_str()
            .unwrap()
            .contains("small batches"),
        "{doc}"
    );
}

/// Issue 46 item 7: a server that exits part way through its measurement (here killed during
/// its second timed level) is not ranked on the level it measured before, and its exit status
/// and log are named.
#[test]
fn a_server_that_exits_mid_measurement_is_named_and_not_ranked() {
    let tmp = tempfile::tempdir().unwrap();
    let text = common::recommend_file(
        &tmp.path().join("out"),
        r#"
[sweep_params]
concurrency = [2, 4]

[load]
duration_s = 4

[[candidates]]
name = "dies"
instance_type = "local"
price_per_hour = 1.0
[candidates.deploy]
command = ["sh", "-c", "\"$0\" sim serve --port {port} --profile fast --time-scale 1 & sleep 6; kill -9 $!; echo 'fatal: engine died'; exit 7", "{kneepoint}"]
ready_path = "/health"
ready_timeout_s = 120
stop_grace_s = 5
"#,
    );
    std::fs::write(tmp.path().join("rec.toml"), text).unwrap();
    let out = Command::new(BIN)
        .args(["recommend", "--config"])
        .arg(tmp.path().join("rec.toml"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("out/recommendations.json")).unwrap(),
    )
    .unwrap();
    let c = &doc["candidates"][0];
    assert!(c["rank"].is_null(), "{c}");
    let why = c["explanation"].to_string();
    assert!(why.contains("exited during the measurement"), "{why}");
    assert!(
        why.contains("exit status: 7") && why.contains("engine died"),
        "{why}"
    );
    assert!(stderr.contains("is not ranked"), "{stderr}");
    // Nothing was measured that can be recommended: the run says so and fails (item 16).
    assert!(!out.status.success(), "{stdout}\n{stderr}");
}

/// The running processes whose command line holds `marker`.
fn running_with(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'));
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            !zombie && cmd.contains(marker)
        })
        .collect()
}

/// Issue 46 item 5: a daemon that leaves the server's process group and session and drops
/// the `KNEEPOINT_DEPLOYMENT` tag is still stopped with the server.
#[test]
fn a_daemon_that_leaves_the_group_and_drops_the_tag_is_stopped_too() {
    let tmp = tempfile::tempdir().unwrap();
    // A sleep no other process runs: its length is this test's pid.
    let marker = format!("{}.5", 100_000 + std::process::id());
    let text = common::recommend_file(
        &tmp.path().join("out"),
        &format!(
            r#"
[sweep_params]
concurrency = [2]
request_count = 32

[[candidates]]
name = "daemonizes"
instance_type = "local"
price_per_hour = 1.0
[candidates.deploy]
command = ["sh", "-c", "env -u KNEEPOINT_DEPLOYMENT setsid sleep {marker} & exec \"$0\" sim serve --port {{port}} --profile fast --time-scale 1", "{{kneepoint}}"]
ready_path = "/health"
ready_timeout_s = 120
stop_grace_s = 5
"#
        ),
    );
    std::fs::write(tmp.path().join("rec.toml"), text).unwrap();
    let out = Command::new(BIN)
        .args(["recommend", "--config"])
        .arg(tmp.path().join("rec.toml"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let left = running_with(&format!("sleep {marker}"));
    for pid in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(
        left.is_empty(),
        "the daemon outlived the run: {left:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("taking it down failed"));
}
