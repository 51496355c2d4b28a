//! `--reset-prefix-cache` (issue 31): the server's prefix cache emptied before every level and
//! every run of one, through the server's own route, and a server without it refused before
//! anything is measured.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use clap::Parser;
use kneepoint_cli::{run_sweep, Cli, Command, SweepSettings};
use kneepoint_sim::{SimProfile, SimServer};
use serde_json::Value;

fn settings(url: &str, dir: &std::path::Path, levels: &str, extra: &[&str]) -> SweepSettings {
    let mut args = vec![
        "kneepoint",
        "sweep",
        "--url",
        url,
        "--concurrency",
        levels,
        "--request-count",
        "4",
        "--isl",
        "32",
        "--osl",
        "4",
        "--no-server-metrics",
        "--quiet",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let Command::Sweep(a) = Cli::try_parse_from(args).unwrap().command else {
        panic!("not a sweep")
    };
    SweepSettings::resolve(&a).unwrap()
}

/// The simulator's count of `POST /reset_prefix_cache` calls, from its `/metrics`.
async fn resets(server: &SimServer) -> f64 {
    let fetch =
        kneepoint_transport::Fetcher::new(&kneepoint_transport::ConnectOptions::default()).unwrap();
    let url = format!("{}/metrics", server.base_url());
    let page = kneepoint_core::Fetch::get(&fetch, &url, Duration::from_secs(10), 1 << 20)
        .await
        .unwrap();
    let text = String::from_utf8(page.body).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("kneepoint_sim:prefix_cache_resets_total"))
        .unwrap();
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_is_reset_before_every_level_and_every_run() {
    let server = SimServer::start_local(SimProfile::fast()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(resets(&server).await, 0.0);
    let s = settings(
        &server.base_url(),
        tmp.path(),
        "1,2",
        &["--num-runs", "2", "--reset-prefix-cache"],
    );
    let out = run_sweep(&s, false).await.unwrap();
    assert_eq!(out.rows.len(), 2);
    // one tried while the run is prepared, then one before each of two levels × two runs, at
    // the server's root (the URL's /v1 is the API's)
    assert_eq!(resets(&server).await, 5.0);
    for dir in ["concurrency_1", "concurrency_2/profile_runs/run_0002"] {
        let doc: Value = serde_json::from_slice(
            &std::fs::read(tmp.path().join(dir).join("profile_export_aiperf.json")).unwrap(),
        )
        .unwrap();
        let reset = &doc["input_config"]["prefix_cache_reset"];
        assert_eq!(reset["status"], 200, "{dir}: {reset}");
        assert!(reset["url"]
            .as_str()
            .unwrap()
            .ends_with("/reset_prefix_cache"));
    }
    // without the flag, nothing is reset
    let again = settings(&server.base_url(), &tmp.path().join("plain"), "1,2", &[]);
    run_sweep(&again, false).await.unwrap();
    assert_eq!(resets(&server).await, 5.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_the_route_is_refused_before_any_level_runs() {
    let server = SimServer::start_local(SimProfile::fast()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let missing = format!("{}/no_such_route", server.base_url());
    let s = settings(
        &server.base_url(),
        tmp.path(),
        "1,2",
        &["--reset-prefix-cache", &missing],
    );
    let e = format!("{:#}", run_sweep(&s, false).await.unwrap_err());
    assert!(
        e.contains("404") && e.contains("VLLM_SERVER_DEV_MODE"),
        "{e}"
    );
    // tried before anything is made: no level, no run log
    assert!(!tmp
        .path()
        .join("concurrency_1/profile_export.jsonl")
        .exists());
    assert!(!tmp.path().join("logs/kneepoint.log").exists());
    assert!(server.truth().is_empty(), "no request was measured");
    // a shard would empty the cache in the middle of the other shards' levels
    let s = settings(
        &server.base_url(),
        &tmp.path().join("shard"),
        "2,4",
        &["--reset-prefix-cache", "--shard", "0/2"],
    );
    let e = format!("{:#}", run_sweep(&s, false).await.unwrap_err());
    assert!(e.contains("--shard"), "{e}");
}
