//! Issue 57.1-57.3: every store command against a real PostgreSQL (a temporary cluster
//! started here; `.ci/run` installs Debian's server and sets KNEEPOINT_REQUIRE_POSTGRES, so
//! this cannot skip there): runs recording themselves, `import` (four at once into the new
//! database), `history`, `check` and the `dashboard` over HTTP, by `--store` and by
//! `KNEEPOINT_STORE`; a frozen server costs a run its record (with a warning), never the run;
//! the password appears nowhere.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use kneepoint_testkit::postgres::Cluster;

mod common;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");
const PASSWORD: &str = "pg-pass-57-secret";

fn kneepoint(data: &Path, store: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("XDG_DATA_HOME", data)
        .env_remove("KNEEPOINT_STORE")
        .stdin(Stdio::null());
    if let Some(url) = store {
        cmd.env("KNEEPOINT_STORE", url);
    }
    let o = cmd.output().unwrap();
    let all = text(&o);
    assert!(!all.contains(PASSWORD), "the password was shown: {all}");
    assert!(!all.contains("panicked"), "{all}");
    assert!(
        !matches!(o.status.code(), Some(101 | 134 | 137) | None),
        "{:?}: {all}",
        o.status
    );
    o
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn sweep_args<'a>(dir: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "sweep",
        "--sim-profile",
        "fast",
        "--isl",
        "64",
        "--osl",
        "8",
        "--concurrency",
        "2,4",
        "--request-count",
        "24",
        "--quiet",
        "--artifact-dir",
        dir,
    ];
    args.extend_from_slice(extra);
    args
}

fn recorded_id(o: &Output) -> String {
    let said = String::from_utf8_lossy(&o.stderr);
    said.split("recorded as run ")
        .nth(1)
        .unwrap_or_else(|| panic!("{said}"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

fn get(port: u16, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    let code = body
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, body)
}

#[test]
fn every_store_command_works_on_postgres() {
    let Some(cluster) = Cluster::start().unwrap() else {
        return;
    };
    let url = cluster.url(PASSWORD);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // a folder made without the store, imported by four at once into the new database
    let first = tmp.path().join("first");
    let o = kneepoint(
        &data,
        None,
        &sweep_args(first.to_str().unwrap(), &["--no-store"]),
    );
    assert!(o.status.success(), "{}", text(&o));
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(BIN)
                .args(["import", "--store", &url, first.to_str().unwrap()])
                .args(["--label", "ci=first"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert!(!text(&o).contains(PASSWORD));
    }
    // a run recording itself, by KNEEPOINT_STORE
    let second = tmp.path().join("second");
    let o = kneepoint(
        &data,
        Some(&url),
        &sweep_args(second.to_str().unwrap(), &["--label", "ci=second"]),
    );
    assert!(o.status.success(), "{}", text(&o));
    let id = recorded_id(&o);
    // history, both ways
    let o = kneepoint(&data, None, &["history", "--json", "--store", &url]);
    assert!(o.status.success(), "{}", text(&o));
    let runs: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    assert_eq!(runs[0]["id"], id.as_str());
    let o = kneepoint(&data, Some(&url), &["history", "--label", "ci=first"]);
    assert!(
        o.status.success() && text(&o).lines().count() == 2,
        "{}",
        text(&o)
    );
    // check: the second against the first (same workload), by id and by `latest`
    let o = kneepoint(
        &data,
        Some(&url),
        &["check", "--baseline", "latest", "--run", &id, "--json"],
    );
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["run"], id.as_str());
    // the dashboard over HTTP
    let mut dash = Command::new(BIN)
        .args(["dashboard", "--port", "0", "--store", &url])
        .env_remove("KNEEPOINT_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(dash.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(!line.contains(PASSWORD), "{line}");
    let port: u16 = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    let (code, page) = get(port, "/");
    assert_eq!(code, 200, "{page}");
    assert!(page.contains(&id), "{page}");
    let (code, body) = get(port, &format!("/runs/{id}.json"));
    assert_eq!(code, 200, "{body}");
    let (code, body) = get(port, "/?label=nokey");
    assert_eq!(code, 400, "{body}");
    let _ = dash.kill();
    let _ = dash.wait();
    // a frozen server: the run ends, with a warning, and its folder imports later
    let third = tmp.path().join("third");
    cluster.signal("STOP").unwrap();
    let o = kneepoint(
        &data,
        None,
        &sweep_args(third.to_str().unwrap(), &["--store", &url]),
    );
    cluster.signal("CONT").unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("not recorded"), "{}", text(&o));
    let o = kneepoint(
        &data,
        None,
        &["import", "--store", &url, third.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    // nothing in the folders holds the password
    for dir in [&first, &second, &third] {
        assert_no_password(dir);
    }
}

fn assert_no_password(dir: &Path) {
    for (path, bytes) in common::files(dir) {
        assert!(
            !bytes
                .windows(PASSWORD.len())
                .any(|w| w == PASSWORD.as_bytes()),
            "{} holds the password",
            path.display()
        );
    }
}
