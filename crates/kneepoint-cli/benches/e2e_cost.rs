//! What a whole `kneepoint sweep` process costs per request, not only its stream reader: prompt
//! preparation, sending, reading, records, summaries and files, and a gate on it.
//!
//! Run: `cargo bench -p kneepoint-cli --bench e2e_cost` (release; about 4 minutes once built).
//!
//! It starts `kneepoint sim serve --profile instant` (pre-rendered bodies, no engine) in its
//! own process and runs the release `kneepoint sweep` binary against it as a child (ISL 1024,
//! OSL 256, streaming chat). It prints
//! 1. client CPU per request, user + system: for the whole process (this process's
//!    `cutime`/`cstime` across the child's life, which `getrusage(RUSAGE_CHILDREN)` reports)
//!    and for the level alone (the CPU seconds the level's `client_health` recorded over its
//!    measured phase), at concurrency 256 with `KNEEPOINT_E2E_REQUESTS` requests (default
//!    16,384), and the level's requests per second; `KNEEPOINT_E2E_URL` points this part at
//!    another server (e.g. `benches/peers/mock-openai`, which shares no code with kneepoint)
//!    instead of the simulator;
//! 2. instructions per request of the whole process under callgrind (every thread, from
//!    `main` to exit): two child runs of 64 and 192 requests at concurrency 64, the difference
//!    over the 128 extra requests, so fixed costs (tokenizer load, runtime, report page) drop
//!    out; then the same difference for each phase, read from `callgrind_annotate
//!    --inclusive=yes` at the phase's entry functions (see [`PHASES`]), and what is left.
//!    The whole count is compared with `benches/e2e_cost.baseline`: more than 5 % above it
//!    fails the bench (exit 1). `KNEEPOINT_E2E_COST_UPDATE=1` writes the measured count as
//!    the new baseline. Without valgrind on the PATH the count is skipped with a note.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::sim_with;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Phases and the functions whose inclusive counts make them up (a substring of the function's
/// name in `callgrind_annotate`; the largest match of each pattern counts, and the patterns of
/// one phase do not nest).
const PHASES: &[(&str, &[&str])] = &[
    (
        "prompt preparation",
        &["kneepoint_workload::prompt::PromptBuilder::exact"],
    ),
    ("request bodies", &["kneepoint_transport::body::"]),
    (
        "records (JSONL lines)",
        &["kneepoint_metrics::export::record_line::"],
    ),
    (
        "summaries and exports",
        &[
            "kneepoint_metrics::export::aiperf::",
            "kneepoint_metrics::summary::",
            "kneepoint_metrics::export::inputs::",
        ],
    ),
    ("report page and plots", &["kneepoint_report::"]),
];

fn sweep_args(url: &str, concurrency: u32, requests: u32, dir: &Path) -> Vec<String> {
    [
        "sweep",
        "--url",
        url,
        "--model",
        "kneepoint-sim",
        "--isl",
        "1024",
        "--osl",
        "256",
        "--seed",
        "7",
        "--quiet",
        "--no-server-metrics",
        "--concurrency",
        &concurrency.to_string(),
        "--request-count",
        &requests.to_string(),
        "--artifact-dir",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([dir.display().to_string()])
    .collect()
}

fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find(&p, name) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|f| f == name) {
            return Some(p);
        }
    }
    None
}

