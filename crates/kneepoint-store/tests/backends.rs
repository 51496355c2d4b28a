//! The store against both databases: SQLite always, PostgreSQL when its server programs are
//! on the machine (`initdb`, `pg_ctl`: Debian's `postgresql` package, which `.ci/run`
//! installs). The PostgreSQL server is a real one, in a temporary cluster started here on a
//! free port, and stopped at the end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use kneepoint_core::{Phase, RequestRecord};
use kneepoint_metrics::{GoodputSlo, LevelSummary};
use kneepoint_store::{Deadlines, Location, OpenOptions, RunFilter, RunRecord, RunStatus, Store};
use kneepoint_testkit::postgres::Cluster;
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
    let location = Location::Sqlite(dir.path().join("nested/results.db"));
    battery(&location);
    at_once(&location);
    // a new file, made by four at once (issue 57.3)
    at_once(&Location::Sqlite(dir.path().join("fresh.db")));
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
    let Some(cluster) = Cluster::start().unwrap() else {
        return;
    };
    // Four runs opening the new database at once: one migration, every run recorded (issue
    // 57.3), and the same run recorded by four at once stored once (57.15).
    let location = Location::parse(&cluster.url("unused-password")).unwrap();
    battery(&location);
    at_once(&location);
    // the key=value form reaches the same store
    let libpq = Location::parse(&format!(
        "host=127.0.0.1 port={} user=kneepoint dbname=postgres password=unused",
        cluster.port()
    ))
    .unwrap();
    assert_eq!(
        Store::open_read(&libpq)
            .unwrap()
            .runs(&RunFilter::new())
            .unwrap()
            .len(),
        7
    );
    // A wrong port is an error that names the server without the password.
    let bad = Location::parse(&format!(
        "postgres://kneepoint:hunter2@127.0.0.1:{}/postgres",
        free_port()
    ))
    .unwrap();
    let e = Store::open(&bad).unwrap_err().to_string();
    assert!(e.contains("127.0.0.1") && !e.contains("hunter2"), "{e}");
}

/// Issue 57.1: the store is used from inside an async runtime, as the CLI's commands use it:
/// no "Cannot start a runtime from within a runtime".
#[test]
fn postgres_works_from_inside_a_runtime() {
    let Some(cluster) = Cluster::start().unwrap() else {
        return;
    };
    let location = Location::parse(&cluster.url("pw")).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut store = Store::open(&location).unwrap();
        store
            .record(&run(
                "cccc000000000003",
                "2026-12-03T10:00:00Z",
                "e",
                "m",
                &[],
            ))
            .unwrap();
        let mut read = Store::open_read(&location).unwrap();
        assert_eq!(read.runs(&RunFilter::new()).unwrap().len(), 1);
        assert!(read.run("cccc").unwrap().is_some());
    });
}

/// Issue 57.2: a frozen server (its postmaster stopped) costs a deadline, not the run.
#[test]
fn a_frozen_postgres_costs_a_deadline() {
    let Some(cluster) = Cluster::start().unwrap() else {
        return;
    };
    let location = Location::parse(&cluster.url("pw")).unwrap();
    // a new database, opened by four at once (issue 57.3)
    at_once(&location);
    cluster.signal("STOP").unwrap();
    let options = OpenOptions::default()
        .deadlines(Deadlines::default().with_total(std::time::Duration::from_secs(2)));
    let e = Store::open_with(&location, &options).unwrap_err();
    cluster.signal("CONT").unwrap();
    assert!(matches!(e, kneepoint_store::Error::Timeout { .. }), "{e}");
    assert!(!e.to_string().contains("pw@"), "{e}");
}

/// Issue 57.12: TLS as libpq's sslmode asks, against a server with a certificate of its own.
#[test]
fn postgres_over_tls_checks_the_certificate_when_asked() {
    let Some((ca_cert, cert, key)) = certificates() else {
        eprintln!("skipped TLS: no openssl program");
        return;
    };
    let Some(cluster) = Cluster::start_with(
        &[
            "ssl=on",
            "ssl_cert_file={dir}/server.crt",
            "ssl_key_file={dir}/server.key",
        ],
        &[("server.crt", &cert), ("server.key", &key)],
    )
    .unwrap() else {
        return;
    };
    let ca = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca.path(), &ca_cert).unwrap();
    let url = |q: &str| Location::parse(&format!("{}?{q}", cluster.url("pw"))).unwrap();
    // the certificate checked, host name included
    let full = url(&format!(
        "sslmode=verify-full&sslrootcert={}",
        ca.path().display()
    ));
    battery(&full);
    // no check asked: encrypted all the same
    Store::open(&url("sslmode=require")).unwrap();
    // checked against the system's roots, which do not hold it: refused
    let e = Store::open(&url("sslmode=verify-full"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("certificate") || e.contains("TLS") || e.contains("tls"),
        "{e}"
    );
}

