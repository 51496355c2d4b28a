//! Processes that leave a launched server's process group (`setsid`, a daemon's double fork)
//! and drop its tag: neither the group's signals nor `kneepoint cleanup` reach them. A program
//! whose only children are the servers it launches (the `kneepoint` binary) calls
//! [`adopt_orphans`]: Linux then re-parents such a process to it, rather than to init, when the
//! server that started it exits, and every teardown stops what it adopted once no launched
//! server is left running (while another still runs, the survivors are named, as they cannot
//! be told apart). A library user with children of its own leaves this off: its own children
//! would look adopted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

use crate::process::{pids, Stat};
use crate::Error;

static ADOPTING: AtomicBool = AtomicBool::new(false);

/// Makes this process the child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): a descendant of a
/// launched server that left its group is re-parented here when its parent exits, and the
/// server's teardown stops it. Call it once, early, in a program whose only child processes
/// are the servers it launches. Elsewhere than Linux it does nothing.
pub fn adopt_orphans() -> Result<(), Error> {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(true).map_err(|e| Error::Stop {
            what: "this process".into(),
            reason: format!("cannot become the child subreaper: {e}"),
        })?;
        ADOPTING.store(true, Ordering::Release);
    }
    Ok(())
}

/// The processes re-parented to this one that are not a running server it launched: left
/// their group or session (a child it started itself stays in both, or is a server's leader).
fn adopted() -> Vec<Stat> {
    if !ADOPTING.load(Ordering::Acquire) {
        return Vec::new();
    }
    let me = std::process::id() as i32;
    let Some(own) = Stat::read(me) else {
        return Vec::new();
    };
    pids()
        .into_iter()
        .filter_map(Stat::read)
        .filter(|s| s.ppid == me && !crate::live::is_live(s.pid))
        .filter(|s| s.session != own.session || s.pgid != own.pgid)
        .collect()
}

/// After a teardown: stops what this process adopted (`SIGTERM`, up to `grace`, `SIGKILL`) and
/// collects their exit statuses, when no launched server runs any more. Returns the ones left
/// running, each as `PID (name)`: those that would not die, or all of them while another
/// launched server still runs (whose they are cannot be told).
pub(crate) async fn stop_adopted(grace: Duration) -> Vec<String> {
    let found = adopted();
    if found.is_empty() {
        return Vec::new();
    }
    if crate::live::any_live() {
        return found.iter().filter(|s| s.running()).map(describe).collect();
    }
    for signal in [Signal::SIGTERM, Signal::SIGKILL] {
        for s in found.iter().filter(|s| s.running()) {
            let _ = kill(Pid::from_raw(s.pid), signal);
        }
        let until = Instant::now() + grace.min(Duration::from_secs(10));
        while Instant::now() < until && alive(&found) {
            reap(&found);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        reap(&found);
        if !alive(&found) {
            return Vec::new();
        }
    }
    found
        .iter()
        .filter(|s| Stat::read(s.pid).is_some_and(|now| now.start == s.start && now.running()))
        .map(describe)
        .collect()
}

/// Whether any of `found` still runs (the same process: a pid is reused, its start is not).
fn alive(found: &[Stat]) -> bool {
    found
        .iter()
        .any(|s| Stat::read(s.pid).is_some_and(|now| now.start == s.start && now.running()))
}

/// Collects the exit status of each of `found` that has exited (they are this process's
/// children now, and stay zombies until then).
fn reap(found: &[Stat]) {
    for s in found {
        let _ = waitpid(Pid::from_raw(s.pid), Some(WaitPidFlag::WNOHANG));
    }
}

fn describe(s: &Stat) -> String {
    let name = std::fs::read_to_string(format!("/proc/{}/comm", s.pid)).unwrap_or_default();
    format!("{} ({})", s.pid, name.trim())
}
