//! What the client costs per streamed request, and a gate on it that a busy machine cannot
//! fool: instructions counted by `valgrind --tool=callgrind`.
//!
//! Run: `cargo bench -p kneepoint-cli --bench client_cost` (release; about 3 minutes once built).
//!
//! It starts `kneepoint sim serve --profile instant` (pre-rendered bodies, no engine) in its
//! own process and drives it with the runner, OpenAI transport and JSONL sink the CLI uses:
//! ISL 1024, OSL 256, streaming chat, 64 in flight. It prints
//! 1. the time to prepare 1,024 prompts of 1,024 tokens (the built-in tokenizer);
//! 2. client CPU per stream (this process's user + system time around the level, prompts
//!    made before it), over 12,000 streams, split into user and system time;
//! 3. client instructions per stream: this harness runs itself under callgrind twice (64 and
//!    192 streams, counting only the runtime thread and the record drain), and the difference
//!    over the 128 extra streams leaves out every fixed cost. The count is compared with
//!    `benches/client_cost.baseline` (instructions per stream on the line `instructions`): more
//!    than 5 % above it fails the bench (exit 1), beyond the run-to-run noise of a few tenths
//!    of a percent. `KNEEPOINT_CLIENT_COST_UPDATE=1` writes the measured count as the new
//!    baseline. Without valgrind on the PATH the count is skipped with a note.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::{cpu_split, sim_with, Sim};

use std::process::{Command, Stdio};
use std::time::Instant;

use kneepoint_core::RecordSink;
use kneepoint_metrics::export::JsonlSink;
use kneepoint_runner::{run_level, LevelConfig};
use kneepoint_workload::Workload;

const ISL: u32 = 1024;
const OSL: u32 = 256;
const CONCURRENCY: u32 = 64;
const CHILD: &str = "KNEEPOINT_CLIENT_COST_CHILD";

fn sim() -> Sim {
    sim_with(&["--profile", "instant"])
}

fn workload() -> kneepoint_workload::SyntheticWorkload {
    support::workload(ISL, OSL)
}

/// Sends `requests` to `url` at [`CONCURRENCY`] on a current-thread runtime (one thread for
/// callgrind's toggle to follow); returns the streamed tokens.
fn drive(url: &str, requests: Vec<kneepoint_core::Request>) -> u64 {
    let transport = support::chat_transport(url, true);
    let dir = tempfile::tempdir().unwrap();
    let sink: Box<dyn RecordSink> =
        Box::new(JsonlSink::create(&dir.path().join("profile_export.jsonl")).unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = LevelConfig::new(CONCURRENCY);
    let run = rt
        .block_on(run_level(
            transport,
            &config,
            requests,
            Vec::new(),
            vec![sink],
            None,
        ))
        .unwrap();
    assert!(
        run.records.iter().all(|r| r.error.is_none()),
        "a request failed"
    );
    run.records
        .iter()
        .filter_map(|r| r.output_tokens)
        .map(u64::from)
        .sum()
}

/// Instructions callgrind counted for one child run of `n` streams.
fn instructions(url: &str, n: usize) -> Option<u64> {
    let out = tempfile::NamedTempFile::new().unwrap();
    let exe = std::env::current_exe().unwrap();
    let status = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--toggle-collect=tokio::runtime::runtime::Runtime::block_on*",
            "--toggle-collect=*kneepoint_runner*drain*",
        ])
        .arg(format!("--callgrind-out-file={}", out.path().display()))
        .arg(exe)
        .env(CHILD, format!("{url},{n}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    assert!(status.success(), "the callgrind child failed: {status}");
    let text = std::fs::read_to_string(out.path()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("summary: ").or(l.strip_prefix("totals: ")))
        .and_then(|v| v.trim().parse().ok())
}

fn main() {
    if let Ok(v) = std::env::var(CHILD) {
        let (url, n) = v.split_once(',').unwrap();
        let requests = workload().requests(n.parse().unwrap()).unwrap();
        drive(url, requests);
        return;
    }
    let sim = sim();
    let t0 = Instant::now();
    let prompts = workload().requests(1024).unwrap();
    println!(
        "prompt preparation: 1,024 prompts of {ISL} tokens in {:.3} s",
        t0.elapsed().as_secs_f64()
    );
    drop(prompts);

    let (warm, n) = (workload().requests(256).unwrap(), 12_000usize);
    drive(&sim.1, warm);
    let requests = workload().requests(n).unwrap();
    let (cpu0, t0) = (cpu_split(), Instant::now());
    let tokens = drive(&sim.1, requests);
    let (cpu1, wall) = (cpu_split(), t0.elapsed().as_secs_f64());
    let (user, system) = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
    let cpu = user + system;
    println!(
        "client CPU: {:.1} µs per stream of {OSL} tokens ({:.1} user, {:.1} system; {:.0} ns per token), {n} streams in {wall:.2} s ({:.0} streams/s), one runtime thread",
        cpu / n as f64 * 1e6,
        user / n as f64 * 1e6,
        system / n as f64 * 1e6,
        cpu / tokens.max(1) as f64 * 1e9,
        n as f64 / wall
    );

    let (a, b) = (64usize, 192usize);
    let (Some(ia), Some(ib)) = (instructions(&sim.1, a), instructions(&sim.1, b)) else {
        println!("client instructions: skipped (valgrind is not on the PATH)");
        return;
    };
    let per_stream = (ib.saturating_sub(ia)) as f64 / (b - a) as f64;
    println!(
        "client instructions: {per_stream:.0} per stream ({:.0} per token; callgrind, {a} and {b} streams)",
        per_stream / f64::from(OSL)
    );
    support::instruction_gate(
        per_stream,
        "stream",
        "client_cost.baseline",
        &format!("client instructions per {OSL}-token stream (cargo bench -p kneepoint-cli --bench client_cost)"),
        "KNEEPOINT_CLIENT_COST_UPDATE",
    );
}
