//! Issue 50: `kneepoint dashboard` serves the results store: the runs table, trend plots with
//! intervals, each run's report one click away (a deleted folder's is a page that says so);
//! nothing outside the store is reachable. In real headless Chromium (Debian's; `.ci/run`
//! installs it and sets KNEEPOINT_REQUIRE_CHROMIUM=1, elsewhere the browser part is skipped
//! with a note), the page renders its rows and plots, and its screenshot shows the plots'
//! lines.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");

fn sweep(data: &Path, dir: &Path) -> String {
    let o = Command::new(BIN)
        .args([
            "sweep",
            "--sim-profile",
            "fast",
            "--sim-time-scale",
            "2",
            "--isl",
            "64",
            "--osl",
            "8",
            "--concurrency",
            "2,8",
            "--request-count",
            "40",
            "--quiet",
            "--label",
            "job=dash",
            "--artifact-dir",
            dir.to_str().unwrap(),
        ])
        .env("XDG_DATA_HOME", data)
        .env_remove("KNEEPOINT_STORE")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{said}");
    let id = said
        .split("recorded as run ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    id.to_owned()
}

struct Dashboard(Child, String);

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn dashboard(data: &Path) -> Dashboard {
    let mut child = Command::new(BIN)
        .args(["dashboard", "--port", "0"])
        .env("XDG_DATA_HOME", data)
        .env_remove("KNEEPOINT_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.split_whitespace().nth(1).unwrap().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    Dashboard(child, url)
}

/// GET `path`: the status and the body.
fn get(base: &str, path: &str) -> (u16, String) {
    let addr = base.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

fn chromium() -> Option<PathBuf> {
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

fn browser(exe: &Path, profile: &Path, what: &[&str], url: &str) -> Vec<u8> {
    let o = Command::new(exe)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(what)
        .arg(url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

#[test]
fn the_dashboard_lists_the_runs_draws_their_trends_and_links_their_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let ids: Vec<String> = (0..3)
        .map(|i| sweep(&data, &tmp.path().join(format!("run{i}"))))
        .collect();
    // the oldest run's folder is gone: the store still lists it
    std::fs::remove_dir_all(tmp.path().join("run0")).unwrap();
    let d = dashboard(&data);
    let (status, page) = get(&d.1, "/");
    assert_eq!(status, 200);
    for id in &ids {
        assert!(page.contains(&format!("data-run=\"{id}\"")), "{id}");
    }
    for trend in ["trend-throughput", "trend-ttft", "trend-e2e"] {
        assert!(
            page.contains(&format!("<figure id=\"{trend}\"><svg")),
            "{trend}"
        );
    }
    assert!(!page.contains("<script"));
    // filtered by the form's query
    let (_, none) = get(&d.1, "/?label=job%3Dother");
    assert!(!none.contains("data-run="));
    // each run's report, or a page saying its folder is gone; nothing outside the store
    let (status, report) = get(&d.1, &format!("/runs/{}/report.html", ids[2]));
    assert_eq!(status, 200);
    assert!(report.contains("<svg"), "the run's own report.html");
    let (status, gone) = get(&d.1, &format!("/runs/{}/report.html", ids[0]));
    assert_eq!(status, 404);
    assert!(gone.contains("no longer holds report.html"), "{gone}");
    let (status, json) = get(&d.1, &format!("/runs/{}.json", ids[0]));
    assert_eq!(status, 200);
    assert!(json.contains("\"levels\""));
    for bad in [
        "/runs/../../etc/passwd",
        "/runs/zz/report.html",
        "/etc/passwd",
        "/runs/abcd/x",
    ] {
        assert_eq!(get(&d.1, bad).0, 404, "{bad}");
    }
    let Some(exe) = chromium() else {
        assert!(
            std::env::var_os("KNEEPOINT_REQUIRE_CHROMIUM").is_none(),
            "KNEEPOINT_REQUIRE_CHROMIUM is set but no Chromium is installed"
        );
        eprintln!(
            "skipped the browser checks: no Chromium (apt-get install chromium; .ci/run does)"
        );
        return;
    };
    // What the browser built: the rows and the plots' titles.
    let dom =
        String::from_utf8(browser(&exe, &tmp.path().join("p1"), &["--dump-dom"], &d.1)).unwrap();
    assert_eq!(dom.matches("<tr data-run=").count(), 3, "{dom}");
    for title in [
        "output tokens/s at the operating level",
        "TTFT p95 at the operating level",
        "e2e latency p99 at the operating level",
    ] {
        assert!(dom.contains(title), "{title}");
    }
    // What a person sees: the screenshot holds the plots' lines (the report's blue).
    let shot = tmp.path().join("dashboard.png");
    browser(
        &exe,
        &tmp.path().join("p2"),
        &[&format!("--screenshot={}", shot.display())],
        &d.1,
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1400, 1000));
    let step = info.color_type.samples();
    let blue = buf[..info.buffer_size()]
        .chunks(step)
        .filter(|p| p[0].abs_diff(31) < 12 && p[1].abs_diff(119) < 12 && p[2].abs_diff(180) < 12)
        .count();
    assert!(
        blue > 500,
        "only {blue} pixels of the plots' blue in the screenshot"
    );
}

/// Issue 57.9: idle connections past the descriptors the dashboard may open neither stop it
/// nor keep others out: they are capped, and closed when they send nothing.
#[test]
fn idle_connections_never_exhaust_the_dashboard() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 48 && exec {BIN} dashboard --port 0 --header-timeout-s 1"
        ))
        .env("XDG_DATA_HOME", tmp.path())
        .env_remove("KNEEPOINT_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.split_whitespace().nth(1).unwrap().to_owned();
    let dash = Dashboard(child, url.clone());
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    // more idle connections than the process has descriptors
    let idle: Vec<_> = (0..80)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let (status, body) = get(&url, "/");
    assert_eq!(status, 200, "{body}");
    // no store was made by reading it
    assert!(!tmp.path().join("kneepoint").exists());
    drop(idle);
    let mut dash = dash;
    assert!(dash.0.try_wait().unwrap().is_none(), "the dashboard exited");
}

/// Issue 57.11: a report of any size is streamed, not read whole: a 3 GiB one is served under
/// a 3 GB address-space limit.
#[test]
fn a_huge_report_is_streamed() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = tmp.path().join("run");
    let id = sweep(&data, &dir);
    let report = std::fs::File::create(dir.join("report.html")).unwrap();
    let len: u64 = 3 << 30;
    report.set_len(len).unwrap(); // sparse: no disk
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 3000000 && exec {BIN} dashboard --port 0"
        ))
        .env("XDG_DATA_HOME", &data)
        .env_remove("KNEEPOINT_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.split_whitespace().nth(1).unwrap().to_owned();
    let mut dash = Dashboard(child, url.clone());
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /runs/{id}/report.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    let mut head = Vec::new();
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        if head.len() < 64 {
            head.extend_from_slice(&buf[..n.min(64)]);
        }
        total += n as u64;
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    assert!(total > len, "{total} bytes of {len}");
    assert!(dash.0.try_wait().unwrap().is_none(), "the dashboard exited");
}
