//! What `floor-reader` and `hyper-reader` share: the runtime, each connection's share of the
//! requests, and the report line (`LABEL N wall S user S sys S`: the count the clients return,
//! the run's seconds, and this process's CPU seconds).

use std::fmt::Display;
use std::future::Future;

fn cpu() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<f64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    (
        f.get(11).copied().unwrap_or(0.0) / 100.0,
        f.get(12).copied().unwrap_or(0.0) / 100.0,
    )
}

/// Runs `concurrency` clients, client `i` given its share of `requests`, on a runtime of
/// `threads` workers (0: a current-thread runtime), and prints the report.
pub fn run<F, Fut, E>(
    label: &str,
    threads: usize,
    concurrency: usize,
    requests: usize,
    client: F,
) -> std::io::Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<u64, E>> + Send + 'static,
    E: Display + Send + 'static,
{
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
    let count: u64 = rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..concurrency {
            let share = requests / concurrency + usize::from(i < requests % concurrency);
            tasks.push(tokio::spawn(client(share)));
        }
        let mut count = 0;
        for t in tasks {
            match t.await {
                Ok(Ok(n)) => count += n,
                Ok(Err(e)) => eprintln!("client: {e}"),
                Err(e) => eprintln!("task: {e}"),
            }
        }
        count
    });
    let (u1, s1) = cpu();
    println!(
        "{label} {count} wall {:.2} user {:.2} sys {:.2}",
        t0.elapsed().as_secs_f64(),
        u1 - u0,
        s1 - s0
    );
    Ok(())
}
