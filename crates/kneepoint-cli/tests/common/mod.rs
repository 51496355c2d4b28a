//! Shared by the sweep and search tests: settings for a run of the fast simulator at real time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::path::Path;

use clap::Parser;
use kneepoint_cli::{Cli, Command, SearchSettings, SweepSettings};

/// `kneepoint sweep` on the fast simulator at real time, quiet, into `dir`, with `osl` output
/// tokens, ISL 64 and `extra` flags.
pub fn fast_sweep(osl: &str, extra: &[&str], dir: &Path) -> anyhow::Result<SweepSettings> {
    fast_sweep_at("1", osl, extra, dir)
}

/// [`fast_sweep`] with the simulator's time stretched by `scale` (latencies × scale), so that a
/// busy machine's pauses are small beside what a test compares.
pub fn fast_sweep_at(
    scale: &str,
    osl: &str,
    extra: &[&str],
    dir: &Path,
) -> anyhow::Result<SweepSettings> {
    let dir = dir.to_str().unwrap().to_owned();
    let mut args = vec![
        "kneepoint",
        "sweep",
        "--sim-profile",
        "fast",
        "--sim-time-scale",
        scale,
        "--isl",
        "64",
        "--osl",
        osl,
        "--quiet",
        "--artifact-dir",
        &dir,
    ];
    args.extend_from_slice(extra);
    let Command::Sweep(a) = Cli::try_parse_from(args)?.command else {
        panic!("not a sweep")
    };
    Ok(SweepSettings::resolve(&a)?)
}

/// `kneepoint search` on the fast simulator at real time into `dir`, with `flags` (the
/// lengths, the range, the SLAs).
pub fn fast_search(flags: &[&str], dir: &Path) -> anyhow::Result<SearchSettings> {
    fast_search_at("1", flags, dir)
}

/// [`fast_search`] with the simulator's time stretched by `scale` (latencies × scale), so that a
/// busy machine's pauses are small beside the SLA margins.
pub fn fast_search_at(scale: &str, flags: &[&str], dir: &Path) -> anyhow::Result<SearchSettings> {
    let dir = dir.to_str().unwrap().to_owned();
    let mut args = vec![
        "kneepoint",
        "search",
        "--sim-profile",
        "fast",
        "--sim-time-scale",
        scale,
    ];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--artifact-dir", &dir]);
    let Command::Search(a) = Cli::try_parse_from(args)?.command else {
        panic!("not a search")
    };
    Ok(SearchSettings::resolve(&a)?)
}

/// Every file under `dir`, read as text and joined (to search artifacts for a secret).
pub fn all_text(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.push_str(&all_text(&p));
        } else {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
        }
    }
    out
}

/// A recommend file writing into `out`: the throughput objective, 32 input and 4 output
/// tokens a request, then `rest` (levels and candidates).
pub fn recommend_file(out: &Path, rest: &str) -> String {
    format!(
        "objective = \"throughput\"\nartifact_dir = {out:?}\n\n[workload]\nprompt_input_tokens_mean = 32\noutput_tokens_mean = 4\n{rest}"
    )
}

/// Runs `kneepoint recommend --config CFG` with `config` written to `cfg`, checks that it
/// succeeded, and returns the `recommendations.json` it wrote under `out` and what it printed.
pub fn recommend_doc(cfg: &Path, config: &str, out: &Path) -> (serde_json::Value, String) {
    std::fs::write(cfg, config).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args(["recommend", "--config"])
        .arg(cfg)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}: {text}", cfg.display());
    let doc =
        serde_json::from_slice(&std::fs::read(out.join("recommendations.json")).unwrap()).unwrap();
    (doc, text)
}

/// Each candidate of a `recommendations.json` whose `key` is a number, by name, among those
/// that `keep` accepts.
pub fn candidate_values(
    doc: &serde_json::Value,
    key: &str,
    keep: impl Fn(&serde_json::Value) -> bool,
) -> Vec<(String, f64)> {
    doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| keep(c))
        .filter_map(|c| Some((c["name"].as_str()?.to_owned(), c[key].as_f64()?)))
        .collect()
}

/// Every file under `root`, by its path relative to `root`, with its bytes.
pub fn files(root: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.strip_prefix(root).unwrap().to_owned(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

/// `kneepoint sim serve --port 0 ARGS` in its own process, and the base URL it prints.
pub fn sim_serve(args: &[&str]) -> (std::process::Child, String) {
    sim_serve_with(args, &[])
}

/// [`sim_serve`] with `env` added to its environment.
pub fn sim_serve_with(args: &[&str], env: &[(&str, &str)]) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args(["sim", "serve", "--port", "0"])
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split("listening on ")
        .nth(1)
        .unwrap()
        .trim()
        .to_owned();
    (child, url)
}
