//! Issue 20: servers that misbehave on purpose (on loopback), each with the fix it checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use kneepoint_cli::{run_sweep, Cli, Command, SweepSettings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::all_text;

/// What the server answers a request with, given how many requests are in flight (this one
/// included) and the request's text.
type Answer = Arc<dyn Fn(usize, &str) -> Vec<u8> + Send + Sync>;

/// An HTTP/1.1 server that reads one request per connection, answers with `answer`, holds the
/// connection `hold` (so that concurrency is real), and closes.
async fn server(answer: Answer, hold: Duration) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let in_flight = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let (answer, in_flight) = (answer.clone(), in_flight.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                // Read the head, then the body by its content-length.
                loop {
                    let Ok(n) = s.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                let reply = answer(now, &String::from_utf8_lossy(&buf));
                tokio::time::sleep(hold).await;
                let _ = s.write_all(&reply).await;
                let _ = s.shutdown().await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    format!("http://{addr}")
}

fn status(code: u16, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A whole SSE answer of `n` one-word tokens with a finish reason.
fn stream_ok(n: usize) -> Vec<u8> {
    let mut body = String::new();
    for _ in 0..n {
        body.push_str("data: {\"choices\":[{\"delta\":{\"content\":\" tok\"}}]}\n\n");
    }
    body.push_str(
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n",
    );
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn sweep_cli(url: &str, levels: &str, count: &str, dir: &std::path::Path) -> Cli {
    Cli::try_parse_from([
        "kneepoint",
        "sweep",
        "--url",
        url,
        "--model",
        "m",
        "--concurrency",
        levels,
        "--request-count",
        count,
        "--isl",
        "8",
        "--osl",
        "4",
        "--quiet",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ])
    .unwrap()
}

fn settings(cli: Cli) -> SweepSettings {
    let Command::Sweep(a) = cli.command else {
        panic!()
    };
    SweepSettings::resolve(&a).unwrap()
}

/// Item 5: a server that answers 503 beyond two requests in flight. The levels above 2 are at
/// 50–90 % errors and look fast (failures return at once); they used to be reported as the
/// safe maximum. Now the zone stops at 2 and says errors break it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn levels_with_errors_are_never_the_operating_level() {
    let answer: Answer = Arc::new(|in_flight, _| {
        if in_flight > 2 {
            status(503, r#"{"error":{"message":"busy"}}"#)
        } else {
            stream_ok(4)
        }
    });
    let url = server(answer, Duration::from_millis(20)).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = run_sweep(
        &settings(sweep_cli(&url, "1,2,8,16", "32", tmp.path())),
        false,
    )
    .await
    .unwrap();
    let rate: Vec<f64> = out.summaries.iter().map(|s| s.error_rate).collect();
    assert_eq!(rate[0], 0.0, "{rate:?}");
    assert!(rate[2] > 0.3 && rate[3] > 0.3, "{rate:?}");
    let ideal = out.zone.ideal_balance.unwrap();
    assert!(ideal <= 2, "{:?}", out.zone);
    assert!(out.zone.safe_max.unwrap() <= 2, "{:?}", out.zone);
    assert!(
        matches!(out.zone.error_breaking_point, Some(c) if c <= 8),
        "{:?}",
        out.zone
    );
    assert!(
        out.zone.summary.contains("errors exceed 5 %"),
        "{}",
        out.zone.summary
    );
}

/// Item 5: when every request fails (here 401) the run writes its files and exits non-zero
/// naming the failure, instead of exit 0 and "operate at 1".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_where_every_request_failed_is_an_error_with_the_reason() {
    let answer: Answer = Arc::new(|_, _| status(401, r#"{"error":{"message":"invalid api key"}}"#));
    let url = server(answer, Duration::ZERO).await;
    let tmp = tempfile::tempdir().unwrap();
    let cli = sweep_cli(&url, "1,4", "8", tmp.path());
    let e = tokio::task::spawn_blocking(move || kneepoint_cli::run(cli))
        .await
        .unwrap()
        .unwrap_err();
    let text = format!("{e:#}");
    assert!(text.contains("no request succeeded"), "{text}");
    assert!(
        text.contains("401") && text.contains("invalid api key"),
        "{text}"
    );
    assert!(tmp.path().join("sweep_summary.json").is_file());
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("sweep_summary.json")).unwrap())
            .unwrap();
    assert_eq!(doc["zone"]["ideal_balance"], serde_json::Value::Null);
    assert!(doc["zone"]["summary"]
        .as_str()
        .unwrap()
        .starts_with("no level is usable"));
}

/// Item 7: a 401 whose body repeats the bearer token put it into three files. The transport
/// now redacts its key (and header values) from every recorded message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_server_echoes_back_is_never_written() {
    const KEY: &str = "sk-echo-9f8e7d6c5b4a";
    std::env::set_var("KNEEPOINT_ECHO_TEST_KEY", KEY);
    let answer: Answer = Arc::new(|_, req| {
        let auth = req
            .lines()
            .find_map(|l| {
                l.strip_prefix("authorization: ")
                    .or_else(|| l.strip_prefix("Authorization: "))
            })
            .unwrap_or("none")
            .to_owned();
        status(
            401,
            &format!(r#"{{"error":{{"message":"bad credentials: {auth}"}}}}"#),
        )
    });
    let url = server(answer, Duration::ZERO).await;
    let tmp = tempfile::tempdir().unwrap();
    let cli = Cli::try_parse_from([
        "kneepoint",
        "sweep",
        "--url",
        &url,
        "--model",
        "m",
        "--concurrency",
        "2",
        "--request-count",
        "4",
        "--isl",
        "8",
        "--osl",
        "4",
        "--quiet",
        "--api-key-env",
        "KNEEPOINT_ECHO_TEST_KEY",
        "--artifact-dir",
        tmp.path().to_str().unwrap(),
    ])
    .unwrap();
    let out = run_sweep(&settings(cli), false).await.unwrap();
    assert_eq!(out.summaries[0].error_count, 4);
    let seen = all_text(tmp.path());
    assert!(
        seen.contains("bad credentials: Bearer [redacted]"),
        "the echo is recorded, redacted"
    );
    assert!(!seen.contains(KEY));
}
