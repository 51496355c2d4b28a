//! Client capacity harness: how much load kneepoint's client can drive, and what it costs.
//!
//! Run: `cargo bench -p kneepoint-cli --bench capacity` (release build; about 15 minutes).
//! Environment: `KNEEPOINT_CAPACITY_QUICK=1` runs a smaller version;
//! `KNEEPOINT_CAPACITY_ONLY=memory|fidelity|throughput|paced` one part (`paced`: CPU, reads
//! and wake-ups per streamed token and each token's client-added lateness at 1,024 and 4,096
//! paced streams, `KNEEPOINT_PACED_LEVELS` to choose; see `paced.rs`);
//! `KNEEPOINT_FIDELITY_ITL_MS` (default 50) and `KNEEPOINT_FIDELITY_LEVELS` (default
//! `1,256,1024,4096`) shape the fidelity part; `KNEEPOINT_FIDELITY_DUMP=FILE` appends one line
//! per request (concurrency, start ns, TTFT gap, request leg, response leg in ms);
//! `KNEEPOINT_CLIENT_THREADS` sets the client runtime's worker threads (default: one per core);
//! `KNEEPOINT_SIM_WRAP="chrt -f 1"` starts the simulator under a wrapper command.
//!
//! It starts `kneepoint sim serve` in its own process — the `instant` profile (pre-rendered
//! bodies, no engine) for the throughput cases, the `fast` profile (which holds requests in its
//! queue) for the memory cases, the `fixed` profile (TTFT 50 ms, then a token every ITL ms,
//! whatever the load; its truth read over `GET /truth`) for the fidelity cases — and drives it from this process with the same runner, OpenAI
//! transport and record export the CLI uses. It prints, per case: requests/s, streamed output
//! tokens/s, the average requests in flight (Little's law over the records), client CPU seconds
//! per request and per token (this process's user + system time around the level, so prompt
//! generation is excluded), peak resident memory with 1k, 4k and 10k requests in flight, and
//! the client's added TTFT and ITL against the simulator's own record at 1 to 4,096 in flight
//! (with the CPU's load, average and peak over 100 ms windows, flagged when either is above
//! 90 %).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/paced.rs"]
mod paced;
mod support;

use support::{chat_transport, cpu_seconds, fixed_sim, sim_with, workload, Sim};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kneepoint_core::RecordSink;
use kneepoint_metrics::export::JsonlSink;
use kneepoint_runner::{run_level, LevelConfig};
use kneepoint_workload::Workload;

fn sim(profile: &str) -> Sim {
    sim_with(&["--profile", profile])
}

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub(crate) struct Outcome {
    records: Vec<kneepoint_core::RequestRecord>,
    /// Token-bearing chunks of every record, warm-up included (the CPU covers both).
    chunks: u64,
    /// This process's context switches over the level (voluntary and not): its wake-ups.
    switches: u64,
    requests: usize,
    failed: usize,
    wall_s: f64,
    tokens: u64,
    cpu_s: f64,
    in_flight: f64,
    peak_rss_mb: f64,
    /// The whole machine's busy fraction over the level, on average and over its busiest
    /// 100 ms: a low average can hide bursts that exhaust the CPU (every slot sending at once).
    machine_busy: f64,
    peak_busy: f64,
}

pub(crate) async fn level(
    url: &str,
    stream: bool,
    (isl, osl): (u32, u32),
    concurrency: u32,
    (n, warm): (usize, usize),
    ramp: Option<Duration>,
) -> Outcome {
    let mut w = workload(isl, osl);
    let warmup = w.requests(warm).unwrap();
    let requests = w.requests(n).unwrap();
    let transport = chat_transport(url, stream);
    let dir = tempfile::tempdir().unwrap();
    let sink: Box<dyn RecordSink> =
        Box::new(JsonlSink::create(&dir.path().join("profile_export.jsonl")).unwrap());

    // Peak resident memory during the level, sampled every 50 ms, and the machine's busiest
    // 100 ms (/proc/stat counts 10 ms ticks; shorter windows are skipped).
    let (done, peak) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let sampler = {
        let (done, peak) = (done.clone(), peak.clone());
        std::thread::spawn(move || {
            let (mut prev, mut peak_busy) = (machine_ticks(), 0.0f64);
            for tick in 0u64.. {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                peak.fetch_max(rss_kb(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
                if tick % 2 == 1 {
                    let now = machine_ticks();
                    let ticks = now.1.saturating_sub(prev.1);
                    if ticks >= 10 {
                        let busy = now.0.saturating_sub(prev.0) as f64 / ticks as f64;
                        peak_busy = peak_busy.max(busy);
                    }
                    prev = now;
                }
            }
            peak_busy
        })
    };
    let m0 = machine_ticks();
    let sw0 = support::context_switches();
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let mut config = LevelConfig::new(concurrency);
    config.ramp_up = ramp;
    let run = run_level(transport, &config, requests, warmup, vec![sink], None)
        .await
        .unwrap();
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds() - cpu0;
    let switches = support::context_switches() - sw0;
    let m1 = machine_ticks();
    done.store(true, Ordering::Relaxed);
    let peak_busy = sampler.join().unwrap();
    let busy: f64 = run
        .records
        .iter()
        .map(|r| r.end_ns.saturating_sub(r.start_ns) as f64 / 1e9)
        .sum();
    let chunks = run
        .records
        .iter()
        .chain(&run.warmup_records)
        .map(|r| r.chunk_ns.len() as u64)
        .sum();
    Outcome {
        chunks,
        switches,
        records: run.records.clone(),
        requests: run.records.len(),
        failed: run.records.iter().filter(|r| r.error.is_some()).count(),
        wall_s,
        tokens: run
            .records
            .iter()
            .filter_map(|r| r.output_tokens)
            .map(u64::from)
            .sum(),
        cpu_s,
        in_flight: busy / wall_s,
        peak_rss_mb: peak.load(Ordering::Relaxed) as f64 / 1024.0,
        machine_busy: (m1.0 - m0.0) as f64 / (m1.1 - m0.1).max(1) as f64,
        peak_busy,
    }
}

pub(crate) fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    kneepoint_metrics::quantile_sorted(&v, q).unwrap_or(f64::NAN)
}

/// Machine-wide busy and total CPU ticks (`/proc/stat`, every core): the client and the
/// simulator share the machine, so "is the CPU exhausted" is a question about both.
pub(crate) fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let idle = f[3] + f.get(4).copied().unwrap_or(0);
    let total: u64 = f.iter().take(8).sum();
    (total - idle, total)
}

