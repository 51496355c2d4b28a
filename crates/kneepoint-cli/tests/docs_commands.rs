//! Issue 47: every `kneepoint` command in the README's and docs' shell blocks parses as the
//! binary parses it (`cargo run [--release] -- …`, `kneepoint …`, `target/*/kneepoint …`), so an
//! example cannot name a flag or a value the code no longer takes, whatever its target (a
//! real endpoint, SageMaker, a cluster); and every documented sweep and search runs, made
//! small, with a simulator in place of the endpoint it names (`--url`, or a SageMaker endpoint
//! with signatures checked); `report` and `compare` run on saved runs in place of the folders
//! they name, and `k8s job` as written; a `recommend` or `--dataset` naming a file the
//! repository does not ship runs on the shipped candidates file or a small trace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use clap::Parser;
use kneepoint_cli::Cli;

mod common;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shell blocks (```sh, ```bash, ```shell) of a Markdown text, continuation lines joined.
fn shell_blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut current, fence) {
            (None, Some(info)) if matches!(info.trim(), "sh" | "bash" | "shell") => {
                current = Some(String::new())
            }
            (Some(b), Some(_)) => {
                out.push(b.replace("\\\n", " "));
                current = None;
            }
            (Some(b), None) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// Words as a shell splits them (quotes kept together, no expansion); `None` past a comment.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let (mut quote, mut in_word) = (None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// The kneepoint arguments of one shell command, if it runs kneepoint.
fn kneepoint_args(command: &[String]) -> Option<Vec<String>> {
    // Leading `NAME=value` assignments are the environment.
    let start = command
        .iter()
        .position(|w| !w.contains('=') || w.starts_with('-'))?;
    let command = &command[start..];
    let first = command.first()?;
    if first == "cargo" && command.get(1).is_some_and(|w| w == "run") {
        let dashes = command.iter().position(|w| w == "--")?;
        return Some(command[dashes + 1..].to_vec());
    }
    (first == "kneepoint" || first.ends_with("/kneepoint")).then(|| command[1..].to_vec())
}

#[test]
fn every_documented_command_parses() {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let (mut checked, mut failed) = (0, Vec::new());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for block in shell_blocks(&text) {
            for line in block.lines() {
                let all = words(line);
                for command in all.split(|w| matches!(w.as_str(), "&&" | "||" | ";" | "|" | "&")) {
                    let Some(args) = kneepoint_args(command) else {
                        continue;
                    };
                    // Redirections are the shell's.
                    let args: Vec<&String> = args
                        .iter()
                        .take_while(|w| !w.starts_with('>') && !w.starts_with('<'))
                        .collect();
                    checked += 1;
                    let argv = std::iter::once("kneepoint").chain(args.iter().map(|s| s.as_str()));
                    if let Err(e) = Cli::try_parse_from(argv) {
                        if e.use_stderr() {
                            failed.push(format!(
                                "{}: kneepoint {}\n  {}",
                                f.strip_prefix(root()).unwrap_or(f).display(),
                                args.iter()
                                    .map(|s| s.as_str())
                                    .collect::<Vec<_>>()
                                    .join(" "),
                                e.to_string().lines().next().unwrap_or("")
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} commands found: the extraction broke"
    );
    assert!(
        failed.is_empty(),
        "{} documented commands do not parse:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The README's runnable recommendation, as shipped: two simulator settings launched,
/// measured, ranked (the larger batch first: it carries more at 256) and taken down.
#[test]
fn the_shipped_recommend_example_runs_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .current_dir(root())
        .args([
            "recommend",
            "--config",
            "examples/recommend-sim.toml",
            "--quiet",
        ])
        .arg("--artifact-dir")
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("#1"))
        .unwrap_or("");
    assert!(first.contains("max_num_seqs=256"), "{stdout}");
    assert!(
        stdout.contains("deploy sim max_num_seqs=256 with:"),
        "{stdout}"
    );
}

/// The simulators that stand in for a documented command's endpoint.
struct Stand {
    /// An OpenAI-compatible server, for `--url`.
    openai: String,
    /// A SageMaker-protocol server checking signatures of [`ACCESS_KEY`], for
    /// `--sagemaker-endpoint` (given as `--endpoint-url`).
    sagemaker: String,
    /// Two saved runs of one small sweep (the second a copy), for `report` and `compare`.
    runs: [PathBuf; 2],
    /// A small trace (24 records, 50 ms apart), for a `--dataset` the repository does not ship.
    trace: PathBuf,
}

/// A documented `recommend` naming a candidates file the repository does not ship, on the
/// shipped one (`examples/recommend-sim.toml`); the shipped file as written has its own test.
fn on_shipped_candidates(args: &[String], dir: &Path) -> Option<Vec<String>> {
    let at = args.iter().position(|a| a == "--config")?;
    if root().join(args.get(at + 1)?).is_file() {
        return None;
    }
    let mut out = args.to_vec();
    out[at + 1] = "examples/recommend-sim.toml".into();
    out.extend([
        "--quiet".into(),
        "--artifact-dir".into(),
        dir.display().to_string(),
    ]);
    Some(out)
}

/// A documented `report`, `compare` or `k8s job` with its folders replaced by saved runs
/// (`None` for a placeholder argument, `...`).
fn on_saved_runs(args: &[String], stand: &Stand) -> Option<Vec<String>> {
    if args.iter().any(|a| a.contains("...")) {
        return None;
    }
    let (command, rest) = args.split_first()?;
    let takes_value =
        |f: &str| matches!(f, "--json" | "--tolerance" | "--confidence" | "--resamples");
    match command.as_str() {
        "report" | "compare" => {
            let mut out = vec![command.clone()];
            let mut folders = stand.runs.iter();
            let mut i = 0;
            while i < rest.len() {
                let a = &rest[i];
                if a.starts_with('-') {
                    out.push(a.clone());
                    if takes_value(a) {
                        i += 1;
                        let v = rest.get(i)?;
                        out.push(match a.as_str() {
                            // a file the command writes goes beside the saved runs
                            "--json" => stand.runs[0]
                                .with_file_name(Path::new(v).file_name()?)
                                .display()
                                .to_string(),
                            _ => v.clone(),
                        });
                    }
                } else {
                    out.push(folders.next()?.display().to_string());
                }
                i += 1;
            }
            Some(out)
        }
        "k8s" => Some(
            args.iter()
                .take_while(|w| !w.starts_with('>'))
                .cloned()
                .collect(),
        ),
        // the results store (the test's own, under its temporary folder)
        "history" => Some(args.to_vec()),
        "import" => {
            let mut out = vec![command.clone()];
            let mut i = 0;
            while i < rest.len() {
                if rest[i] == "--label" || rest[i] == "--store" {
                    out.extend(rest.get(i..i + 2)?.iter().cloned());
                    i += 1;
                }
                i += 1;
            }
            out.extend(stand.runs.iter().map(|r| r.display().to_string()));
            Some(out)
        }
        "check" => {
            // the runs it names are the saved ones (folders, ids or `latest` alike)
            let mut out = vec![command.clone()];
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                out.push(a.clone());
                let saved = match a.as_str() {
                    "--baseline" => &stand.runs[0],
                    "--run" => &stand.runs[1],
                    _ => continue,
                };
                it.next()?;
                out.push(saved.display().to_string());
            }
            Some(out)
        }
        _ => None,
    }
}

/// The throwaway key the SageMaker stand-in checks.
const ACCESS_KEY: (&str, &str) = ("AKIDLOCALTEST", "local-test-secret");

/// `kneepoint sim serve --port 0` on the fast profile at real time, with `args` and `env`.
fn serve(args: &[&str], env: &[(&str, &str)]) -> (std::process::Child, String) {
    let fast = ["--profile", "fast", "--time-scale", "1"];
    common::sim_serve_with(&[&fast[..], args].concat(), env)
}

/// A documented sweep or search made small: level sizes, durations, runs and rates cut down,
/// on the fast simulator at real time (or the stand-ins for its endpoint), quiet, into `dir`.
/// `None` when it needs what a test does not have (a file the repository does not ship).
fn made_small(args: &[String], dir: &Path, stand: &Stand) -> Option<Vec<String>> {
    let command = args.first()?.as_str();
    // `plan` measures nothing: run as written, when the files it names are shipped
    if command == "plan" {
        let shipped = args
            .windows(2)
            .filter(|w| matches!(w[0].as_str(), "--model" | "--instance-catalog"))
            .all(|w| root().join(&w[1]).is_file());
        let writes = args.iter().any(|a| a.starts_with("--json"));
        return (shipped && !writes).then(|| args.to_vec());
    }
    if command == "recommend" {
        return on_shipped_candidates(args, dir);
    }
    if !matches!(command, "sweep" | "search") {
        return on_saved_runs(args, stand);
    }
    let mut out = vec![command.to_owned()];
    let mut given = std::collections::BTreeSet::new();
    let mut i = 1;
    while i < args.len() {
        let (flag, inline) = match args[i].split_once('=') {
            Some((f, v)) if args[i].starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (args[i].clone(), None),
        };
        let takes_value = !matches!(
            flag.as_str(),
            "--quiet" | "--sla-by-confidence" | "--overwrite" | "-q"
        );
        let value = match (&inline, takes_value) {
            (Some(v), _) => Some(v.clone()),
            (None, true) => {
                i += 1;
                args.get(i).cloned()
            }
            (None, false) => None,
        };
        i += 1;
        if matches!(flag.as_str(), "--config" | "--artifact-dir") {
            return None;
        }
        // a tokenizer file the repository does not ship: the built-in one
        let value = match (flag.as_str(), value) {
            ("--tokenizer", Some(v)) if v.contains('/') && !root().join(&v).exists() => {
                Some("builtin".to_owned())
            }
            ("--url", Some(_)) => Some(stand.openai.clone()),
            ("--endpoint-url", Some(_)) => Some(stand.sagemaker.clone()),
            (_, v) => v,
        };
        // a dataset the repository does not ship: the small trace
        let value = match (flag.as_str(), value) {
            ("--dataset", Some(v)) if !root().join(&v).is_file() => {
                Some(stand.trace.display().to_string())
            }
            (_, v) => v,
        };
        let cap = |v: &str, most: f64| -> String {
            v.split(',')
                .map(|x| {
                    x.parse::<f64>()
                        .map_or(x.to_owned(), |n| n.min(most).to_string())
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        // Rates scaled down together (they stay distinct); levels the smallest ones.
        let scaled = |v: &str, most: f64| -> String {
            let xs: Vec<f64> = v.split(',').filter_map(|x| x.parse().ok()).collect();
            let top = xs.iter().copied().fold(0.0, f64::max);
            if top <= most {
                return v.to_owned();
            }
            xs.iter()
                .map(|x| format!("{:.2}", x * most / top))
                .collect::<Vec<_>>()
                .join(",")
        };
        let value = value.map(|v| match flag.as_str() {
            "--concurrency" => {
                ["2", "4", "8", "16", "32", "64"][..v.split(',').count().min(6)].join(",")
            }
            "--request-count" => "24".into(),
            "--num-runs" | "--min-runs" => cap(&v, 3.0),
            "--duration-s" | "--grace-s" => "1".into(),
            "--warmup-duration-s" => "0.2".into(),
            "--request-rate" => scaled(&v, 40.0),
            _ => v,
        });
        given.insert(flag.clone());
        out.push(flag);
        out.extend(value);
    }
    if given.contains("--sagemaker-endpoint") && !given.contains("--endpoint-url") {
        out.extend(["--endpoint-url".into(), stand.sagemaker.clone()]);
    }
    let on_sim = !given.contains("--url") && !given.contains("--sagemaker-endpoint");
    let defaults: [(&str, &[&str]); 6] = [
        (
            "--sim-profile",
            &["--sim-profile", "fast", "--sim-time-scale", "1"],
        ),
        ("--isl", &["--isl", "32"]),
        ("--osl", &["--osl", "4"]),
        ("--request-count", &["--request-count", "24"]),
        ("--quiet", &["--quiet"]),
        ("--concurrency", &["--concurrency", "2,4"]),
    ];
    for (flag, add) in defaults {
        let open_loop = given.contains("--request-rate")
            || given.contains("--duration-s")
            || given.contains("--replay-speedup");
        let from_dataset = given.contains("--dataset") && matches!(flag, "--isl" | "--osl");
        if given.contains(flag)
            || from_dataset
            || (flag == "--concurrency" && (open_loop || command == "search"))
            || (flag == "--sim-profile" && !on_sim)
        {
            continue;
        }
        out.extend(add.iter().map(|s| s.to_string()));
    }
    if command == "search" && !given.contains("--concurrency-max") {
        out.extend(["--concurrency-max".into(), "16".into()]);
    }
    out.extend(["--artifact-dir".into(), dir.display().to_string()]);
    Some(out)
}

/// Every documented sweep and search that runs on the built-in simulator runs, made small:
/// an example whose flags no longer combine, or whose values the code now refuses, fails here.
#[test]
fn documented_sweeps_and_searches_run_on_the_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut openai, openai_url) = serve(&[], &[]);
    let (mut sagemaker, sagemaker_url) = serve(
        &["--sigv4-access-key-id", ACCESS_KEY.0],
        &[("KNEEPOINT_SIM_SECRET_ACCESS_KEY", ACCESS_KEY.1)],
    );
    let runs = [tmp.path().join("saved-a"), tmp.path().join("saved-b")];
    let saved = std::process::Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args([
            "sweep",
            "--sim-profile",
            "fast",
            "--sim-time-scale",
            "1",
            "--isl",
            "32",
        ])
        .args([
            "--osl",
            "4",
            "--concurrency",
            "2,4",
            "--request-count",
            "24",
            "--quiet",
        ])
        .arg("--artifact-dir")
        .arg(&runs[0])
        .env("XDG_DATA_HOME", tmp.path().join("data"))
        .env_remove("KNEEPOINT_STORE")
        .status()
        .unwrap();
    assert!(saved.success());
    copy_folder(&runs[0], &runs[1]);
    let trace = tmp.path().join("trace.jsonl");
    let records: Vec<String> = (0..24)
        .map(|i| {
            format!(
                r#"{{"timestamp": {}, "input_length": 32, "output_length": 4, "hash_ids": [{i}]}}"#,
                i * 50
            )
        })
        .collect();
    std::fs::write(&trace, records.join("\n") + "\n").unwrap();
    let stand = Stand {
        openai: openai_url,
        sagemaker: sagemaker_url,
        runs,
        trace,
    };
    let (mut ran, mut on_stand, mut on_saved, mut on_files) = (0, 0, 0, 0);
    let mut failed = Vec::new();
    for f in std::iter::once(root().join("README.md")).chain(
        std::fs::read_dir(root().join("docs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md")),
    ) {
        for block in shell_blocks(&std::fs::read_to_string(&f).unwrap()) {
            for line in block.lines() {
                let all = words(line);
                for command in all.split(|w| matches!(w.as_str(), "&&" | "||" | ";" | "|" | "&")) {
                    let Some(args) = kneepoint_args(command) else {
                        continue;
                    };
                    let dir = tmp.path().join(format!("run-{ran}-{}", failed.len()));
                    let Some(small) = made_small(&args, &dir, &stand) else {
                        continue;
                    };
                    ran += 1;
                    if matches!(
                        small[0].as_str(),
                        "report" | "compare" | "k8s" | "import" | "check"
                    ) {
                        on_saved += 1;
                    }
                    let trace = stand.trace.display().to_string();
                    if small[0] == "recommend" || small.contains(&trace) {
                        on_files += 1;
                    }
                    if small
                        .iter()
                        .any(|a| a == "--url" || a == "--sagemaker-endpoint")
                    {
                        on_stand += 1;
                    }
                    // the documented environment (AWS_PROFILE=...) is the stand-in's key
                    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kneepoint"))
                        .current_dir(root())
                        .args(&small)
                        .env_remove("AWS_PROFILE")
                        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY.0)
                        .env("AWS_SECRET_ACCESS_KEY", ACCESS_KEY.1)
                        .env("AWS_REGION", "us-east-1")
                        .env("XDG_DATA_HOME", tmp.path().join("data"))
                        .env_remove("KNEEPOINT_STORE")
                        .output()
                        .unwrap();
                    if !out.status.success() {
                        failed.push(format!(
                            "{}: kneepoint {}\n  ran as: {}\n  {}",
                            f.strip_prefix(root()).unwrap_or(&f).display(),
                            args.join(" "),
                            small.join(" "),
                            String::from_utf8_lossy(&out.stderr)
                                .lines()
                                .last()
                                .unwrap_or("")
                        ));
                    }
                }
            }
        }
    }
    let _ = (
        openai.kill(),
        sagemaker.kill(),
        openai.wait(),
        sagemaker.wait(),
    );
    assert!(ran >= 10, "only {ran} documented commands ran");
    // the README's --url search and sweep, and the SageMaker sweeps and search of README.md
    // and sagemaker.md
    assert!(
        on_stand >= 5,
        "only {on_stand} ran against a stand-in endpoint"
    );
    // the README's report and compare, and the Kubernetes job of scale-out.md
    assert!(
        on_saved >= 3,
        "only {on_saved} report, compare or k8s commands ran"
    );
    eprintln!(
        "{ran} documented commands ran, {on_stand} of them against a stand-in endpoint, \
         {on_saved} on saved runs, {on_files} on the shipped candidates or a small trace"
    );
    assert!(
        failed.is_empty(),
        "{} documented commands failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// `from` copied into `to`, folders and files.
fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_folder(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
