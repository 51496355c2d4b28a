//! The floor under any client that reads each paced token as it arrives: `concurrency`
//! keep-alive connections, each sending its share of `requests` streaming chat requests and
//! reading every answer with one `read` per readiness, stamping each read with the clock and
//! doing nothing else (no HTTP parsing beyond finding the end of the chunked body, no SSE
//! parsing, no records). Its CPU time per token is what the kernel and the runtime cost alone.
//!
//! Usage: `floor-reader PORT CONCURRENCY REQUESTS [THREADS]` (THREADS 0: a current-thread
//! runtime; default 2). Prints `reads N wall S user S sys S` (seconds: the run, and this process's CPU time).

#[path = "../readers.rs"]
mod readers;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn client(port: u16, requests: usize) -> std::io::Result<u64> {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    let body = br#"{"model":"mock","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut buf = vec![0u8; 64 << 10];
    let (mut reads, mut stamps) = (0u64, 0u64);
    for _ in 0..requests {
        tcp.write_all(&[head.as_bytes(), body].concat()).await?;
        // The end of a chunked body: the zero-length chunk.
        let mut tail = Vec::<u8>::new();
        loop {
            let n = tcp.read(&mut buf).await?;
            if n == 0 {
                std::hint::black_box(stamps);
                return Ok(reads);
            }
            reads += 1;
            stamps ^= std::time::Instant::now().elapsed().as_nanos() as u64;
            tail.extend_from_slice(&buf[..n]);
            if tail.len() > 16 {
                tail.drain(..tail.len() - 16);
            }
            if tail.ends_with(b"\r\n0\r\n\r\n") {
                break;
            }
        }
    }
    std::hint::black_box(stamps);
    Ok(reads)
}

fn main() -> std::io::Result<()> {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let arg = |i: usize, d: usize| a.get(i).copied().unwrap_or(d);
    let (port, concurrency, requests) = (arg(0, 0) as u16, arg(1, 256), arg(2, 16384));
    readers::run("reads", arg(3, 2), concurrency, requests, move |share| {
        client(port, share)
    })
}