/// The simulator's truth, fetched over HTTP (`GET /truth`), or cleared (`DELETE /truth`).
pub(crate) fn truth_call(url: &str, method: &str) -> String {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} /truth HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    raw.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

pub(crate) fn fetch_truth(
    url: &str,
) -> std::collections::HashMap<String, kneepoint_sim::ServerTiming> {
    truth_call(url, "GET")
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<kneepoint_sim::ServerTiming>(l).ok())
        .filter_map(|t| Some((t.client_request_id.clone()?, t)))
        .collect()
}

/// Client-measured TTFT and ITL minus the simulator's own record of each request, against
/// `kneepoint sim serve --profile fixed` in its own process (TTFT 50 ms, a token every
/// `itl_ms`, whatever the load; each token's truth stamped as it is handed to the socket).
/// The TTFT gap is split, through the shared wall clock, into the request leg (client start →
/// server arrival) and the response leg (server write → client parse).
async fn fidelity(
    url: &str,
    concurrency: u32,
    (isl, osl): (u32, u32),
    ramp: Option<Duration>,
) -> String {
    // Three waves per slot; one slot alone sends 12 (each request lasts seconds).
    let n = (concurrency as usize * 3).max(12);
    truth_call(url, "DELETE");
    // One warm-up request per slot first, so every connection is open before measuring.
    let o = level(
        url,
        true,
        (isl, osl),
        concurrency,
        (n, concurrency as usize),
        ramp,
    )
    .await;
    let truth = fetch_truth(url);
    let (mut dttft, mut ditl, mut req_leg, mut resp_leg) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in o.records.iter().filter(|r| r.error.is_none()) {
        let Some(t) = r.x_request_id.as_ref().and_then(|id| truth.get(id)) else {
            continue;
        };
        let ms = |ns: u64| ns as f64 / 1e6;
        let signed_ms = |a: u64, b: u64| (a as f64 - b as f64) / 1e6;
        if let (Some(&first), Some(&last)) = (r.chunk_ns.first(), r.chunk_ns.last()) {
            dttft.push(ms(first - r.start_ns) - t.ttft_ms);
            req_leg.push(signed_ms(t.arrival_unix_ns, r.origin_unix_ns + r.start_ns));
            resp_leg.push(signed_ms(r.origin_unix_ns + first, t.first_token_unix_ns));
            if let Some(path) = std::env::var_os("KNEEPOINT_FIDELITY_DUMP") {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap();
                writeln!(
                    f,
                    "{concurrency} {} {} {} {}",
                    r.start_ns,
                    dttft.last().unwrap(),
                    req_leg.last().unwrap(),
                    resp_leg.last().unwrap()
                )
                .unwrap();
            }
            let k = r.chunk_ns.len();
            if let (Some(itl), true) = (t.itl_ms, k > 1) {
                ditl.push(ms(last - first) / (k - 1) as f64 - itl);
            }
        }
    }
    let (machine_busy, peak_busy) = (o.machine_busy, o.peak_busy);
    let q = |v: &Vec<f64>, p: f64| quantile(v.clone(), p);
    format!(
        "{concurrency:>11}  {:>7}  {:>8.3}  {:>8.3}  {:>8.3}  {:>8.3}  {:>7.3}  {:>7.3}  {:>9.1}  {:>6.0} %  {:>6.0} %{}",
        dttft.len(),
        q(&dttft, 0.5),
        q(&dttft, 0.99),
        q(&req_leg, 0.99),
        q(&resp_leg, 0.99),
        q(&ditl, 0.5),
        q(&ditl, 0.99),
        o.in_flight,
        machine_busy * 100.0,
        peak_busy * 100.0,
        if machine_busy > 0.9 {
            "  CPU exhausted: the figures include waiting for a core"
        } else if peak_busy > 0.9 {
            "  CPU exhausted in bursts: the tail includes waiting for a core"
        } else {
            ""
        }
    )
}

