//! The local launcher's failure modes with no real server: never ready, exits early, port
//! taken (and a retry on another port), interrupted while starting, stopped twice, dropped
//! while running, a server that ignores SIGTERM, and leftovers of a launcher that is gone.
//! The "servers" are shell commands; readiness answers come from a scripted `Fetch`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kneepoint_core::{async_trait, Fetch, Fetched};
use kneepoint_deploy::{find_leftovers, launched_by, remove_leftovers, Error, LocalSpec, TAG_VAR};
use kneepoint_runner::CancelToken;

/// Answers `status` to every probe once `ready_after` probes have been refused.
#[derive(Debug)]
struct Probe {
    ready_after: usize,
    calls: AtomicUsize,
}

impl Probe {
    fn ready_after(n: usize) -> Arc<Probe> {
        Arc::new(Probe {
            ready_after: n,
            calls: AtomicUsize::new(0),
        })
    }
    fn never() -> Arc<Probe> {
        Probe::ready_after(usize::MAX)
    }
}

#[async_trait]
impl Fetch for Probe {
    async fn get(&self, _: &str, _: Duration, _: usize) -> Result<Fetched, String> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n >= self.ready_after {
            Ok(Fetched::new(200, b"{}".to_vec(), 0, 0, 0))
        } else {
            Err("connection refused".into())
        }
    }
}

/// Answers 200 once the server's log says `text` (a server that is listening), refuses
/// before: no race with a server that exits at once.
#[derive(Debug)]
struct LogSays {
    path: std::path::PathBuf,
    text: &'static str,
}

#[async_trait]
impl Fetch for LogSays {
    async fn get(&self, _: &str, _: Duration, _: usize) -> Result<Fetched, String> {
        let log = std::fs::read_to_string(&self.path).unwrap_or_default();
        if log.contains(self.text) {
            Ok(Fetched::new(200, b"{}".to_vec(), 0, 0, 0))
        } else {
            Err("connection refused".into())
        }
    }
}

/// Ready once the server printed `READY` (its command spells it `RE""ADY`, so that the
/// command line at the head of the log does not count).
fn ready_when_printed(s: &LocalSpec) -> Arc<LogSays> {
    Arc::new(LogSays {
        path: s.log_path.clone(),
        text: "READY",
    })
}

fn spec(dir: &tempfile::TempDir, name: &str, script: &str) -> LocalSpec {
    let mut s = LocalSpec::new(
        name,
        vec!["sh".into(), "-c".into(), script.into()],
        dir.path().join(name).join("logs/server.log"),
    );
    s.ready_timeout = Duration::from_secs(120);
    s.stop_grace = Duration::from_secs(5);
    s
}

/// Processes tagged for `candidate` by this test process that are still running.
fn running(candidate: &str) -> Vec<i32> {
    launched_by(std::process::id())
        .into_iter()
        .filter(|(_, c)| c == candidate)
        .map(|(pid, _)| pid)
        .collect()
}

/// Waits (bounded) until `n` processes of `candidate` are seen: a process caught in the
/// middle of an `exec` shows no environment for an instant (seen once on a loaded machine).
async fn assert_running(candidate: &str, n: usize) {
    for _ in 0..200 {
        if running(candidate).len() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(running(candidate).len(), n, "{candidate}");
}

/// Waits (bounded) until no process of `candidate` runs: a stop reaps its own child, but a
/// shell's children may take a moment to be reaped by init.
async fn assert_gone(candidate: &str) {
    for _ in 0..200 {
        if running(candidate).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("still running: {:?}", running(candidate));
}

#[tokio::test]
async fn a_server_that_never_answers_is_stopped_at_its_deadline() {
    let d = tempfile::tempdir().unwrap();
    let mut s = spec(&d, "never", "echo loading weights; exec sleep 300");
    s.ready_timeout = Duration::from_secs(1);
    let e = s
        .launch(Probe::never(), &CancelToken::new())
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::NotReady { .. }), "{msg}");
    assert!(
        msg.contains("did not answer http://127.0.0.1:") && msg.contains("/v1/models within 1 s"),
        "{msg}"
    );
    assert!(
        msg.contains("loading weights"),
        "the log's tail is in the message: {msg}"
    );
    assert_gone("never").await;
}

