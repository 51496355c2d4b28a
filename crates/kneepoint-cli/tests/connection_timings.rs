//! Connection timings (issue 31): each request's connection setup, apart from TTFT, in the
//! records and the level's aggregates under AIPerf's `http_req_*` names. Against the simulator
//! by host name (so DNS is resolved): a request that opened its connection reports DNS and
//! TCP connect (no TLS on plain HTTP); one on a connection an earlier request opened reports
//! it reused, with zeros. TLS handshakes are checked through nginx in the real-server suite
//! (`scripts/real_servers/test_connect.py`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use kneepoint_cli::{run_sweep, Cli, Command, SweepSettings};
use kneepoint_sim::{SimProfile, SimServer};
use serde_json::Value;

fn metric(r: &Value, name: &str) -> f64 {
    r["metrics"][name]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("{name} missing in {r}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_connections_report_dns_and_connect_and_reused_ones_zeros() {
    let server = SimServer::start_local(SimProfile::fast()).await.unwrap();
    let port = server.base_url().rsplit(':').next().unwrap().to_owned();
    let url = format!("http://localhost:{port}/v1");
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "kneepoint",
        "sweep",
        "--url",
        &url,
        "--concurrency",
        "4",
        "--request-count",
        "24",
        "--isl",
        "32",
        "--osl",
        "4",
        "--no-server-metrics",
        "--quiet",
        "--artifact-dir",
        tmp.path().to_str().unwrap(),
    ];
    let Command::Sweep(a) = Cli::try_parse_from(args).unwrap().command else {
        panic!("not a sweep")
    };
    run_sweep(&SweepSettings::resolve(&a).unwrap(), false)
        .await
        .unwrap();
    let level = tmp.path().join("concurrency_4");
    let records: Vec<Value> = std::fs::read_to_string(level.join("profile_export.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 24);
    let (fresh, reused): (Vec<&Value>, Vec<&Value>) = records
        .iter()
        .partition(|r| metric(r, "http_req_connection_reused") == 0.0);
    // four in flight: a few requests waited for a new connection (hyper's pool may open one
    // more while a finished request's connection is on its way back), most reused one
    assert!(
        (1..=8).contains(&fresh.len()),
        "{} new connections",
        fresh.len()
    );
    assert!(reused.len() >= 16, "{} reused", reused.len());
    for r in &fresh {
        let (dns, connect) = (
            metric(r, "http_req_dns_lookup"),
            metric(r, "http_req_connecting"),
        );
        assert!(dns > 0.0 && connect > 0.0, "{r}");
        assert_eq!(metric(r, "http_req_tls_handshaking"), 0.0);
        let overhead = metric(r, "http_req_connection_overhead");
        assert!((overhead - dns - connect).abs() < 1e-6, "{r}");
        // the setup is part of the time to the first token, not added to it
        assert!(overhead < metric(r, "time_to_first_token"), "{r}");
    }
    for r in &reused {
        for name in [
            "http_req_dns_lookup",
            "http_req_connecting",
            "http_req_tls_handshaking",
            "http_req_connection_overhead",
        ] {
            assert_eq!(metric(r, name), 0.0, "{name}: {r}");
        }
    }
    for r in &records {
        let waiting = metric(r, "http_req_waiting");
        assert!(
            waiting >= 0.0 && waiting <= metric(r, "time_to_first_token"),
            "{r}"
        );
    }
    // the level's aggregates: the share reused, the setup's distribution
    let doc: Value =
        serde_json::from_slice(&std::fs::read(level.join("profile_export_aiperf.json")).unwrap())
            .unwrap();
    let share = doc["http_req_connection_reused"]["avg"].as_f64().unwrap();
    assert!((share - reused.len() as f64 / 24.0).abs() < 1e-9, "{share}");
    assert_eq!(doc["http_req_connection_reused"]["unit"], "ratio");
    assert_eq!(doc["http_req_dns_lookup"]["unit"], "ms");
    assert!(doc["http_req_connecting"]["max"].as_f64().unwrap() > 0.0);
    // and read back: `report` rebuilds the same aggregates from the records
    let back = kneepoint_metrics::export::read_jsonl(&level.join("profile_export.jsonl")).unwrap();
    let fresh_back = back
        .iter()
        .filter(|r| r.connection.is_some_and(|c| !c.reused))
        .count();
    assert_eq!(fresh_back, fresh.len());
}
