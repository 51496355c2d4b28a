//! Issue 46 item 1: a key set in the environment and given in a header never reaches a file of
//! the artifact folder or either output stream, although the launched candidates print their
//! environment and arguments (one at start, one in the error it exits with), their command
//! holds it inside a `sh -c` string and after `--auth`, and the user hands it to them under a
//! secret-looking name (`AUTH_HEADER`). The client's own `OPENAI_API_KEY` is never passed to a
//! launched server unless named in `pass_env`. Then `k8s job` with the same key refuses it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Command, Stdio};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");
const KEY: &str = "sk-scan-secret-8d2f1e09";
const OTHER: &str = "hf-scan-other-4c1b";
const STORE_PASSWORD: &str = "pg-scan-pass-77e1";

fn config(dir: &Path) -> String {
    let env_file = dir.join("env-seen.txt").display().to_string();
    common::recommend_file(
        &dir.join("out"),
        &format!(
            r#"
[sweep_params]
concurrency = [2]
request_count = 32

[[candidates]]
name = "printer"
instance_type = "local"
price_per_hour = 1.0
[candidates.endpoint]
headers = {{ "X-Api-Key" = "{KEY}" }}
[candidates.deploy]
command = ["sh", "-c", "env > {env_file}; env; echo \"args: $*\"; echo serving --api-key {KEY} --auth {OTHER}; exec \"$0\" sim serve --port {{port}} --profile fast --time-scale 1", "{{kneepoint}}", "--auth", "{OTHER}"]
env = {{ AUTH_HEADER = "{KEY}" }}
ready_path = "/health"
ready_timeout_s = 120
stop_grace_s = 10
[candidates.deploy.kubernetes]
image = "kneepoint:latest"

[[candidates]]
name = "crasher"
instance_type = "local"
price_per_hour = 1.0
[candidates.deploy]
command = ["sh", "-c", "echo \"fatal error: refused key $AUTH_HEADER and $OPENAI_API_KEY\"; env; exit 3"]
env = {{ AUTH_HEADER = "{KEY}" }}
ready_timeout_s = 60
"#
        ),
    )
}

/// Every file under `dir` holding `needle`, by path.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let all = common::files(dir);
    assert!(
        all.len() > 10,
        "only {} files under {}",
        all.len(),
        dir.display()
    );
    all.iter()
        .filter(|(_, bytes)| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        .map(|(p, _)| p.display().to_string())
        .collect()
}

#[test]
fn a_key_in_the_environment_and_a_header_reaches_no_file_and_no_stream() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("rec.toml"), config(tmp.path())).unwrap();
    // Issue 57: the team's PostgreSQL store, its password in KNEEPOINT_STORE (a SQLite file
    // where no PostgreSQL server is installed and none is required)
    let cluster = kneepoint_testkit::postgres::Cluster::start().unwrap();
    let store = match &cluster {
        Some(c) => c.url(STORE_PASSWORD),
        None => tmp.path().join("results.db").display().to_string(),
    };
    let out = Command::new(BIN)
        .args(["recommend", "--config"])
        .arg(tmp.path().join("rec.toml"))
        .env("OPENAI_API_KEY", KEY)
        .env("KNEEPOINT_STORE", &store)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("recorded as run"), "{stderr}");
    // what the store keeps of the run
    let stored = Command::new(BIN)
        .args(["history", "--json"])
        .env("KNEEPOINT_STORE", &store)
        .output()
        .unwrap();
    assert!(stored.status.success());
    let stored = String::from_utf8_lossy(&stored.stdout).into_owned();
    assert!(stored.contains("recommend"), "{stored}");
    for secret in [KEY, OTHER, STORE_PASSWORD] {
        assert!(!stored.contains(secret), "{secret} in the store: {stored}");
        assert!(!stdout.contains(secret), "{stdout}");
        assert!(!stderr.contains(secret), "{stderr}");
        let leaks = files_holding(&tmp.path().join("out"), secret);
        assert!(leaks.is_empty(), "{secret} in {leaks:?}");
    }
    // The crasher's failure is explained, its key scrubbed where its log is quoted.
    let doc = std::fs::read_to_string(tmp.path().join("out/recommendations.json")).unwrap();
    assert!(doc.contains("refused key [redacted]"), "{doc}");
    // The printer ran with what it was given, not with the client's key.
    let seen = std::fs::read_to_string(tmp.path().join("env-seen.txt")).unwrap();
    assert!(seen.contains("AUTH_HEADER="), "{seen}");
    assert!(!seen.contains("OPENAI_API_KEY"), "{seen}");
    assert!(!seen.contains("KNEEPOINT_STORE"), "{seen}");
    let log =
        std::fs::read_to_string(tmp.path().join("out/candidate_printer/logs/server.log")).unwrap();
    assert!(log.contains("AUTH_HEADER=[redacted]"), "{log}");
    assert!(
        log.contains("--api-key [redacted] --auth [redacted]"),
        "{log}"
    );

    // The same key given to `k8s job` is refused, and shown nowhere.
    let o = Command::new(BIN)
        .args(["k8s", "job", "--shards", "2", "--pvc", "r", "--"])
        .args(["--url", "http://x:1", "--concurrency", "8"])
        .args(["--header", &format!("X-Api-Key: {KEY}")])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        !all.contains(KEY) && all.contains("--api-key-secret"),
        "{all}"
    );
}
