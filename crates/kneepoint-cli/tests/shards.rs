//! `--shard K/N` and `kneepoint merge`: four shard processes of the `kneepoint` binary,
//! started together with `--start-at`, against one simulator, merge into levels that agree
//! with one process at the same total concurrency, with one record per request; incomplete
//! sets and shards of different workloads are refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use kneepoint_sim::{SimProfile, SimServer};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");

/// `kneepoint sweep` of the simulator at 8 and 32 concurrent, 128 requests each (ISL 64, OSL
/// 16 unless `extra` says otherwise).
fn sweep(url: &str, dir: &Path, extra: &[&str]) -> std::process::Child {
    let osl = if extra.contains(&"--osl") {
        &[][..]
    } else {
        &["--osl", "16"][..]
    };
    Command::new(BIN)
        .args([
            "sweep",
            "--url",
            url,
            "--concurrency",
            "8,32",
            "--request-count",
            "128",
            "--isl",
            "64",
            "--quiet",
            "--no-server-metrics",
            "--artifact-dir",
        ])
        .arg(dir)
        .args(osl)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn level(dir: &Path, c: u32) -> Value {
    let p = dir.join(format!("concurrency_{c}/profile_export_aiperf.json"));
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn stat(doc: &Value, metric: &str, s: &str) -> f64 {
    doc[metric][s]
        .as_f64()
        .unwrap_or_else(|| panic!("{metric} {s} in {doc}"))
}

fn merge(out: &Path, shards: &[PathBuf]) -> std::process::Output {
    Command::new(BIN)
        .arg("merge")
        .arg("--out")
        .arg(out)
        .args(shards)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_shard_processes_merge_into_what_one_process_measures() {
    // 10 ms steps: the simulator, not five busy clients on two cores, sets the pace.
    let mut profile = SimProfile::fast();
    profile.step_base_ms = 10.0;
    let server = SimServer::start_local(profile).await.unwrap();
    let url = server.base_url();
    let tmp = tempfile::tempdir().unwrap();
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3;
    let shards: Vec<PathBuf> = (0..4)
        .map(|k| tmp.path().join(format!("shard{k}")))
        .collect();
    let mut children: Vec<_> = shards
        .iter()
        .enumerate()
        .map(|(k, d)| {
            sweep(
                &url,
                d,
                &[
                    "--shard",
                    &format!("{k}/4"),
                    "--start-at",
                    &start.to_string(),
                ],
            )
        })
        .collect();
    for c in &mut children {
        assert!(tokio::task::block_in_place(|| c.wait()).unwrap().success());
    }
    let one = tmp.path().join("one");
    assert!(
        tokio::task::block_in_place(|| sweep(&url, &one, &[]).wait())
            .unwrap()
            .success()
    );
    // Each shard ran its share: 2 and 8 slots, 32 requests per level.
    let s1: Value =
        serde_json::from_slice(&std::fs::read(shards[1].join("sweep_summary.json")).unwrap())
            .unwrap();
    assert_eq!(
        s1["settings"]["shard"],
        serde_json::json!({"index": 1, "count": 4, "levels": [8, 32]})
    );
    assert_eq!(s1["levels"][0]["concurrency"], 2);
    assert_eq!(s1["levels"][1]["request_count"], 32);

    let out = tmp.path().join("merged");
    let o = tokio::task::block_in_place(|| merge(&out, &shards));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("merged 4 shards"), "{text}");
    for c in [8, 32] {
        let m = level(&out, c);
        let s = level(&one, c);
        // One record per request sent, none lost or doubled.
        let lines =
            std::fs::read_to_string(out.join(format!("concurrency_{c}/profile_export.jsonl")))
                .unwrap();
        assert_eq!(
            lines
                .lines()
                .filter(|l| l.contains("\"profiling\""))
                .count(),
            128
        );
        assert_eq!(stat(&m, "request_count", "avg"), 128.0);
        // The same total load on the same server: throughput within 25 %, latency medians
        // within 40 % (run-to-run noise on a busy 2-core machine; the fast profile's steps are
        // 5 ms, so a scheduling hiccup moves a median by a step).
        let (mt, st) = (
            stat(&m, "output_token_throughput", "avg"),
            stat(&s, "output_token_throughput", "avg"),
        );
        assert!(
            (mt / st - 1.0).abs() < 0.25,
            "c={c}: merged {mt} vs one {st}"
        );
        for metric in ["request_latency", "time_to_first_token"] {
            let (a, b) = (stat(&m, metric, "p50"), stat(&s, metric, "p50"));
            assert!(
                (a / b - 1.0).abs() < 0.4,
                "c={c} {metric}: merged {a} vs one {b}"
            );
        }
    }
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("merge_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["shards"], 4);
    assert!(summary["levels"][0]["start_skew_ms"].as_f64().unwrap() < 2000.0);
    assert!(out.join("report.html").is_file() && out.join("logs/kneepoint.log").is_file());

    // Three of four shards are not a sweep.
    let o = merge(&tmp.path().join("partial"), &shards[..3]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected shards 0..4"));
    // A shard of another workload is refused.
    let other = tmp.path().join("other");
    let mut c = sweep(&url, &other, &["--shard", "3/4", "--osl", "8"]);
    assert!(tokio::task::block_in_place(|| c.wait()).unwrap().success());
    let mixed = [
        shards[0].clone(),
        shards[1].clone(),
        shards[2].clone(),
        other,
    ];
    let o = merge(&tmp.path().join("mixed"), &mixed);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("different workloads"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A run that is not a shard is named.
    let o = merge(&tmp.path().join("x"), &[one]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a shard's run"));
}

#[test]
fn shard_flags_are_checked() {
    use clap::Parser;
    let bad = |args: &[&str]| {
        let mut v = vec!["kneepoint", "sweep", "--quiet"];
        v.extend_from_slice(args);
        let kneepoint_cli::Command::Sweep(a) =
            kneepoint_cli::Cli::try_parse_from(v).unwrap().command
        else {
            panic!()
        };
        kneepoint_cli::SweepSettings::resolve(&a)
            .unwrap_err()
            .to_string()
    };
    assert!(bad(&["--shard", "4/4"]).contains("K/N"));
    // Every shard must measure the same server.
    assert!(bad(&["--shard", "0/4"]).contains("--url"));
    assert!(bad(&[
        "--shard",
        "0/4",
        "--url",
        "http://127.0.0.1:9",
        "--concurrency",
        "2"
    ])
    .contains("cannot be split"));
    assert!(bad(&["--start-at", "2036-01-01T00:00:00Z"]).contains("7 days"));
    assert!(bad(&["--start-at", "tomorrow"]).contains("--start-at"));
}
