//! What kneepoint launched carries a tag, so that what an earlier run left behind (it crashed,
//! was killed with `SIGKILL`, lost its machine's power) can be found and removed later:
//! a local server's processes inherit the environment variable [`TAG_VAR`], naming the
//! kneepoint process that launched them (pid and start time) and the candidate. A tagged
//! process whose launcher is gone is a leftover.

use std::time::Duration;

use crate::process::{own_identity, stop_group, Stat};

/// The environment variable that tags a launched server's processes:
/// `<launcher pid>:<launcher start time>:<candidate>`.
pub const TAG_VAR: &str = "KNEEPOINT_DEPLOYMENT";

/// The tag of a server this process launches for `candidate`.
pub(crate) fn tag(candidate: &str) -> String {
    let (pid, start) = own_identity();
    format!("{pid}:{start}:{candidate}")
}

/// A process group that kneepoint launched and whose launcher is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leftover {
    /// The group (its leader's pid).
    pub pgid: i32,
    /// The candidate it was launched for.
    pub candidate: String,
    /// The launcher's pid (no longer running, or now another program).
    pub launcher_pid: i32,
    /// One process of the group and its command line.
    pub pid: i32,
    /// Its command line.
    pub command: String,
}

/// The tagged process groups whose launcher is gone (Linux: read from `/proc`; elsewhere,
/// none). Processes of other users are not readable and not listed.
pub fn find_leftovers() -> Vec<Leftover> {
    let mut out: Vec<Leftover> = Vec::new();
    for (pid, tag) in tagged() {
        let Some((launcher_pid, launcher_start, candidate)) = parse_tag(&tag) else {
            continue;
        };
        if Stat::read(launcher_pid).is_some_and(|s| s.start == launcher_start) {
            continue; // its launcher is alive: not a leftover
        }
        let Some(stat) = Stat::read(pid) else {
            continue;
        };
        if !stat.running() || out.iter().any(|l| l.pgid == stat.pgid) {
            continue;
        }
        out.push(Leftover {
            pgid: stat.pgid,
            candidate,
            launcher_pid,
            pid,
            command: command_line(pid),
        });
    }
    out.sort_by_key(|l| l.pgid);
    out
}

/// Stops every group of `leftovers` (`SIGTERM`, `grace`, then `SIGKILL`); the ones that could
/// not be stopped, with why.
pub async fn remove_leftovers(leftovers: &[Leftover], grace: Duration) -> Vec<(Leftover, String)> {
    let mut failed = Vec::new();
    let own = nix::unistd::getpgrp().as_raw();
    for l in leftovers {
        if l.pgid <= 1 || l.pgid == own {
            failed.push((
                l.clone(),
                format!("process group {} is not one to stop", l.pgid),
            ));
            continue;
        }
        if let Err(e) = stop_group(l.pgid, grace, || ()).await {
            failed.push((l.clone(), e));
        }
    }
    failed
}

/// Sends `SIGKILL` to every process carrying exactly `tag` (what left its group: a `setsid`,
/// a daemon), after its group was stopped.
pub(crate) fn kill_tagged(tag: &str) {
    let me = std::process::id() as i32;
    for (pid, t) in tagged() {
        if pid > 1 && pid != me && t == tag {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The running processes that launched process `launcher` (a kneepoint's pid) tagged, with the
/// candidate each was launched for: what is left of its servers.
pub fn launched_by(launcher: u32) -> Vec<(i32, String)> {
    tagged()
        .into_iter()
        .filter_map(|(pid, tag)| {
            let (l, _, candidate) = parse_tag(&tag)?;
            let running = Stat::read(pid).is_some_and(|s| s.running());
            (l == launcher as i32 && running).then_some((pid, candidate))
        })
        .collect()
}

/// Every process `/proc` shows with a tag, and the tag.
fn tagged() -> Vec<(i32, String)> {
    crate::process::pids()
        .into_iter()
        .filter_map(|pid| Some((pid, read_tag(pid)?)))
        .collect()
}

fn read_tag(pid: i32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{TAG_VAR}=");
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

fn parse_tag(tag: &str) -> Option<(i32, u64, String)> {
    let mut parts = tag.splitn(3, ':');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    Some((pid, start, parts.next()?.to_owned()))
}

fn command_line(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_name_the_launcher_and_the_candidate() {
        let t = tag("vllm:max_num_seqs=8");
        let (pid, start, candidate) = parse_tag(&t).unwrap();
        assert_eq!(pid, std::process::id() as i32);
        assert!(start > 0);
        assert_eq!(candidate, "vllm:max_num_seqs=8");
        assert!(parse_tag("x:y:z").is_none());
    }
}
