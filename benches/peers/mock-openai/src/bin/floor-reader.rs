//! The floor under any client that reads each paced token as it arrives: `concurrency`
//! keep-alive connections, each sending its share of `requests` streaming chat requests and
//! reading every answer with one `read` per readiness, stamping each read with the clock and
//! doing nothing else (no HTTP parsing beyond finding the end of the chunked body, no SSE
//! parsing, no records). Its CPU time per token is what the kernel and the runtime cost alone.
//!
//! Usage: `floor-reader PORT CONCURRENCY REQUESTS [THREADS]` (THREADS 0: a current-thread
//! runtime; default 2). Prints `reads N wall S user S sys S` (seconds: the run, and this process's CPU time).

use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn cpu() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<f64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    (f[11] / 100.0, f[12] / 100.0)
}

async fn client(port: u16, requests: usize) -> std::io::Result<(u64, u64)> {
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
                return Ok((reads, stamps));
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
    Ok((reads, stamps))
}

fn main() -> std::io::Result<()> {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let (port, concurrency, requests) = (a[0] as u16, a[1], a[2]);
    let threads = a.get(3).copied().unwrap_or(2);
    let rt = if threads == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()?
    };
    let (u0, s0) = cpu();
    let t0 = std::time::Instant::now();
    let reads: u64 = rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..concurrency {
            let share = requests / concurrency + usize::from(i < requests % concurrency);
            tasks.push(tokio::spawn(client(port, share)));
        }
        let mut reads = 0;
        for t in tasks {
            if let Ok(Ok((r, _))) = t.await {
                reads += r;
            }
        }
        reads
    });
    let (u1, s1) = cpu();
    println!(
        "reads {reads} wall {:.2} user {:.2} sys {:.2}",
        t0.elapsed().as_secs_f64(),
        u1 - u0,
        s1 - s0
    );
    Ok(())
}
