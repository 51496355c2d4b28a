//! The OpenAI transport against scripted raw-TCP servers on 127.0.0.1:0: well-formed streams
//! split every which way, and servers that misbehave.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures_util::StreamExt;
use kneepoint_core::{Error, ErrorKind, Request, ResponseEvent, Transport, Usage};
use kneepoint_transport::{Api, OpenAiConfig, OpenAiTransport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One step of a scripted response.
#[derive(Clone)]
enum Step {
    Write(Vec<u8>),
    Pause(u64),
    Close,
    /// Close with a TCP RST (linger 0).
    Reset,
}

use Step::*;

async fn read_request(sock: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        let n = sock.read(&mut tmp).await.unwrap();
        if n == 0 {
            return buf;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = sock.read(&mut tmp).await.unwrap();
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            return buf;
        }
    }
}

/// Serves every connection with `script`; returns the base URL.
async fn serve(script: Vec<Step>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let script = script.clone();
            tokio::spawn(async move {
                let _ = read_request(&mut sock).await;
                for step in script {
                    match step {
                        Write(b) => {
                            if sock.write_all(&b).await.is_err() {
                                return;
                            }
                            let _ = sock.flush().await;
                        }
                        Pause(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                        Close => return,
                        Reset => {
                            #[allow(deprecated)]
                            let _ = sock.set_linger(Some(Duration::ZERO));
                            return;
                        }
                    }
                }
                // keep the connection open until the client closes it
                let mut sink = [0u8; 64];
                let _ = sock.read(&mut sink).await;
            });
        }
    });
    format!("http://{addr}")
}

const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

/// Wraps `data` as one HTTP chunk.
fn chunk(data: &[u8]) -> Vec<u8> {
    let mut v = format!("{:x}\r\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

const END: &[u8] = b"0\r\n\r\n";

fn delta(text: &str) -> String {
    format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n")
}

async fn collect(url: String, api: Api) -> Vec<Result<ResponseEvent, Error>> {
    let mut c = OpenAiConfig::new(url, "m");
    c.api = api;
    let t = OpenAiTransport::new(c).unwrap();
    let mut out = Vec::new();
    match t.send(&Request::text(1, "hi")).await {
        Err(e) => out.push(Err(e)),
        Ok(mut s) => {
            while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), s.next())
                .await
                .expect("stream stalled")
            {
                out.push(ev);
            }
        }
    }
    out
}

fn texts(events: &[Result<ResponseEvent, Error>]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Ok(ResponseEvent::Chunk(c)) => Some(c.text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn well_formed_stream_split_across_writes() {
    let body = [
        ": keep-alive\n\n".to_string(),
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\n\r\n"
            .into(),
        delta(" a"),
        delta(" b") + &delta(" c"),
        "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"think\"}}]}\n\n".into(),
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n".into(),
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":4}}\n\n".into(),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let bytes = body.as_bytes();
    // Split the body into HTTP chunks at awkward places, with pauses between them.
    let mut script = vec![Write(SSE_HEAD.to_vec())];
    for piece in bytes.chunks(7) {
        script.push(Write(chunk(piece)));
        script.push(Pause(1));
    }
    script.push(Write(END.to_vec()));
    let ev = collect(serve(script).await, Api::Chat).await;
    assert!(ev.iter().all(|e| e.is_ok()), "{ev:?}");
    assert_eq!(texts(&ev), " a b c");
    assert!(ev.iter().any(|e| matches!(e, Ok(ResponseEvent::Chunk(c))
            if c.reasoning == "think" && c.text.is_empty() && c.tokens.is_none())));
    // Every chunk carries its connection's receive time, in arrival order.
    let received: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            Ok(ResponseEvent::Chunk(c)) => Some(c.received.expect("a receive time")),
            _ => None,
        })
        .collect();
    assert_eq!(received.len(), 4);
    assert!(received.windows(2).all(|w| w[0] <= w[1]), "{received:?}");
    assert!(ev
        .iter()
        .any(|e| matches!(e, Ok(ResponseEvent::Finish { reason: Some(r) }) if r == "length")));
    assert!(ev.iter().any(|e| matches!(
        e,
        Ok(ResponseEvent::Usage(Usage {
            completion_tokens: Some(4),
            ..
        }))
    )));
}

#[tokio::test]
async fn error_object_in_stream_fails_the_request() {
    let body = delta(" a")
        + "data: {\"error\":{\"message\":\"engine died\",\"type\":\"InternalServerError\",\"code\":500}}\n\n";
    let script = vec![
        Write(SSE_HEAD.to_vec()),
        Write(chunk(body.as_bytes())),
        Write(END.to_vec()),
    ];
    let ev = collect(serve(script).await, Api::Chat).await;
    assert_eq!(texts(&ev), " a");
    let err = ev.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Server);
    assert!(err.to_string().contains("engine died"));
}

/// Issue 20, item 8: an `event: error` whose JSON has no `error` key used to count as a
/// success (its data parsed as an empty chunk).
#[tokio::test]
async fn an_error_event_fails_the_request_whatever_its_data() {
    for (event, want) in [
        (
            "event: error\ndata: {\"message\":\"overloaded, retry\"}\n\n",
            "overloaded, retry",
        ),
        ("event: error\ndata: {\"detail\":\"busy\"}\n\n", "busy"),
        ("event: error\ndata: {}\n\n", "{}"),
        ("event: error\ndata: plain words\n\n", "plain words"),
    ] {
        let body = delta(" a") + event + &delta(" b");
        let script = vec![
            Write(SSE_HEAD.to_vec()),
            Write(chunk(body.as_bytes())),
            Write(END.to_vec()),
        ];
        let ev = collect(serve(script).await, Api::Chat).await;
        assert_eq!(texts(&ev), " a", "{event}");
        let err = ev.last().unwrap().as_ref().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Server, "{event}");
        assert!(err.to_string().contains(want), "{event}: {err}");
    }
}

