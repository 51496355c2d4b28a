//! Issue 47: what the commands print is written for a person: no Rust debug text (`Some(…)`,
//! `None`, enum variant names) in any line of a sweep, a search, a comparison, a report or a
//! plan, on either stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");

fn run(args: &[&str], dir: &Path) -> String {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{args:?}: {text}"
    );
    text
}

/// Words that only Rust's `{:?}` prints.
fn debug_words(text: &str) -> Vec<String> {
    const DEBUG: [&str; 6] = [
        "Some(",
        "None",
        "Converged",
        "MaxIterations",
        "InfeasibleAtMin",
        "FeasibleAtMax",
    ];
    text.lines()
        .filter(|l| DEBUG.iter().any(|d| l.contains(d)))
        .map(str::to_owned)
        .collect()
}

#[test]
fn no_command_prints_rust_debug_text() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sim = [
        "--sim-profile",
        "fast",
        "--sim-time-scale",
        "1",
        "--isl",
        "32",
        "--osl",
        "4",
    ];
    let mut outputs = Vec::new();
    let mut sweep = vec!["sweep", "--concurrency", "1,4", "--request-count", "16"];
    sweep.extend(sim);
    sweep.extend(["--artifact-dir", "a"]);
    outputs.push(run(&sweep, tmp.path()));
    let mut search = vec!["search", "--ttft-sla-ms", "30", "--concurrency-max", "32"];
    search.extend(sim);
    search.extend(["--request-count", "32", "--artifact-dir", "s"]);
    outputs.push(run(&search, tmp.path()));
    outputs.push(run(&["compare", "a", "a"], tmp.path()));
    outputs.push(run(&["report", "s"], tmp.path()));
    let model = root.join("crates/kneepoint-fit/configs/gpt-oss-20b.json");
    outputs.push(run(
        &[
            "plan",
            "--model",
            model.to_str().unwrap(),
            "--isl",
            "1024",
            "--osl",
            "256",
        ],
        tmp.path(),
    ));
    let found: Vec<String> = outputs.iter().flat_map(|o| debug_words(o)).collect();
    assert!(
        found.is_empty(),
        "debug text printed:\n{}",
        found.join("\n")
    );
    assert!(outputs[1].contains("stopped: "), "{}", outputs[1]);
}
