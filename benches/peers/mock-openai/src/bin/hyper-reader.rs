//! What hyper's HTTP/1.1 client costs per streamed chunk, and what driving its connection in
//! the request's own task would save: `concurrency` keep-alive connections (hyper's
//! `client::conn::http1`), each sending its share of `requests` streaming chat requests and
//! reading every body frame (stamped with the clock, nothing else).
//! - `spawn`: the connection runs in a task of its own, as a pooled client runs it; each body
//!   frame crosses hyper's one-slot body channel, so the two tasks take turns per frame;
//! - `inline`: the request's task polls the connection and the body together, so the turns
//!   happen inside one task's poll.
//!
//! Usage: `hyper-reader PORT CONCURRENCY REQUESTS spawn|inline [THREADS]` (default 2; 0 a
//! current-thread runtime). Prints `frames N wall S user S sys S`.

#[path = "../readers.rs"]
mod readers;

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Body as _;
use hyper::Request;
use hyper_util::rt::TokioIo;

const BODY: &[u8] =
    br#"{"model":"mock","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;

fn request() -> Request<Full<Bytes>> {
    Request::post("/v1/chat/completions")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(BODY)))
        .unwrap_or_default()
}

async fn client(
    port: u16,
    requests: usize,
    inline: bool,
) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    let mut frames = 0u64;
    let mut stamps = 0u64;
    if !inline {
        tokio::spawn(conn);
        for _ in 0..requests {
            let mut body = send.send_request(request()).await?.into_body();
            while let Some(f) = body.frame().await {
                f?;
                frames += 1;
                stamps ^= std::time::Instant::now().elapsed().as_nanos() as u64;
            }
        }
        std::hint::black_box(stamps);
        return Ok(frames);
    }
    let mut conn = pin!(conn);
    for _ in 0..requests {
        // Drive the connection while the response head and then its body come in.
        let mut pending = pin!(send.send_request(request()));
        let response = std::future::poll_fn(|cx| {
            if let Poll::Ready(Err(e)) = conn.as_mut().poll(cx) {
                return Poll::Ready(Err(Box::new(e) as Box<dyn std::error::Error + Send + Sync>));
            }
            pending.as_mut().poll(cx).map_err(|e| Box::new(e) as _)
        })
        .await?;
        let mut body = pin!(response.into_body());
        loop {
            let frame = std::future::poll_fn(|cx| {
                // The body first: a frame the connection already handed over needs no turn.
                if let Poll::Ready(f) = body.as_mut().poll_frame(cx) {
                    return Poll::Ready(f);
                }
                let _ = conn.as_mut().poll(cx);
                body.as_mut().poll_frame(cx)
            })
            .await;
            match frame {
                Some(f) => {
                    f?;
                    frames += 1;
                    stamps ^= std::time::Instant::now().elapsed().as_nanos() as u64;
                }
                None => break,
            }
        }
    }
    std::hint::black_box(stamps);
    Ok(frames)
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = |i: usize, d: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    let (port, concurrency, requests) = (n(0, 0) as u16, n(1, 256), n(2, 16384));
    let inline = args.get(3).is_some_and(|m| m == "inline");
    readers::run("frames", n(4, 2), concurrency, requests, move |share| {
        client(port, share, inline)
    })
}
