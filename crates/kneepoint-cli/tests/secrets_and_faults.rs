//! Secrets stay out of artifacts; servers that misbehave give failed records, not crashes; the
//! `kneepoint sim serve` binary serves requests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use kneepoint_cli::{run_sweep, Cli, Command, SweepSettings};
use kneepoint_sim::{SimProfile, SimServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::all_text;

fn settings(args: &[&str]) -> SweepSettings {
    let mut v = vec!["kneepoint", "sweep"];
    v.extend_from_slice(args);
    let Command::Sweep(a) = Cli::try_parse_from(v).unwrap().command else {
        panic!()
    };
    SweepSettings::resolve(&a).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_and_header_values_never_reach_artifacts() {
    const SECRET: &str = "sk-kneepoint-test-7f3a9c";
    const HEADER_SECRET: &str = "hdr-secret-41b2";
    // A variable only this test sets.
    std::env::set_var("KNEEPOINT_TEST_ONLY_KEY", SECRET);
    let server = SimServer::start_local(SimProfile::fast()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.base_url();
    let header = format!("X-Auth: {HEADER_SECRET}");
    let s = settings(&[
        "--url",
        &url,
        "--model",
        "m",
        "--api-key-env",
        "KNEEPOINT_TEST_ONLY_KEY",
        "--header",
        &header,
        "--concurrency",
        "2",
        "--request-count",
        "4",
        "--isl",
        "16",
        "--osl",
        "4",
        "--artifact-dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert!(!format!("{s:?}").contains(SECRET));
    let out = run_sweep(&s, false).await.unwrap();
    assert_eq!(out.summaries[0].ok_count, 4);
    // The run log carries the settings too, redacted like the exports.
    let log = std::fs::read_to_string(tmp.path().join("logs/kneepoint.log")).unwrap();
    assert!(
        log.contains("X-Auth") && log.contains("[redacted]"),
        "{log}"
    );
    let text = all_text(tmp.path());
    assert!(text.contains("[redacted]"));
    assert!(text.contains("X-Auth"));
    assert!(!text.contains(SECRET));
    assert!(!text.contains(HEADER_SECRET));
}

/// Answers every request with `reply` and closes.
async fn garbage_server(reply: &'static [u8]) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = [0u8; 65536];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(reply).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_dropped_streams_become_failed_records() {
    for (reply, kind) in [
        (&b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {oops\n\n"[..], "malformed_response"),
        (&b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 500\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"[..], "disconnected"),
        (&b"\x00\x01garbage that is not HTTP\r\n\r\n"[..], "disconnected"),
    ] {
        let url = garbage_server(reply).await;
        let tmp = tempfile::tempdir().unwrap();
        let s = settings(&[
            "--url", &url, "--model", "m", "--concurrency", "3", "--request-count", "9",
            "--artifact-dir", tmp.path().to_str().unwrap(),
        ]);
        let out = run_sweep(&s, false).await.unwrap();
        let sum = &out.summaries[0];
        assert_eq!(sum.request_count, 9);
        assert_eq!(sum.error_count, 9, "{:?}", sum.error_summary);
        assert_eq!(sum.errors_by_kind.iter().find(|(k, _)| k.as_str() == kind).map(|(_, n)| n), Some(&9), "{kind}: {:?}", sum.errors_by_kind);
        let lines = std::fs::read_to_string(tmp.path().join("concurrency_3/profile_export.jsonl")).unwrap();
        assert_eq!(lines.lines().count(), 9);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_is_detected_and_unreachable_servers_fail_fast() {
    let server = SimServer::start_local(SimProfile::fast()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.base_url() + "/v1";
    let s = settings(&[
        "--url",
        &url,
        "--concurrency",
        "1",
        "--request-count",
        "2",
        "--isl",
        "8",
        "--osl",
        "2",
        "--artifact-dir",
        tmp.path().to_str().unwrap(),
    ]);
    let out = run_sweep(&s, false).await.unwrap();
    assert_eq!(out.summaries[0].ok_count, 2);
    let inputs = std::fs::read_to_string(tmp.path().join("concurrency_1/inputs.json")).unwrap();
    assert!(inputs.contains("kneepoint-sim/fast"), "{inputs}");

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let s = settings(&[
        "--url",
        &url,
        "--artifact-dir",
        tmp.path().to_str().unwrap(),
    ]);
    let e = format!("{:#}", run_sweep(&s, false).await.unwrap_err());
    assert!(
        e.contains("no --model given") && e.contains("connect"),
        "{e}"
    );
}

#[test]
fn sim_serve_binary_answers_requests() {
    let (mut child, url) = common::sim_serve(&["--profile", "fast"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let result = rt.block_on(async {
        use futures_util::StreamExt;
        use kneepoint_core::{Request, ResponseEvent, Transport};
        let t = kneepoint_transport::OpenAiTransport::new(kneepoint_transport::OpenAiConfig::new(
            url, "m",
        ))
        .unwrap();
        let mut r = Request::text(1, "hello there");
        r.max_output_tokens = Some(5);
        r.ignore_eos = true;
        let events: Vec<_> = t.send(&r).await.unwrap().collect().await;
        events
            .into_iter()
            .filter(|e| matches!(e, Ok(ResponseEvent::Chunk(_))))
            .count()
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(result, 5);
}