#[tokio::test]
async fn a_server_that_exits_early_fails_with_its_own_error_line() {
    let d = tempfile::tempdir().unwrap();
    let s = spec(
        &d,
        "exits",
        "echo starting; echo 'api_server.py: error: unrecognized arguments: --bogus-flag' >&2; exit 2",
    );
    let e = s
        .launch(Probe::never(), &CancelToken::new())
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Exited { .. }), "{msg}");
    assert!(
        msg.starts_with("exits exited (exit status: 2) before it was ready: api_server.py: error: unrecognized arguments: --bogus-flag"),
        "{msg}"
    );
    let log = std::fs::read_to_string(d.path().join("exits/logs/server.log")).unwrap();
    assert!(
        log.starts_with("# kneepoint: starting sh -c 'echo starting;"),
        "{log}"
    );
    assert_gone("exits").await;
}

#[tokio::test]
async fn a_taken_port_is_named_and_a_chosen_port_is_tried_again() {
    let d = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut fixed = spec(
        &d,
        "fixed",
        "echo 'OSError: [Errno 98] error while attempting to bind on address: address already in use'; exit 1",
    );
    fixed.port = Some(port);
    let e = fixed
        .launch(Probe::ready_after(0), &CancelToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::PortTaken { port: p, .. } if p == port),
        "{e}"
    );
    assert!(
        e.to_string().contains(&format!("port {port}: it is taken")),
        "{e}"
    );

    // A port kneepoint chose and lost is replaced: the second try starts.
    let marker = d.path().join("tried");
    let script = format!(
        "if [ -e {m} ]; then echo RE\"\"ADY on {{port}}; exec sleep 300; else touch {m}; echo 'Address already in use'; exit 1; fi",
        m = marker.display()
    );
    let retry = spec(&d, "retry", &script);
    let probe = Arc::new(LogSays {
        path: retry.log_path.clone(),
        // Not "READY" as the command shows it (RE""ADY), but as the shell prints it.
        text: "READY",
    });
    let mut server = retry.launch(probe, &CancelToken::new()).await.unwrap();
    let log = std::fs::read_to_string(server.log_path()).unwrap();
    assert_eq!(log.matches("# kneepoint: starting").count(), 2, "{log}");
    assert!(
        log.contains(&format!("READY on {}", server.port())),
        "{log}"
    );
    server.stop().await.unwrap();
    assert_gone("retry").await;
}

#[tokio::test]
async fn an_interrupt_while_starting_stops_the_server() {
    let d = tempfile::tempdir().unwrap();
    let s = spec(&d, "interrupted", "exec sleep 300");
    let cancel = CancelToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c.cancel();
    });
    let e = s.launch(Probe::never(), &cancel).await.unwrap_err();
    assert!(matches!(e, Error::Cancelled { .. }), "{e}");
    assert_gone("interrupted").await;
}

#[tokio::test]
async fn stopping_twice_is_fine_and_a_dropped_server_is_killed() {
    use kneepoint_engine::Deployment as _;
    let d = tempfile::tempdir().unwrap();
    // Ready once the shell has run (before that, a forked child still shows this process's
    // environment in /proc, without the tag).
    let mut s = spec(&d, "twice", "sleep 300 & sleep 300 & echo RE\"\"ADY; wait");
    s.values.insert("unused".into(), "1".into());
    let printed = ready_when_printed(&s);
    let mut server = s.launch(printed, &CancelToken::new()).await.unwrap();
    assert!(server.launch_time() > Duration::ZERO);
    assert_eq!(running("twice").len(), 3, "the shell and its two children");
    let recipe = server.recipe().unwrap();
    assert_eq!(recipe["kind"], "local_process");
    assert_eq!(recipe["argv"][0], "sh");
    server.teardown().await.unwrap();
    assert_gone("twice").await;
    server.teardown().await.unwrap();
    server.stop().await.unwrap();

    let dropped = spec(&d, "dropped", "echo RE\"\"ADY; exec sleep 300");
    let printed = ready_when_printed(&dropped);
    let dropped = dropped.launch(printed, &CancelToken::new()).await.unwrap();
    assert_running("dropped", 1).await;
    drop(dropped);
    assert_gone("dropped").await;
}

