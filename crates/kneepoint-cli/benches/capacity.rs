//! Client capacity harness: how much load kneepoint's client can drive, and what it costs.
//!
//! Run: `cargo bench -p kneepoint-cli --bench capacity` (release build; a few minutes).
//! `KNEEPOINT_CAPACITY_QUICK=1` runs a smaller version.
//!
//! It starts `kneepoint sim serve` in its own process — the `instant` profile (pre-rendered
//! bodies, no engine) for the throughput cases, the `fast` profile (which holds requests in its
//! queue) for the memory cases — and drives it from this process with the same runner, OpenAI
//! transport and record export the CLI uses. It prints, per case: requests/s, streamed output
//! tokens/s, the average requests in flight (Little's law over the records), client CPU seconds
//! per request and per token (this process's user + system time around the level, so prompt
//! generation is excluded), peak resident memory with 1k, 4k and 10k requests in flight, and
//! the client's added TTFT and ITL against the simulator's own record at 1 to 4,096 in flight
//! (with the CPU's load, flagged when it is exhausted).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kneepoint_core::RecordSink;
use kneepoint_metrics::export::JsonlSink;
use kneepoint_runner::{run_level, LevelConfig};
use kneepoint_transport::{Api, OpenAiConfig, OpenAiTransport};
use kneepoint_workload::{
    load_tokenizer, LengthDist, SyntheticConfig, SyntheticWorkload, Workload,
};