/// The level's measured-phase CPU seconds, records and requests per second.
fn level_figures(dir: &Path) -> (f64, f64, f64) {
    let path = find(dir, "profile_export_aiperf.json").expect("the level's summary");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cpu = v["client_health"]["cpu_seconds"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let count = v["request_count"]["avg"].as_f64().unwrap_or(f64::NAN);
    let rps = v["request_throughput"]["avg"].as_f64().unwrap_or(f64::NAN);
    (cpu, count, rps)
}

/// Runs the whole sweep once and prints its cost per request.
fn whole_process(url: &str, requests: u32) {
    let bin = env!("CARGO_BIN_EXE_kneepoint");
    let dir = tempfile::tempdir().unwrap();
    let (c0, t0) = (support::children_cpu_split(), Instant::now());
    let status = Command::new(bin)
        .args(sweep_args(url, 256, requests, dir.path()))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    let (c1, wall) = (support::children_cpu_split(), t0.elapsed().as_secs_f64());
    assert!(status.success(), "the sweep failed: {status}");
    let (user, system) = (c1.0 - c0.0, c1.1 - c0.1);
    let (level_cpu, count, rps) = level_figures(dir.path());
    let n = f64::from(requests);
    println!(
        "whole process: {:.0} µs CPU per request ({:.0} user, {:.0} system), {requests} requests at 256 in {wall:.1} s wall",
        (user + system) / n * 1e6,
        user / n * 1e6,
        system / n * 1e6,
    );
    println!(
        "level alone:   {:.0} µs CPU per request over its measured phase ({count:.0} records, {rps:.0} requests/s); the rest ({:.0} µs) is start-up, prompts, summaries and files",
        level_cpu / count * 1e6,
        (user + system - level_cpu) / n * 1e6,
    );
}

/// Runs the sweep of `n` requests under callgrind; returns its total and the annotate text.
fn callgrind(url: &str, n: u32) -> Option<(u64, String)> {
    let bin = env!("CARGO_BIN_EXE_kneepoint");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cg.out");
    let status = Command::new("valgrind")
        .args(["--tool=callgrind", "--trace-children=no"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(bin)
        .args(sweep_args(url, 64, n, &dir.path().join("run")))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    assert!(status.success(), "the callgrind child failed: {status}");
    let text = std::fs::read_to_string(&out).unwrap();
    let total = text
        .lines()
        .find_map(|l| l.strip_prefix("summary: ").or(l.strip_prefix("totals: ")))
        .and_then(|v| v.trim().parse().ok())?;
    let annotated = Command::new("callgrind_annotate")
        .args(["--inclusive=yes", "--threshold=100"])
        .arg(&out)
        .output()
        .ok()?;
    Some((
        total,
        String::from_utf8_lossy(&annotated.stdout).into_owned(),
    ))
}

/// The largest inclusive count among the functions whose line holds `pattern`.
fn inclusive(annotated: &str, pattern: &str) -> u64 {
    annotated
        .lines()
        .filter(|l| l.contains(pattern))
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|n| n.replace(',', "").parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

fn phase(annotated: &str, patterns: &[&str]) -> u64 {
    patterns.iter().map(|p| inclusive(annotated, p)).sum()
}

fn main() {
    let sim = sim_with(&["--profile", "instant"]);
    let requests = std::env::var("KNEEPOINT_E2E_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16_384u32);
    let target = std::env::var("KNEEPOINT_E2E_URL").unwrap_or_else(|_| sim.1.clone());
    println!("server: {target}");
    whole_process(&target, requests);

    let (a, b) = (64u32, 192u32);
    let (Some((ia, ta)), Some((ib, tb))) = (callgrind(&sim.1, a), callgrind(&sim.1, b)) else {
        println!("instructions: skipped (valgrind is not on the PATH)");
        return;
    };
    let extra = f64::from(b - a);
    let per_request = ib.saturating_sub(ia) as f64 / extra;
    println!(
        "instructions: {per_request:.0} per request, whole process (callgrind, {a} and {b} requests at 64)"
    );
    let mut named = 0.0;
    for (label, patterns) in PHASES {
        let d = phase(&tb, patterns).saturating_sub(phase(&ta, patterns)) as f64 / extra;
        named += d;
        println!(
            "  {label:<24} {d:>10.0}  ({:.1} %)",
            d / per_request * 100.0
        );
    }
    let rest = per_request - named;
    println!(
        "  {:<24} {rest:>10.0}  ({:.1} %)",
        "sending, reading, runtime",
        rest / per_request * 100.0
    );
    support::instruction_gate(
        per_request,
        "request",
        "e2e_cost.baseline",
        "instructions per request of a whole `kneepoint sweep` (cargo bench -p kneepoint-cli --bench e2e_cost)",
        "KNEEPOINT_E2E_COST_UPDATE",
    );
}
