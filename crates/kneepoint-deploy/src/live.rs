//! The servers this process launched and has not stopped yet, so that an exit that cannot
//! wait (a second Ctrl-C) still kills them.

use std::collections::BTreeSet;
use std::sync::Mutex;

use nix::sys::signal::Signal;

use crate::process::signal_group;

static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

pub(crate) fn register(pgid: i32) {
    if let Ok(mut l) = LIVE.lock() {
        l.insert(pgid);
    }
}

pub(crate) fn unregister(pgid: i32) {
    if let Ok(mut l) = LIVE.lock() {
        l.remove(&pgid);
    }
}

/// Whether `pid` leads the group of a server this process launched and has not stopped.
pub(crate) fn is_live(pid: i32) -> bool {
    LIVE.lock().is_ok_and(|l| l.contains(&pid))
}

/// Whether any server this process launched is still running.
pub(crate) fn any_live() -> bool {
    LIVE.lock().is_ok_and(|l| !l.is_empty())
}

/// Sends `SIGKILL` to every server this process launched and has not stopped, without
/// waiting: for an exit that cannot wait for an orderly teardown (a second interrupt).
/// Returns how many process groups were signalled.
pub fn kill_all_now() -> usize {
    let groups: Vec<i32> = match LIVE.lock() {
        Ok(mut l) => std::mem::take(&mut *l).into_iter().collect(),
        Err(_) => return 0,
    };
    groups
        .into_iter()
        .filter(|g| signal_group(*g, Some(Signal::SIGKILL)).unwrap_or(false))
        .count()
}

static REMOTE: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

#[cfg(feature = "sagemaker")]
pub(crate) fn note_remote(name: &str) {
    if let Ok(mut l) = REMOTE.lock() {
        l.insert(name.to_owned());
    }
}

#[cfg(feature = "sagemaker")]
pub(crate) fn forget_remote(name: &str) {
    if let Ok(mut l) = REMOTE.lock() {
        l.remove(name);
    }
}

/// The cloud endpoints this process created and has not deleted: what an exit that cannot
/// wait leaves running (to be named, and removed later with `kneepoint cleanup`).
pub fn remote_left() -> Vec<String> {
    REMOTE
        .lock()
        .map(|l| l.iter().cloned().collect())
        .unwrap_or_default()
}
