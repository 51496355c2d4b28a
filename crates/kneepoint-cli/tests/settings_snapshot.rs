//! Issue 48: every flag and file key is taken as before. The `--help` of every subcommand and
//! the resolved settings of a set of command lines and files (flags alone, files alone, both,
//! and ones the code refuses, with its message) are compared with a saved copy in
//! `tests/fixtures/settings/`. A change to how settings are read shows here as a diff to
//! review; `KNEEPOINT_BLESS=1 cargo test -p kneepoint-cli --test settings_snapshot` rewrites
//! the copy after a deliberate change.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};
use kneepoint_cli::{Cli, Command, SearchSettings, SweepSettings};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/settings")
}

/// `text` against the saved `name`, or saved when blessing.
fn check(name: &str, text: &str) {
    let path = fixtures().join(name);
    if std::env::var_os("KNEEPOINT_BLESS").is_some() {
        std::fs::create_dir_all(fixtures()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let saved = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (KNEEPOINT_BLESS=1 writes it)", path.display()));
    if saved != text {
        let first = saved
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(saved.lines().count().min(text.lines().count()));
        panic!(
            "{name} differs from the saved copy at line {}:\n  saved: {:?}\n  now:   {:?}\n\
             (review the change; KNEEPOINT_BLESS=1 rewrites the copy)",
            first + 1,
            saved.lines().nth(first).unwrap_or("<end>"),
            text.lines().nth(first).unwrap_or("<end>"),
        );
    }
}

/// The long help of `cmd` and of every subcommand below it, each under its path.
fn helps(cmd: &mut clap::Command, path: &str, out: &mut String) {
    let path = format!("{path} {}", cmd.get_name()).trim().to_owned();
    out.push_str(&format!("===== {path}\n{}\n", cmd.render_long_help()));
    for sub in cmd.get_subcommands_mut() {
        helps(sub, &path, out);
    }
}

#[test]
fn every_subcommands_help_is_as_saved() {
    let mut cmd = Cli::command().term_width(100);
    cmd.build();
    let mut out = String::new();
    helps(&mut cmd, "", &mut out);
    check("help.txt", &out);
}

/// A settings file used by the cases below, every section a sweep or search reads.
const FILE: &str = r#"
artifact_dir = "from-file"

[endpoint]
url = "http://127.0.0.1:9/v1"
model = "file-model"
type = "completions"
headers = { "X-Team" = "b" }

[workload]
prompt_input_tokens_mean = 300
prompt_input_tokens_stddev = 30
output_tokens_mean = 40
seed = 5
shared_prefix_tokens = 64

[load]
ramp_up_s = 2.0
early_stop_width = 0.1

[runs]
num_runs = 2
confidence_level = 0.9

[sweep_params]
concurrency = [4, 16]
request_count = 64
warmup_request_count = 8

[search_params]
ttft_sla_ms = 800
tpot_sla_ms = 60
concurrency_min = 2
concurrency_max = 128
search_max_iterations = 6

[fleet]
peak_concurrency = 1000
headroom = 0.2
"#;

/// Command lines (after `kneepoint`); `{file}` is [`FILE`] written to disk.
const CASES: &[&str] = &[
    "sweep",
    "sweep --concurrency 8,32 --request-count 100,200 --isl 512 --isl-stddev 50 --osl 128 --seed 7",
    "sweep --num-runs 3 --confidence-level 0.9 --converge-on time_to_first_token_p95",
    "sweep --url http://127.0.0.1:9/v1 --model m --endpoint-type completions --streaming false --header X-Team:a",
    "sweep --request-rate 2,4 --arrival gamma --burstiness 0.5 --max-in-flight 64",
    "sweep --duration-s 30 --grace-s 5 --warmup-duration-s 2",
    "sweep --isl 128,256 --osl 32",
    "sweep --shared-prefix-tokens 200 --shared-prefix-pool 4",
    "sweep --sim-profile fast --sim-time-scale 3 --ttft-sla-ms 400 --peak-concurrency 500",
    "sweep --config {file}",
    "sweep --config {file} --concurrency 2 --isl 100 --num-runs 1 --url http://127.0.0.1:10/v1",
    "sweep --concurrency 0",
    "sweep --request-rate 0",
    "sweep --grace-s 3",
    "search --ttft-sla-ms 500 --tpot-sla-ms 50 --concurrency-min 1 --concurrency-max 256",
    "search --config {file}",
    "search --config {file} --e2e-sla-ms 9000 --search-max-iterations 4",
    "search --sla time_to_first_token:p95:lt:300 --sla-by-confidence --num-runs 3",
    "search",
];

/// A refusal with its causes.
fn refusal(e: &dyn std::error::Error) -> String {
    let mut out = format!("refused: {e}");
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(&format!(": {c}"));
        cause = c.source();
    }
    out
}

/// The resolved settings of one case, or the refusal.
fn resolved(case: &str, file: &Path, tmp: &Path) -> String {
    let line = case.replace("{file}", file.to_str().unwrap());
    let mut argv = vec!["kneepoint".to_owned()];
    argv.extend(line.split(' ').map(str::to_owned));
    if !case.contains("{file}") {
        argv.extend([
            "--artifact-dir".to_owned(),
            tmp.join("out").display().to_string(),
        ]);
    }
    let text = match Cli::try_parse_from(&argv) {
        Err(e) => format!(
            "refused by the flags: {}",
            e.to_string().lines().next().unwrap_or("")
        ),
        Ok(cli) => match cli.command {
            Command::Sweep(a) => match SweepSettings::resolve(&a) {
                Ok(s) => format!("{s:#?}"),
                Err(e) => refusal(&e),
            },
            Command::Search(a) => match SearchSettings::resolve(&a) {
                Ok(s) => format!("{s:#?}"),
                Err(e) => refusal(&e),
            },
            _ => panic!("only sweeps and searches here"),
        },
    };
    text.replace(tmp.to_str().unwrap(), "<tmp>")
}

#[test]
fn resolved_settings_are_as_saved() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("settings.toml");
    std::fs::write(&file, FILE).unwrap();
    let mut out = String::new();
    for case in CASES {
        let once = resolved(case, &file, tmp.path());
        // the same twice: nothing in it depends on the run (an address, a clock)
        assert_eq!(once, resolved(case, &file, tmp.path()), "{case}");
        out.push_str(&format!("===== {case}\n{once}\n"));
    }
    check("resolved.txt", &out);
}
