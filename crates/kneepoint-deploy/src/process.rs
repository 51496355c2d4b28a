//! Process groups: a launched server runs in a group of its own (vLLM's engine, a shell's
//! children), which is signalled as a whole: `SIGTERM`, a grace period, then `SIGKILL`.
//! Processes are read from `/proc` (Linux) to tell a leftover from a live run's server.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// Sends `signal` to process group `pgid` (`None`: only checks that it exists). `Ok(false)`
/// when no process of the group is left.
pub(crate) fn signal_group(pgid: i32, signal: Option<Signal>) -> Result<bool, String> {
    // Group 0 is the caller's own and 1 is init's: never a launched server's.
    if pgid <= 1 {
        return Err(format!("process group {pgid} is not a launched server's"));
    }
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(e) => Err(format!("signalling process group {pgid}: {e}")),
    }
}

/// Whether any process of group `pgid` is still running (zombies, dead and waiting for their
/// parent to read their status, do not count).
pub(crate) fn group_running(pgid: i32) -> bool {
    if !std::path::Path::new("/proc/self/stat").exists() {
        return signal_group(pgid, None).unwrap_or(false);
    }
    pids()
        .into_iter()
        .filter_map(Stat::read)
        .any(|s| s.pgid == pgid && s.running())
}

/// The processes `/proc` lists (none without `/proc`).
pub(crate) fn pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// Stops group `pgid`: `SIGTERM`, up to `grace` for it to end, then `SIGKILL` and up to ten
/// seconds more. `reap` is called while waiting, to collect the leader's exit status (a
/// child of this process stays a zombie until then).
pub(crate) async fn stop_group(
    pgid: i32,
    grace: Duration,
    mut reap: impl FnMut(),
) -> Result<(), String> {
    for (signal, wait) in [
        (Signal::SIGTERM, grace),
        (Signal::SIGKILL, Duration::from_secs(10)),
    ] {
        reap();
        if !group_running(pgid) {
            return Ok(());
        }
        if !signal_group(pgid, Some(signal))? {
            return Ok(());
        }
        let until = Instant::now() + wait;
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
            reap();
            if !group_running(pgid) {
                return Ok(());
            }
        }
    }
    Err(format!(
        "process group {pgid} is still running after SIGKILL"
    ))
}

/// The fields of `/proc/PID/stat` that this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    /// The process.
    pub pid: i32,
    /// Its state (`R`, `S`, `Z`...).
    pub state: char,
    /// Its parent.
    pub ppid: i32,
    /// Its process group.
    pub pgid: i32,
    /// Its session.
    pub session: i32,
    /// When it started, in clock ticks after boot: with the pid, it names one process (a pid
    /// is reused, a (pid, start) pair is not).
    pub start: u64,
}

impl Stat {
    /// Whether it runs (a zombie, dead and waiting for its parent, does not).
    pub fn running(&self) -> bool {
        self.state != 'Z' && self.state != 'X'
    }

    /// Reads `/proc/PID/stat` (`None` when the process is gone or unreadable).
    pub fn read(pid: i32) -> Option<Stat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Stat::parse(pid, &text)
    }

    fn parse(pid: i32, text: &str) -> Option<Stat> {
        // The command name is in parentheses and may hold spaces and parentheses itself.
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // After the name: state (3), ppid (4), pgrp (5), session (6), ..., starttime (22).
        Some(Stat {
            pid,
            state: fields.first()?.chars().next()?,
            ppid: fields.get(1)?.parse().ok()?,
            pgid: fields.get(2)?.parse().ok()?,
            session: fields.get(3)?.parse().ok()?,
            start: fields.get(19)?.parse().ok()?,
        })
    }
}

/// This process's identity for tags: its pid and start time.
pub(crate) fn own_identity() -> (i32, u64) {
    let pid = std::process::id() as i32;
    (pid, Stat::read(pid).map_or(0, |s| s.start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_odd_command_names() {
        let line = "4242 (my (odd) srv) S 1 4240 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 987654 1000 10 18446744073709551615";
        let s = Stat::parse(4242, line).unwrap();
        assert_eq!((s.state, s.pgid, s.start), ('S', 4240, 987654));
        assert_eq!((s.ppid, s.session), (1, 4240));
        assert!(Stat::parse(1, "garbage").is_none());
        let (pid, start) = own_identity();
        assert_eq!(pid, std::process::id() as i32);
        assert!(start > 0);
    }
}