/// A CA's certificate, and a server certificate for 127.0.0.1 it signed with its key, made
/// by the openssl program: (CA, server certificate, server key).
fn certificates() -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_owned();
    let openssl = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let ok = openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=test CA",
        "-keyout",
        &p("ca.key"),
        "-out",
        &p("ca.crt"),
    ]) && openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        &p("s.key"),
        "-out",
        &p("s.csr"),
    ]) && {
        std::fs::write(
            p("ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            &p("s.csr"),
            "-CA",
            &p("ca.crt"),
            "-CAkey",
            &p("ca.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &p("ext"),
            "-out",
            &p("s.crt"),
        ])
    };
    let read = |n: &str| std::fs::read(p(n)).unwrap();
    ok.then(|| (read("ca.crt"), read("s.crt"), read("s.key")))
}

/// Four threads record four runs and one shared run into a store none of them made.
fn at_once(location: &Location) {
    let before = match Store::open_read(location) {
        Ok(mut s) => s.runs(&RunFilter::new()).unwrap().len(),
        Err(_) => 0,
    };
    let shared = run("dddd000000000004", "2026-12-04T10:00:00Z", "e", "m", &[]);
    let added: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let shared = &shared;
                s.spawn(move || {
                    let mut store = Store::open(location).unwrap();
                    let own = run(
                        &format!("eeee00000000000{i}"),
                        "2026-12-04T11:00:00Z",
                        "e",
                        "m",
                        &[],
                    );
                    store.record(&own).unwrap();
                    store.record(shared).unwrap() == kneepoint_store::Recorded::Added
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(added.iter().filter(|a| **a).count(), 1, "{added:?}");
    let mut store = Store::open_read(location).unwrap();
    assert_eq!(store.runs(&RunFilter::new()).unwrap().len(), before + 5);
    assert_eq!(store.run("dddd").unwrap().unwrap().levels.len(), 2);
}

/// Issue 57.16: reading never makes a store or a folder; a foreign SQLite file is left as it
/// is; a store with a newer schema can be read (not written); reading changes no byte.
#[test]
fn reads_make_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/folder/r.db");
    let e = Store::open_read(&Location::Sqlite(missing.clone())).unwrap_err();
    assert!(matches!(e, kneepoint_store::Error::Missing { .. }), "{e}");
    assert!(!dir.path().join("no").exists());

    let foreign = dir.path().join("notes.db");
    let c = rusqlite::Connection::open(&foreign).unwrap();
    c.execute_batch("CREATE TABLE notes (body TEXT)").unwrap();
    drop(c);
    for e in [
        Store::open(&Location::Sqlite(foreign.clone())).unwrap_err(),
        Store::open_read(&Location::Sqlite(foreign.clone())).unwrap_err(),
    ] {
        assert!(matches!(e, kneepoint_store::Error::Foreign { .. }), "{e}");
        assert!(e.to_string().contains("notes"), "{e}");
    }
    let c = rusqlite::Connection::open(&foreign).unwrap();
    let n: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 1, "a table was added to a foreign database");
    drop(c);

    let path = dir.path().join("r.db");
    let location = Location::Sqlite(path.clone());
    let mut store = Store::open(&location).unwrap();
    store
        .record(&run(
            "ffff000000000006",
            "2026-12-05T10:00:00Z",
            "e",
            "m",
            &[],
        ))
        .unwrap();
    drop(store);
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute(
        "INSERT INTO kneepoint_schema (version, applied_at) VALUES (99, 'later')",
        [],
    )
    .unwrap();
    drop(c);
    let bytes = std::fs::read(&path).unwrap();
    let e = Store::open(&location).unwrap_err();
    assert!(
        matches!(e, kneepoint_store::Error::NewerSchema { found: 99, .. }),
        "{e}"
    );
    let mut read = Store::open_read(&location).unwrap();
    assert_eq!(read.runs(&RunFilter::new()).unwrap().len(), 1);
    assert!(read.run("ffff").unwrap().is_some());
    drop(read);
    assert!(
        std::fs::read(&path).unwrap() == bytes,
        "reading changed the file"
    );
}

/// Issue 57.12 and 57.14: the newest run is the one that ran last, not the one imported last;
/// an id prefix that starts several runs says so.
#[test]
fn latest_is_by_when_the_run_ran_and_ambiguous_prefixes_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&Location::Sqlite(dir.path().join("r.db"))).unwrap();
    let mut new = run("abcd000000000001", "2026-12-05T10:00:00Z", "e", "m", &[]);
    new.recorded_at = "2026-12-05T10:05:00Z".into();
    let mut old = run("abcd000000000002", "2026-11-01T10:00:00Z", "e", "m", &[]);
    old.recorded_at = "2026-12-06T09:00:00Z".into(); // imported later
    store.record(&new).unwrap();
    store.record(&old).unwrap();
    assert_eq!(store.run("latest").unwrap().unwrap().id, new.id);
    let e = store.run("abcd").unwrap_err();
    assert!(matches!(e, kneepoint_store::Error::Ambiguous { .. }), "{e}");
    assert!(e.to_string().contains("abcd000000000001"), "{e}");
    assert_eq!(store.run("abcd000000000002").unwrap().unwrap().id, old.id);
}
