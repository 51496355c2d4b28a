//! The store against both databases: SQLite always, PostgreSQL when its server programs are
//! on the machine (`initdb`, `pg_ctl`: Debian's `postgresql` package, which `.ci/run`
//! installs). The PostgreSQL server is a real one, in a temporary cluster started here on a
//! free port, and stopped at the end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use kneepoint_core::{Phase, RequestRecord};
use kneepoint_metrics::{GoodputSlo, LevelSummary};
use kneepoint_store::{Location, RunFilter, RunRecord, RunStatus, Store};
use serde_json::json;

fn summary(concurrency: u32, ttft_ms: u64) -> LevelSummary {
    let records: Vec<RequestRecord> = (0..40u64)
        .map(|i| {
            let mut r = RequestRecord::new(i, Phase::Profiling);
            r.start_ns = i * 1_000_000;
            r.chunk_ns = (0..8)
                .map(|k| r.start_ns + (ttft_ms + k * 10) * 1_000_000)
                .collect();
            r.first_content_ns = r.chunk_ns.first().copied();
            r.end_ns = *r.chunk_ns.last().unwrap();
            r.output_tokens = Some(8);
            r.input_tokens = Some(100);
            r
        })
        .collect();
    let mut s = LevelSummary::from_records(concurrency, &records, &GoodputSlo::default());
    s.intervals = kneepoint_metrics::level_intervals(
        concurrency,
        &records,
        [0.0, 1.0, 1.0],
        &GoodputSlo::default(),
    );
    s
}

fn run(
    id: &str,
    recorded_at: &str,
    endpoint: &str,
    model: &str,
    labels: &[(&str, &str)],
) -> RunRecord {
    let levels: Vec<_> = [(4u32, 50u64), (8, 80)]
        .iter()
        .map(|(c, t)| json!({"name": format!("concurrency_{c}"), "concurrency": c, "summary": summary(*c, *t)}))
        .collect();
    serde_json::from_value(json!({
        "id": id,
        "command": "sweep",
        "status": "complete",
        "started_at": recorded_at,
        "recorded_at": recorded_at,
        "artifact_dir": format!("/tmp/{id}"),
        "endpoint": endpoint,
        "model": model,
        "kneepoint_version": "0.1.0",
        "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
        "host": null,
        "settings": {"requests": {"request_count": 40}},
        "server": {"engines": ["vllm"]},
        "answer": {"knee": {"knee": 8}},
        "figures": {"operate_at": 8, "knee": 8, "output_token_throughput": 123.5},
        "levels": levels,
    }))
    .unwrap()
}

/// What every backend must do.
fn battery(location: &Location) {
    let mut store = Store::open(location).unwrap();
    // Opening again migrates nothing and loses nothing.
    let a = run(
        "aaaa000000000001",
        "2026-12-01T10:00:00Z",
        "http://h1:8000/v1/chat/completions",
        "llama-3-8b",
        &[("team", "infra")],
    );
    let b = run(
        "bbbb000000000002",
        "2026-12-02T10:00:00Z",
        "sagemaker:prod-ep",
        "mistral-7b",
        &[("team", "ml"), ("ci", "42")],
    );
    assert_eq!(store.record(&a).unwrap(), kneepoint_store::Recorded::Added);
    assert_eq!(store.record(&b).unwrap(), kneepoint_store::Recorded::Added);
    assert_eq!(
        store.record(&a).unwrap(),
        kneepoint_store::Recorded::AlreadyStored
    );
    let mut store = Store::open(location).unwrap();
    let all = store.runs(&RunFilter::new()).unwrap();
    assert_eq!(
        all.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["bbbb000000000002", "aaaa000000000001"]
    );
    assert_eq!(all[1].labels.get("team").map(String::as_str), Some("infra"));
    assert_eq!(all[0].figures.output_token_throughput, Some(123.5));
    assert_eq!(all[0].status, RunStatus::Complete);
    let ids = |f: RunFilter, store: &mut Store| -> Vec<String> {
        store.runs(&f).unwrap().into_iter().map(|r| r.id).collect()
    };
    assert_eq!(
        ids(RunFilter::new().endpoint("h1:8000"), &mut store),
        ["aaaa000000000001"]
    );
    assert_eq!(
        ids(RunFilter::new().model("mistral"), &mut store),
        ["bbbb000000000002"]
    );
    assert_eq!(
        ids(RunFilter::new().label("team", "ml"), &mut store),
        ["bbbb000000000002"]
    );
    assert!(ids(
        RunFilter::new().label("team", "ml").label("ci", "41"),
        &mut store
    )
    .is_empty());
    assert!(ids(RunFilter::new().command("search"), &mut store).is_empty());
    // LIKE's pattern characters are literal: `_` matches only `_`.
    assert!(ids(RunFilter::new().model("llama_3"), &mut store).is_empty());
    assert_eq!(
        ids(RunFilter::new().limit(1), &mut store),
        ["bbbb000000000002"]
    );
    // One run in full: its levels' summaries, intervals included, as written.
    let back = store.run("aaaa").unwrap().unwrap();
    assert_eq!(back.levels, a.levels);
    assert!(!back.levels[0].summary.intervals.is_empty());
    assert_eq!(back.settings, a.settings);
    assert_eq!(store.run("latest").unwrap().unwrap().id, "bbbb000000000002");
    assert!(store.run("ffff").unwrap().is_none());
    // A run with the same id is the same run, whatever its contents.
    let mut again = run("aaaa000000000001", "2026-12-03T10:00:00Z", "x", "y", &[]);
    again.levels.clear();
    assert_eq!(
        store.record(&again).unwrap(),
        kneepoint_store::Recorded::AlreadyStored
    );
    assert_eq!(store.runs(&RunFilter::new()).unwrap().len(), 2);
}

