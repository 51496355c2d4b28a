//! The client on paced token streams (issue 52): a real server sends one token every 10–50 ms
//! per stream, so nearly every read carries one token and the per-read costs (the wake-up, the
//! syscall, the clock read) are paid per token.
//!
//! `kneepoint sim serve --profile fixed` runs in its own process (TTFT 50 ms, then a token every
//! `KNEEPOINT_PACED_ITL_MS`, default 10, whatever the load) and stamps every token as it hands it
//! to the connection; this process drives it with the CLI's runner, OpenAI transport and record
//! export, ISL 1024 / OSL 128 streaming chat, the first wave spread over one request's duration.
//! Per level (`KNEEPOINT_PACED_LEVELS`, default `1024,4096`) it prints:
//! - CPU per streamed token: this whole process's user + system time over the level (warm-up
//!   included, as are its tokens), divided by the token-bearing chunks received;
//! - reads and wake-ups per token: `recvmsg` and `epoll_wait` calls counted by `perf stat` on
//!   this process (when `perf` can trace syscalls here), and context switches from `getrusage`;
//! - client-added latency against the server's send stamps: the TTFT gap (client TTFT minus the
//!   server's), and per token the gap between consecutive arrivals minus the gap between their
//!   sends (p50 / p99 / max over every token).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::fixed_sim;
use crate::{fetch_truth, level, quantile, truth_call};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `perf stat` counting this process's `recvmsg` and `epoll_wait` calls until stopped; `None`
/// where perf cannot trace syscalls.
struct SyscallCount(Option<Child>);

impl SyscallCount {
    fn start() -> Self {
        let child = Command::new("perf")
            .args([
                "stat",
                "-x,",
                "-e",
                "syscalls:sys_enter_recvmsg,syscalls:sys_enter_epoll_wait",
                "-p",
                &std::process::id().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok();
        // perf needs a moment to attach before the level starts
        std::thread::sleep(Duration::from_millis(300));
        SyscallCount(child)
    }

    /// (recvmsg, epoll_wait) calls since the start.
    fn stop(self) -> Option<(u64, u64)> {
        let child = self.0?;
        // SIGINT makes perf print its counts and exit
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).ok()?);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).ok()?;
        let out = child.wait_with_output().ok()?;
        let text = String::from_utf8_lossy(&out.stderr);
        let count = |event: &str| {
            text.lines()
                .find(|l| l.contains(event))
                .and_then(|l| l.split(',').next())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        Some((count("sys_enter_recvmsg")?, count("sys_enter_epoll_wait")?))
    }
}

/// One level's row.
async fn row(url: &str, concurrency: u32, osl: u32, itl_ms: f64) -> String {
    let n = concurrency as usize * 3;
    let ramp = Duration::from_secs_f64((50.0 + itl_ms * f64::from(osl - 1)) / 1000.0);
    truth_call(url, "DELETE");
    let perf = SyscallCount::start();
    let o = level(
        url,
        true,
        (1024, osl),
        concurrency,
        (n, concurrency as usize),
        Some(ramp),
    )
    .await;
    let calls = perf.stop();
    let truth = fetch_truth(url);
    let (mut ttft, mut itl) = (Vec::new(), Vec::new());
    for r in o.records.iter().filter(|r| r.error.is_none()) {
        let Some(t) = r.x_request_id.as_ref().and_then(|id| truth.get(id)) else {
            continue;
        };
        let Some(&first) = r.chunk_ns.first() else {
            continue;
        };
        ttft.push((first - r.start_ns) as f64 / 1e6 - t.ttft_ms);
        let sends = &t.token_unix_ns;
        if sends.len() == r.chunk_ns.len() {
            for i in 1..sends.len() {
                let arrived = r.chunk_ns[i] as f64 - r.chunk_ns[i - 1] as f64;
                let sent = sends[i] as f64 - sends[i - 1] as f64;
                itl.push((arrived - sent) / 1e6);
            }
        }
    }
    let tokens = o.chunks.max(1) as f64;
    let per_token = |v: u64| v as f64 / tokens;
    let (reads, polls) = calls.map_or(("n/a".into(), "n/a".into()), |(r, e)| {
        (
            format!("{:.2}", per_token(r)),
            format!("{:.2}", per_token(e)),
        )
    });
    let q = |v: &Vec<f64>, p: f64| quantile(v.clone(), p);
    let max = |v: &Vec<f64>| v.iter().copied().fold(f64::NAN, f64::max);
    format!(
        "{concurrency:>7}  {:>8}  {:>8.0}  {:>9.2}  {:>6}  {:>6}  {:>8.2}  {:>6.2} / {:>6.2}  {:>6.3} / {:>6.3} / {:>7.2}  {:>6.0} %  {:>6.0} %  {:>6.0}",
        ttft.len(),
        o.tokens as f64 / o.wall_s,
        o.cpu_s / tokens * 1e6,
        reads,
        polls,
        per_token(o.switches),
        q(&ttft, 0.5),
        q(&ttft, 0.99),
        q(&itl, 0.5),
        q(&itl, 0.99),
        max(&itl),
        o.machine_busy * 100.0,
        o.peak_busy * 100.0,
        o.peak_rss_mb,
    )
}

/// The paced table.
pub(crate) fn table(rt: &tokio::runtime::Runtime, quick: bool) {
    let itl_ms: f64 = env_or("KNEEPOINT_PACED_ITL_MS", 10.0);
    let osl = if quick { 32 } else { 128 };
    let levels: Vec<u32> = std::env::var("KNEEPOINT_PACED_LEVELS")
        .ok()
        .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1024, 4096]);
    let sim = fixed_sim(itl_ms);
    println!("\npaced streams: the simulator in its own process (TTFT 50 ms, a token every {itl_ms} ms, each stamped as sent), ISL 1024, OSL {osl}, streaming chat, first wave spread over one request");
    println!("CPU µs/token: this process's user + system time per token-bearing chunk; reads and epoll waits per token from perf (n/a without it); switches: context switches per token");
    println!("client-added, ms: TTFT = client TTFT − server TTFT; ITL = arrival gap − send gap, every token");
    println!("streams  requests  tokens/s  CPU µs/tok   reads  epolls  switches  TTFT p50 / p99   ITL p50 / p99 / max  CPU busy  peak 100 ms  RSS MB");
    for c in levels {
        println!("{}", rt.block_on(row(&sim.1, c, osl, itl_ms)));
    }
    drop(sim);
}