/// Issue 20, item 10: a close and a reset mid-stream used to read the same.
#[tokio::test]
async fn a_reset_and_a_close_mid_stream_are_told_apart() {
    for (last, want) in [
        (Close, "closed the connection before the response ended"),
        (Reset, "reset the connection"),
    ] {
        let script = vec![
            Write(SSE_HEAD.to_vec()),
            Write(chunk(delta(" a").as_bytes())),
            Pause(20),
            last,
        ];
        let ev = collect(serve(script).await, Api::Chat).await;
        let err = ev.last().unwrap().as_ref().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Disconnected, "{err}");
        assert!(err.to_string().contains(want), "{want}: {err}");
    }
}

#[tokio::test]
async fn garbage_body_is_malformed() {
    let script = vec![
        Write(SSE_HEAD.to_vec()),
        Write(chunk(b"data: {this is not json\n\n")),
        Write(END.to_vec()),
    ];
    let ev = collect(serve(script).await, Api::Chat).await;
    assert_eq!(
        ev.last().unwrap().as_ref().unwrap_err().kind(),
        ErrorKind::MalformedResponse
    );

    let script = vec![Write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec()), Close];
    let ev = collect(serve(script).await, Api::Chat).await;
    assert!(ev[0].is_err(), "{ev:?}");
}

#[tokio::test]
async fn invalid_utf8_is_malformed() {
    let script = vec![
        Write(SSE_HEAD.to_vec()),
        Write(chunk(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n",
        )),
        Write(END.to_vec()),
    ];
    let ev = collect(serve(script).await, Api::Chat).await;
    assert_eq!(
        ev.last().unwrap().as_ref().unwrap_err().kind(),
        ErrorKind::MalformedResponse
    );
}

#[tokio::test]
async fn dropped_connection_mid_stream() {
    let script = vec![
        Write(SSE_HEAD.to_vec()),
        Write(chunk(delta(" a").as_bytes())),
        Pause(5),
        Close,
    ];
    let ev = collect(serve(script).await, Api::Chat).await;
    assert_eq!(texts(&ev), " a");
    assert_eq!(
        ev.last().unwrap().as_ref().unwrap_err().kind(),
        ErrorKind::Disconnected
    );
}

#[tokio::test]
async fn clean_end_without_done_is_flagged() {
    let script = vec![
        Write(SSE_HEAD.to_vec()),
        Write(chunk(delta(" a").as_bytes())),
        Write(END.to_vec()),
    ];
    let ev = collect(serve(script).await, Api::Chat).await;
    let err = ev.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::MalformedResponse);
    assert!(err.to_string().contains("[DONE]"));
}

#[tokio::test]
async fn http_status_with_body_excerpt() {
    let body = "{\"object\":\"error\",\"message\":\"model overloaded\"}";
    let resp = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let ev = collect(serve(vec![Write(resp.into_bytes())]).await, Api::Chat).await;
    let err = ev[0].as_ref().unwrap_err();
    assert_eq!(err.status(), Some(503));
    assert!(err.to_string().contains("model overloaded"));
}

#[tokio::test]
async fn non_streaming_completions() {
    let body = "{\"choices\":[{\"text\":\" hello world\",\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}";
    let resp = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let url = serve(vec![Write(resp.into_bytes())]).await;
    let mut c = OpenAiConfig::new(url, "m");
    c.api = Api::Completions;
    c.streaming = false;
    let t = OpenAiTransport::new(c).unwrap();
    let ev: Vec<_> = t
        .send(&Request::text(1, "x"))
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(texts(&ev), " hello world");
    // the connection's setup first (a new connection), then text, usage and finish
    assert_eq!(ev.len(), 4);
    match &ev[0] {
        Ok(ResponseEvent::Connection(c)) => assert!(!c.reused && c.connect_ns > 0, "{c:?}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn connect_refused_is_a_connect_error() {
    // Bind and drop to find a port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ev = collect(format!("http://127.0.0.1:{port}"), Api::Chat).await;
    let err = ev[0].as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect);
    assert!(err.to_string().contains("127.0.0.1"));
}

#[test]
fn bad_configuration_is_rejected() {
    assert!(OpenAiTransport::new(OpenAiConfig::new("ftp://x", "m")).is_err());
    assert!(OpenAiTransport::new(OpenAiConfig::new("not a url", "m")).is_err());
    let mut c = OpenAiConfig::new("http://user:secret@host", "m");
    let e = OpenAiTransport::new(c.clone()).unwrap_err().to_string();
    assert!(!e.contains("secret"), "{e}");
    c.base_url = "http://h".into();
    c.headers.push(("bad header".into(), "v".into()));
    assert!(OpenAiTransport::new(c).is_err());
}

#[tokio::test]
async fn https_goes_through_rustls_and_a_failed_handshake_is_a_connect_error() {
    // A plain-text server that answers the ClientHello with HTTP: the handshake fails cleanly.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = [0u8; 512];
            let _ = sock.read(&mut buf).await;
            let _ = sock.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        }
    });
    let ev = tokio::time::timeout(
        Duration::from_secs(10),
        collect(format!("https://{addr}"), Api::Chat),
    )
    .await
    .expect("the handshake failure is reported promptly");
    let err = ev[0].as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect, "{err}");
}