struct Sim(Child, String);

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sim(profile: &str) -> Sim {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args(["sim", "serve", "--port", "0", "--profile", profile])
        .args(["--time-scale", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the simulator");
    let out = child.stdout.take().unwrap();
    let mut url = None;
    for line in BufReader::new(out).lines() {
        let line = line.unwrap();
        if let Some(i) = line.find("listening on ") {
            url = Some(line[i + 13..].trim().to_owned());
            break;
        }
    }
    Sim(child, url.expect("the simulator's address"))
}

/// This process's user + system CPU seconds (`/proc/self/stat`, USER_HZ = 100).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
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

struct Outcome {
    records: Vec<kneepoint_core::RequestRecord>,
    requests: usize,
    failed: usize,
    wall_s: f64,
    tokens: u64,
    cpu_s: f64,
    in_flight: f64,
    peak_rss_mb: f64,
}

async fn level(
    url: &str,
    stream: bool,
    (isl, osl): (u32, u32),
    concurrency: u32,
    (n, warm): (usize, usize),
) -> Outcome {
    let tokenizer = load_tokenizer("builtin").unwrap();
    let cfg = SyntheticConfig::new(
        LengthDist::mean_stddev(f64::from(isl), 0.0),
        LengthDist::mean_stddev(f64::from(osl), 0.0),
        7,
    );
    let mut w = SyntheticWorkload::from_config(tokenizer, cfg).unwrap();
    let warmup = w.requests(warm).unwrap();
    let requests = w.requests(n).unwrap();
    let mut c = OpenAiConfig::new(url, "kneepoint-sim");
    c.api = Api::Chat;
    c.streaming = stream;
    c.send_input_token_hint = true;
    let transport = Arc::new(OpenAiTransport::new(c).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let sink: Box<dyn RecordSink> =
        Box::new(JsonlSink::create(&dir.path().join("profile_export.jsonl")).unwrap());
    // Peak resident memory during the level, sampled every 50 ms.
    let (done, peak) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let sampler = {
        let (done, peak) = (done.clone(), peak.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kb(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let run = run_level(
        transport,
        &LevelConfig::new(concurrency),
        requests,
        warmup,
        vec![sink],
        None,
    )
    .await
    .unwrap();
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds() - cpu0;
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let busy: f64 = run
        .records
        .iter()
        .map(|r| r.end_ns.saturating_sub(r.start_ns) as f64 / 1e9)
        .sum();
    Outcome {
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
    }
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    kneepoint_metrics::quantile_sorted(&v, q).unwrap_or(f64::NAN)
}

/// Client-measured TTFT and ITL minus the simulator's own record of each request, against a
/// profile whose every engine step takes 50 ms (so TTFT ≈ 50 ms and ITL ≈ 50 ms at any load:
/// no queueing, no batching cost). The simulator runs in this process to share its truth log.
async fn fidelity(concurrency: u32) -> String {
    let mut p = kneepoint_sim::SimProfile::fast();
    p.name = "fidelity".into();
    p.step_base_ms = 50.0;
    p.step_per_seq_ms = 0.0;
    p.prefill_per_token_us = 0.0;
    p.max_num_seqs = 8192;
    p.max_num_batched_tokens = 1 << 22;
    p.kv_cache_tokens = 1 << 40;
    let server = kneepoint_sim::SimServer::start_local(p).await.unwrap();
    let n = (concurrency as usize * 2).max(200);
    // One warm-up request per slot first, so every connection is open before measuring.
    let o = level(
        &server.base_url(),
        true,
        (64, 16),
        concurrency,
        (n, concurrency as usize),
    )
    .await;
    let truth: std::collections::HashMap<String, (f64, Option<f64>)> = server
        .truth()
        .into_iter()
        .filter_map(|t| Some((t.client_request_id?, (t.ttft_ms, t.itl_ms))))
        .collect();
    let (mut dttft, mut ditl) = (Vec::new(), Vec::new());
    for r in o.records.iter().filter(|r| r.error.is_none()) {
        let Some((ttft, itl)) = truth.get(&r.request_id.to_string()) else {
            continue;
        };
        let ms = |ns: u64| ns as f64 / 1e6;
        if let (Some(first), Some(last)) = (r.chunk_ns.first(), r.chunk_ns.last()) {
            dttft.push(ms(first - r.start_ns) - ttft);
            let n = r.chunk_ns.len();
            if let (Some(itl), true) = (itl, n > 1) {
                ditl.push(ms(last - first) / (n - 1) as f64 - itl);
            }
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let busy = o.cpu_s / o.wall_s / cores;
    format!(
        "{concurrency:>11}  {:>7}  {:>9.3}  {:>9.3}  {:>8.3}  {:>8.3}  {:>5.0} %{}",
        dttft.len(),
        quantile(dttft.clone(), 0.5),
        quantile(dttft, 0.99),
        quantile(ditl.clone(), 0.5),
        quantile(ditl, 0.99),
        busy * 100.0,
        if busy > 0.9 {
            "  CPU exhausted: the client's figures include waiting for a core"
        } else {
            ""
        }
    )
}

fn main() {
    let quick = std::env::var_os("KNEEPOINT_CAPACITY_QUICK").is_some();
    let scale = if quick { 10 } else { 1 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "machine: {} cores; client and simulator share it",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let holding = sim("fast");
    println!("\nresident memory with requests held in flight (fast simulator queues them; ISL 256, OSL 16, streaming)");
    println!("in flight  requests  failed  peak RSS MB  average in flight");
    for c in [1_000u32, 4_000, 10_000] {
        let c = c / scale as u32;
        let o = rt.block_on(level(&holding.1, true, (256, 16), c, (c as usize, 0)));
        println!(
            "{c:>9}  {:>8}  {:>6}  {:>11.1}  {:>16.1}",
            o.requests, o.failed, o.peak_rss_mb, o.in_flight
        );
    }
    drop(holding);
    println!("\nfidelity: client-measured minus simulator-recorded, ms (every step 50 ms; ISL 64, OSL 16, streaming; simulator in this process)");
    println!("concurrency  matched  TTFT p50  TTFT p99  ITL p50  ITL p99  CPU busy");
    for c in [1u32, 256, 1024, 4096] {
        let c = if quick { c.min(256) } else { c };
        println!("{}", rt.block_on(fidelity(c)));
    }
    let instant = sim("instant");
    println!("\nthroughput against the zero-latency simulator (ISL 1024, concurrency 256)");
    println!("OSL  stream  requests  failed   wall s     req/s   out tok/s  in flight  CPU µs/req  CPU ns/tok");
    for osl in [1u32, 16, 256] {
        for stream in [true, false] {
            let n = match osl {
                1 | 16 => 20_000,
                _ => 8_000,
            } / scale;
            let o = rt.block_on(level(&instant.1, stream, (1024, osl), 256, (n, 256)));
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
