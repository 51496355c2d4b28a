//! What the benches share: the simulator in its own process, and this process's CPU time.
#![allow(dead_code)] // each bench uses some of these helpers

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use kneepoint_transport::{Api, OpenAiConfig, OpenAiTransport};
use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticConfig, SyntheticWorkload};

/// Synthetic prompts of exactly `isl` tokens asking for `osl`, the built-in tokenizer, seed 7.
pub fn workload(isl: u32, osl: u32) -> SyntheticWorkload {
    let cfg = SyntheticConfig::new(
        LengthDist::mean_stddev(f64::from(isl), 0.0),
        LengthDist::mean_stddev(f64::from(osl), 0.0),
        7,
    );
    SyntheticWorkload::from_config(load_tokenizer("builtin").unwrap(), cfg).unwrap()
}

/// The CLI's OpenAI chat transport to the simulator at `url`, telling it each prompt's length.
pub fn chat_transport(url: &str, stream: bool) -> Arc<OpenAiTransport> {
    let mut c = OpenAiConfig::new(url, "kneepoint-sim");
    c.api = Api::Chat;
    c.streaming = stream;
    c.send_input_token_hint = true;
    Arc::new(OpenAiTransport::new(c).unwrap())
}

/// `kneepoint sim serve` running in its own process, and its base URL.
pub struct Sim(pub Child, pub String);

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the simulator with `args` on a free port.
pub fn sim_with(args: &[&str]) -> Sim {
    // KNEEPOINT_SIM_WRAP="chrt -f 1" runs the simulator under a wrapper (e.g. a real-time
    // scheduling class, so that the client's threads never preempt it between its truth stamp
    // and its write).
    let wrap: Vec<String> = std::env::var("KNEEPOINT_SIM_WRAP")
        .map(|w| w.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let bin = env!("CARGO_BIN_EXE_kneepoint");
    let mut cmd = match wrap.split_first() {
        Some((head, rest)) => {
            let mut c = Command::new(head);
            c.args(rest).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    let mut child = cmd
        .args(["sim", "serve", "--port", "0", "--time-scale", "1"])
        .args(args)
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

/// The simulator's `fixed` profile: TTFT 50 ms, then a token every `itl_ms`, whatever the load.
pub fn fixed_sim(itl_ms: f64) -> Sim {
    sim_with(&[
        "--profile",
        "fixed",
        "--ttft-ms",
        "50",
        "--itl-ms",
        &itl_ms.to_string(),
    ])
}

/// This process's user + system CPU seconds (`/proc/self/stat`, USER_HZ = 100).
#[allow(dead_code)] // each bench uses one of the two
pub fn cpu_seconds() -> f64 {
    let (user, system) = cpu_split();
    user + system
}

/// Two time fields of `/proc/self/stat` in seconds (USER_HZ = 100), counted from the field
/// after the command name (state = 0).
fn stat_seconds(a: usize, b: usize) -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f[i].parse::<f64>().unwrap() / 100.0;
    (ticks(a), ticks(b))
}

/// This process's user and system CPU seconds, apart (`utime`, `stime`).
pub fn cpu_split() -> (f64, f64) {
    stat_seconds(11, 12)
}

/// The user and system CPU seconds of this process's waited-for children (`cutime`, `cstime`:
/// what `getrusage(RUSAGE_CHILDREN)` reports).
pub fn children_cpu_split() -> (f64, f64) {
    stat_seconds(13, 14)
}

/// Allowed growth of an instruction count over its baseline.
pub const TOLERANCE: f64 = 0.05;

/// The gate on an instruction count: `measured` (instructions per `unit`) against the
/// `instructions N` line of `baseline` (under `benches/`). With `update_env` set, rewrites the
/// baseline (headed by `header`) instead; more than [`TOLERANCE`] above it exits 1.
pub fn instruction_gate(measured: f64, unit: &str, baseline: &str, header: &str, update_env: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches")
        .join(baseline);
    if std::env::var_os(update_env).is_some() {
        std::fs::write(&path, format!("# {header}\ninstructions {measured:.0}\n")).unwrap();
        println!("baseline updated: {}", path.display());
        return;
    }
    let base: Option<f64> = std::fs::read_to_string(&path).ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("instructions "))
            .and_then(|v| v.trim().parse().ok())
    });
    match base {
        Some(base) if measured > base * (1.0 + TOLERANCE) => {
            println!(
                "REGRESSION: {measured:.0} instructions per {unit}, {:.1} % above the baseline {base:.0} (more than {:.0} %)",
                (measured / base - 1.0) * 100.0,
                TOLERANCE * 100.0
            );
            std::process::exit(1);
        }
        Some(base) => println!(
            "within {:.0} % of the baseline {base:.0} ({:+.1} %)",
            TOLERANCE * 100.0,
            (measured / base - 1.0) * 100.0
        ),
        None => println!("no baseline yet: {update_env}=1 writes one"),
    }
}

/// This process's context switches so far, voluntary and involuntary, over all its threads
/// (`getrusage`): how often its threads went to sleep and were woken, or were preempted.
pub fn context_switches() -> u64 {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .expect("getrusage");
    (u.voluntary_context_switches() + u.involuntary_context_switches()) as u64
}