#[test]
fn sqlite_keeps_runs_filters_them_and_reads_them_back() {
    let dir = tempfile::tempdir().unwrap();
    battery(&Location::Sqlite(dir.path().join("nested/results.db")));
}

/// PostgreSQL's server programs: on PATH, or in Debian's versioned folder.
fn pg_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(debian)
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
}

/// A temporary PostgreSQL cluster, stopped when dropped.
struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    _dir: tempfile::TempDir,
    port: u16,
}

impl Cluster {
    fn start(bin: &Path) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        // initdb refuses to run as root: run it as the owner of the temporary folder, which
        // is this user unless this is root, where `postgres` (Debian's) takes it.
        let as_user = |cmd: &mut Command| -> Command {
            if is_root() {
                Command::new("chown")
                    .args(["-R", "postgres"])
                    .arg(dir.path())
                    .status()
                    .unwrap();
                let mut su = Command::new("runuser");
                su.args(["-u", "postgres", "--"])
                    .arg(cmd.get_program())
                    .args(cmd.get_args());
                su
            } else {
                std::mem::replace(cmd, Command::new("true"))
            }
        };
        let st = as_user(
            Command::new(bin.join("initdb"))
                .args(["-A", "trust", "-U", "kneepoint", "-D"])
                .arg(&data),
        )
        .output()
        .unwrap();
        assert!(
            st.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        let port = free_port();
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            dir.path().display()
        );
        let st = as_user(
            Command::new(bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .args(["-o", &opts, "-w", "-l"])
                .arg(dir.path().join("log"))
                .arg("start"),
        )
        .output()
        .unwrap();
        assert!(
            st.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        Cluster {
            bin: bin.to_owned(),
            data,
            _dir: dir,
            port,
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut cmd = Command::new(self.bin.join("pg_ctl"));
        cmd.arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"]);
        let _ = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(cmd.get_program())
                .args(cmd.get_args())
                .output()
        } else {
            cmd.output()
        };
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn postgres_keeps_the_same_runs() {
    let Some(bin) = pg_bin() else {
        assert!(
            std::env::var_os("KNEEPOINT_REQUIRE_POSTGRES").is_none(),
            "KNEEPOINT_REQUIRE_POSTGRES is set but initdb/pg_ctl are not on this machine"
        );
        eprintln!("skipped PostgreSQL: no initdb/pg_ctl on this machine (install Debian's postgresql package; .ci/run does)");
        return;
    };
    let cluster = Cluster::start(&bin);
    let url = format!(
        "postgres://kneepoint:unused-password@127.0.0.1:{}/postgres",
        cluster.port
    );
    let location = Location::parse(&url).unwrap();
    battery(&location);
    // A wrong port is an error that names the server without the password.
    let bad = Location::parse(&format!(
        "postgres://kneepoint:hunter2@127.0.0.1:{}/postgres",
        free_port()
    ))
    .unwrap();
    let e = Store::open(&bad).unwrap_err().to_string();
    assert!(e.contains("127.0.0.1") && !e.contains("hunter2"), "{e}");
}