fn main() {
    let quick = std::env::var_os("KNEEPOINT_CAPACITY_QUICK").is_some();
    let scale = if quick { 10 } else { 1 };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = std::env::var("KNEEPOINT_CLIENT_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        builder.worker_threads(n);
    }
    let rt = builder.enable_all().build().unwrap();
    println!(
        "machine: {} cores; client and simulator share it",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    // KNEEPOINT_CAPACITY_ONLY=memory|fidelity|throughput runs one part.
    let only = std::env::var("KNEEPOINT_CAPACITY_ONLY").ok();
    let part = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if part("memory") {
        memory(&rt, scale);
    }
    if part("fidelity") {
        fidelity_table(&rt, quick);
    }
    if part("throughput") {
        throughput(&rt, scale);
    }
    if part("paced") {
        paced::table(&rt, quick);
    }
}

fn memory(rt: &tokio::runtime::Runtime, scale: usize) {
    let holding = sim("fast");
    println!("\nresident memory with requests held in flight (fast simulator queues them; ISL 256, OSL 16, streaming)");
    println!("in flight  requests  failed  peak RSS MB  average in flight");
    for c in [1_000u32, 4_000, 10_000] {
        let c = c / scale as u32;
        let o = rt.block_on(level(&holding.1, true, (256, 16), c, (c as usize, 0), None));
        println!(
            "{c:>9}  {:>8}  {:>6}  {:>11.1}  {:>16.1}",
            o.requests, o.failed, o.peak_rss_mb, o.in_flight
        );
    }
    drop(holding);
}

fn fidelity_table(rt: &tokio::runtime::Runtime, quick: bool) {
    let itl_ms: f64 = std::env::var("KNEEPOINT_FIDELITY_ITL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50.0);
    let (isl, osl) = (1024, if quick { 32 } else { 256 });
    let fixed = fixed_sim(itl_ms);
    println!("\nfidelity: client-measured minus simulator-recorded, ms (simulator in its own process, TTFT 50 ms, ITL {itl_ms} ms, ISL {isl}, OSL {osl}, streaming)");
    println!("TTFT gap = request leg (client start → server arrival) + response leg (server write → client stamp); CPU busy is the whole machine's, on average and at its busiest 100 ms");
    // KNEEPOINT_FIDELITY_LEVELS=256,1024 picks the concurrency levels.
    let levels: Vec<u32> = std::env::var("KNEEPOINT_FIDELITY_LEVELS")
        .ok()
        .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 256, 1024, 4096]);
    // One request's duration: a ramp this long spreads the slots over a whole cycle.
    let cycle = Duration::from_secs_f64((50.0 + itl_ms * f64::from(osl - 1)) / 1000.0);
    for (title, ramp) in [
        ("every slot starts at the same instant (no ramp)", None),
        (
            "first wave spread over one request's duration (--ramp-up-s)",
            Some(cycle),
        ),
    ] {
        println!("{title}");
        println!("concurrency  matched  TTFT p50  TTFT p99  req p99  resp p99  ITL p50  ITL p99  in flight  CPU busy  peak 100 ms");
        for &c in &levels {
            // One slot has nothing to spread.
            if (quick && c > 256) || (ramp.is_some() && c == 1) {
                continue;
            }
            println!("{}", rt.block_on(fidelity(&fixed.1, c, (isl, osl), ramp)));
        }
    }
    drop(fixed);
}

fn throughput(rt: &tokio::runtime::Runtime, scale: usize) {
    let instant = sim("instant");
    println!("\nthroughput against the zero-latency simulator (ISL 1024, concurrency 256)");
    println!("OSL  stream  requests  failed   wall s     req/s   out tok/s  in flight  CPU µs/req  CPU ns/tok");
    for osl in [1u32, 16, 256] {
        for stream in [true, false] {
            let n = match osl {
                1 | 16 => 20_000,
                _ => 8_000,
            } / scale;
            let o = rt.block_on(level(&instant.1, stream, (1024, osl), 256, (n, 256), None));
            println!(
                "{osl:>3}  {:>6}  {:>8}  {:>6}  {:>7.2}  {:>8.0}  {:>10.0}  {:>9.1}  {:>10.1}  {:>10.0}",
                if stream { "yes" } else { "no" },
                o.requests,
                o.failed,
                o.wall_s,
                o.requests as f64 / o.wall_s,
                o.tokens as f64 / o.wall_s,
                o.in_flight,
                o.cpu_s / o.requests as f64 * 1e6,
                o.cpu_s / o.tokens.max(1) as f64 * 1e9,
            );
        }
    }
    drop(instant);
}
