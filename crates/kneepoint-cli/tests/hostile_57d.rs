//! Issue 57, items 20b–20d: an error's cause is said once, not twice; a `--label` key given
//! twice is refused, naming both; request-body fields under secret-named keys (`extra_body`'s
//! `api_key`, a nested `password`) reach no settings file, export or results store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use clap::Parser;
use kneepoint_cli::{Cli, SweepSettings};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");

/// `kneepoint ARGS` with its default store under `data` (no `KNEEPOINT_STORE` from outside).
fn kneepoint(data: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("XDG_DATA_HOME", data)
        .env_remove("KNEEPOINT_STORE")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The `error: ` line of `stderr`, after checking that no part of it (split at `": "`) is
/// said twice.
fn said_once(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line in {stderr}"));
    let parts: Vec<&str> = line.split(": ").collect();
    for (i, p) in parts.iter().enumerate() {
        assert!(!parts[i + 1..].contains(p), "{p:?} is said twice: {line}");
    }
    line.to_owned()
}

#[test]
fn an_errors_cause_is_said_once() {
    let tmp = tempfile::tempdir().unwrap();
    // A model config cut short: the planner's error quotes the JSON parser's, which is also
    // its source.
    let model = tmp.path().join("config.json");
    std::fs::write(&model, "{\"hidden_size\": ").unwrap();
    let o = kneepoint(tmp.path(), &["plan", "--model", model.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let line = said_once(&err);
    assert!(
        line.contains("the model config is not a JSON object: EOF while parsing"),
        "{line}"
    );
    assert_eq!(line.matches("EOF while parsing").count(), 1, "{line}");
    // A results store under a file: the store's error quotes the OS error, also its source.
    let file = tmp.path().join("file");
    std::fs::write(&file, "not a folder").unwrap();
    let store = file.join("sub/results.db");
    let o = kneepoint(
        tmp.path(),
        &[
            "import",
            "--store",
            store.to_str().unwrap(),
            tmp.path().to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let line = said_once(&err);
    assert!(line.contains("Not a directory"), "{line}");
    assert_eq!(line.matches("(os error").count(), 1, "{line}");
}

#[test]
fn a_label_key_given_twice_is_refused_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = kneepoint(
        &tmp.path().join("data"),
        &[
            "sweep",
            "--sim-profile",
            "fast",
            "--concurrency",
            "2",
            "--request-count",
            "4",
            "--quiet",
            "--label",
            "team=a",
            "--label",
            "ci=7",
            "--label",
            "team=b",
            "--artifact-dir",
            out.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--label team given twice: team=a and team=b"),
        "{err}"
    );
    // refused before anything ran
    assert!(!out.exists());
}

/// The body the tests send: two secrets (one nested) and a field that is not one.
const BODY: &str =
    r#"{"api_key":"sk-abcdef123456","nested":{"password":"hunter2hunter2"},"temperature":0.3}"#;
const SECRETS: [&str; 2] = ["sk-abcdef123456", "hunter2hunter2"];

#[test]
fn extra_body_secrets_are_redacted_in_the_settings() {
    let cli = Cli::try_parse_from([
        "kneepoint",
        "sweep",
        "--sim-profile",
        "fast",
        "--extra-body",
        BODY,
    ])
    .unwrap();
    let kneepoint_cli::Command::Sweep(args) = cli.command else {
        panic!("not a sweep")
    };
    let settings = SweepSettings::resolve(&args).unwrap();
    let described = settings.common.describe();
    let body = &described["endpoint"]["extra_body"];
    assert_eq!(body["api_key"], "[redacted]", "{described:#}");
    assert_eq!(body["nested"]["password"], "[redacted]", "{described:#}");
    assert_eq!(body["temperature"], 0.3, "{described:#}");
    let text = described.to_string();
    for s in SECRETS {
        assert!(!text.contains(s), "{s} in {text}");
        // registered: every write scrubs it
        assert!(kneepoint_core::secrets::is_registered(s), "{s}");
    }
}

#[test]
fn extra_body_secrets_reach_no_file_and_no_store() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let out = tmp.path().join("out");
    let run = kneepoint(
        &data,
        &[
            "sweep",
            "--sim-profile",
            "fast",
            "--isl",
            "32",
            "--osl",
            "4",
            "--concurrency",
            "2",
            "--request-count",
            "8",
            "--quiet",
            "--extra-body",
            BODY,
            "--artifact-dir",
            out.to_str().unwrap(),
        ],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(data.join("kneepoint/results.db").is_file());
    let history = kneepoint(&data, &["history", "--json"]);
    assert!(history.status.success());
    let export: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("concurrency_2/profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    let body = &export["input_config"]["endpoint"]["extra_body"];
    assert_eq!(body["api_key"], "[redacted]", "{body}");
    assert_eq!(body["nested"]["password"], "[redacted]", "{body}");
    // the settings, exports, report, run log and the store's database
    let files = common::files(tmp.path());
    assert!(files.len() > 10, "{:?}", files.keys());
    for s in SECRETS {
        let holding: Vec<_> = files
            .iter()
            .filter(|(_, bytes)| bytes.windows(s.len()).any(|w| w == s.as_bytes()))
            .map(|(p, _)| p.display().to_string())
            .collect();
        assert!(holding.is_empty(), "{s} is in {holding:?}");
        for stream in [&run.stdout, &run.stderr, &history.stdout] {
            assert!(!String::from_utf8_lossy(stream).contains(s), "{s} printed");
        }
    }
}