#[tokio::test]
async fn a_server_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let d = tempfile::tempdir().unwrap();
    let mut s = spec(
        &d,
        "stubborn",
        "trap '' TERM; echo RE\"\"ADY; while true; do sleep 0.2; done",
    );
    s.stop_grace = Duration::from_millis(500);
    let printed = ready_when_printed(&s);
    let mut server = s.launch(printed, &CancelToken::new()).await.unwrap();
    let t0 = std::time::Instant::now();
    server.stop().await.unwrap();
    // The shell outlived SIGTERM: only SIGKILL, after the grace period, stopped it.
    assert!(t0.elapsed() >= Duration::from_millis(500));
    assert_gone("stubborn").await;
}

#[tokio::test]
async fn secrets_in_the_environment_stay_out_of_the_recipe() {
    use kneepoint_engine::Deployment as _;
    let d = tempfile::tempdir().unwrap();
    let mut s = spec(&d, "env", "exec sleep 300");
    s.env.insert("HF_TOKEN".into(), "hf_secret_value".into());
    s.env.insert("VLLM_PORT".into(), "{port}".into());
    let mut server = s
        .launch(Probe::ready_after(0), &CancelToken::new())
        .await
        .unwrap();
    let recipe = server.recipe().unwrap().to_string();
    assert!(!recipe.contains("hf_secret_value"), "{recipe}");
    assert!(recipe.contains(r#""HF_TOKEN":"[redacted]""#), "{recipe}");
    assert!(
        recipe.contains(&format!(r#""VLLM_PORT":"{}""#, server.port())),
        "{recipe}"
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn bad_settings_are_refused_before_anything_starts() {
    let d = tempfile::tempdir().unwrap();
    let e = |s: LocalSpec| s.validate().unwrap_err().to_string();
    let mut s = spec(&d, "bad", "serve --tp {tensor_parallel}");
    s.values.insert("max_num_seqs".into(), "8".into());
    let msg = e(s);
    assert!(
        msg.contains("{tensor_parallel}") && msg.contains("{max_num_seqs}"),
        "{msg}"
    );
    assert!(e(LocalSpec::new("empty", Vec::new(), d.path().join("l"))).contains("command is empty"));
    let mut s = spec(&d, "path", "true");
    s.ready_path = "health".into();
    assert!(e(s).contains("ready_path"));
    let mut s = spec(&d, "zero", "true");
    s.ready_timeout = Duration::ZERO;
    assert!(e(s).contains("ready_timeout"));
    assert!(!d.path().join("bad").exists(), "nothing was created");
}

#[tokio::test]
async fn leftovers_of_a_launcher_that_is_gone_are_found_and_removed() {
    use std::os::unix::process::CommandExt as _;
    // A process tagged by a launcher that no longer exists (pid 1's start time never matches
    // this made-up one), in a group of its own, as a crashed run leaves its servers.
    let mut child = std::process::Command::new("sh")
        .args(["-c", "exec sleep 300"])
        .env(TAG_VAR, "1:424242:orphaned-candidate")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // The child may still be between fork and exec (its command line then reads empty): look
    // again until it runs `sleep`, for at most 10 s (a busy machine takes milliseconds).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let found = loop {
        let found = find_leftovers();
        let running = found
            .iter()
            .any(|l| l.pgid == pid && l.command.contains("sleep 300"));
        if running || std::time::Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mine: Vec<_> = found.iter().filter(|l| l.pgid == pid).collect();
    assert_eq!(mine.len(), 1, "{found:?}");
    assert_eq!(mine[0].candidate, "orphaned-candidate");
    assert!(mine[0].command.contains("sleep 300"), "{:?}", mine[0]);
    let only_mine: Vec<_> = mine.into_iter().cloned().collect();
    // Reap the child while it is being stopped, as its parent must.
    let reaper = std::thread::spawn(move || child.wait());
    assert!(remove_leftovers(&only_mine, Duration::from_secs(5))
        .await
        .is_empty());
    reaper.join().unwrap().unwrap();
    assert!(find_leftovers().iter().all(|l| l.pgid != pid));
    // A live launcher's servers are not leftovers.
    let d = tempfile::tempdir().unwrap();
    let mut live = spec(&d, "live", "exec sleep 300")
        .launch(Probe::ready_after(0), &CancelToken::new())
        .await
        .unwrap();
    let live_pgid = live.pgid().unwrap();
    assert!(find_leftovers().iter().all(|l| l.pgid != live_pgid));
    live.stop().await.unwrap();
}
