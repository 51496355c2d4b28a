//! `--request-count 256,512,2048` and `request_count = [..]`: one count per level (issue 48
//! item 6).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use kneepoint_cli::{Cli, Command, SweepSettings};

fn resolve(args: &[&str]) -> anyhow::Result<SweepSettings> {
    let mut v = vec!["kneepoint", "sweep"];
    v.extend_from_slice(args);
    let cli = Cli::try_parse_from(v)?;
    let Command::Sweep(a) = cli.command else {
        panic!()
    };
    Ok(SweepSettings::resolve(&a)?)
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_owned()
}

/// Issue 48 item 6: a request count per level, from the flag or the file, paired with the
/// levels in order; a count list of another length, or one given to a search, is refused.
#[test]
fn a_request_count_per_level_from_the_flag_or_the_file() {
    let counts = |s: &SweepSettings| -> Vec<(u32, u32)> {
        s.plan
            .levels()
            .iter()
            .map(|l| (l.concurrency, l.request_count))
            .collect()
    };
    let s = resolve(&[
        "--concurrency",
        "64,256,1024",
        "--request-count",
        "256,512,2048",
    ])
    .unwrap();
    assert_eq!(counts(&s), [(64, 256), (256, 512), (1024, 2048)]);
    // one count still applies to every level
    let s = resolve(&["--concurrency", "1,8", "--request-count", "16"]).unwrap();
    assert_eq!(counts(&s), [(1, 16), (8, 16)]);
    let d = tempfile::tempdir().unwrap();
    let f = write(
        &d,
        "c.toml",
        "[sweep_params]\nconcurrency = [2, 4]\nrequest_count = [8, 32]\n",
    );
    let s = resolve(&["--config", &f]).unwrap();
    assert_eq!(counts(&s), [(2, 8), (4, 32)]);
    // the flag wins over the file, as every setting does
    let s = resolve(&["--config", &f, "--request-count", "5"]).unwrap();
    assert_eq!(counts(&s), [(2, 5), (4, 5)]);
    let e = resolve(&["--concurrency", "1,8", "--request-count", "4,8,16"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("3 counts for 2 concurrency levels (1, 8)"),
        "{e}"
    );
    let bad = write(&d, "b.toml", "[sweep_params]\nrequest_count = [8, 0]\n");
    let e = format!("{:#}", resolve(&["--config", &bad]).unwrap_err());
    assert!(e.contains("at least 1"), "{e}");
    let cli = Cli::try_parse_from(["kneepoint", "search", "--request-count", "8,16"]).unwrap();
    let Command::Search(a) = cli.command else {
        panic!()
    };
    let e = kneepoint_cli::SearchSettings::resolve(&a)
        .unwrap_err()
        .to_string();
    assert!(e.contains("give one --request-count, not 8,16"), "{e}");
}
