//! Issue 33, item 4: shell completions and man pages, made from the parser's own definitions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use clap::CommandFactory;
use kneepoint_cli::Cli;

fn kneepoint(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completion_scripts_know_every_subcommand_and_flag() {
    let bash = kneepoint(&["completions", "bash"]);
    assert!(bash.contains("_kneepoint()"), "{bash}");
    for word in [
        "sweep",
        "search",
        "report",
        "--concurrency",
        "--request-count",
    ] {
        assert!(bash.contains(word), "bash completion lacks {word}");
    }
    // bash itself reads the script without a syntax error, where bash is installed.
    if let Ok(status) = Command::new("bash").args(["-n", "-c", &bash]).status() {
        assert!(status.success(), "bash -n rejects the script");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let script = kneepoint(&["completions", shell]);
        assert!(
            script.contains("concurrency") && script.contains("sweep"),
            "{shell}"
        );
    }
}

#[test]
fn man_pages_cover_every_subcommand() {
    let tmp = tempfile::tempdir().unwrap();
    let listed = kneepoint(&["man", "--dir", tmp.path().to_str().unwrap()]);
    let cli = Cli::command();
    let mut expected = vec!["kneepoint.1".to_owned()];
    for sub in cli.get_subcommands() {
        expected.push(format!("kneepoint-{}.1", sub.get_name()));
        for nested in sub.get_subcommands() {
            expected.push(format!(
                "kneepoint-{}-{}.1",
                sub.get_name(),
                nested.get_name()
            ));
        }
    }
    for page in &expected {
        assert!(tmp.path().join(page).is_file(), "no {page}");
        assert!(listed.contains(page.as_str()), "{page} not listed");
    }
    let sweep = std::fs::read_to_string(tmp.path().join("kneepoint-sweep.1")).unwrap();
    assert!(
        sweep.contains(".SH NAME\nkneepoint\\-sweep \\- Run a concurrency sweep"),
        "{sweep}"
    );
    assert!(sweep.contains("\\fBkneepoint sweep\\fR"), "{sweep}");
    assert!(sweep.contains("\\-\\-concurrency"));
    // Printed without a folder: the main page.
    assert!(kneepoint(&["man"]).contains(".TH kneepoint 1"));
}
