//! The process's open-file limit: every connection in flight holds a file descriptor, and a
//! soft limit of 1,024 (the common default) caps a client far below the concurrencies people
//! test. [`raise_fd_limit`] lifts the soft limit to the hard one, as servers do at start-up.

/// Descriptors a run needs besides one per connection (runtime, files, the simulator's own).
pub const FD_HEADROOM: u64 = 64;

/// The soft and hard limits on open files, when the platform says.
pub fn fd_limits() -> Option<(u64, u64)> {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::resource::{getrlimit, Resource};
        getrlimit(Resource::RLIMIT_NOFILE).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Raises the soft open-file limit to the hard limit; returns the soft limit now in force
/// (`None` when the platform does not say).
pub fn raise_fd_limit() -> Option<u64> {
    let (soft, hard) = fd_limits()?;
    #[cfg(target_os = "linux")]
    if soft < hard {
        use nix::sys::resource::{setrlimit, Resource};
        if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
            return Some(hard);
        }
    }
    let _ = hard;
    Some(soft)
}

/// Why `connections` connections at once will not fit under the soft limit, when they will
/// not (each needs a descriptor, plus [`FD_HEADROOM`] for the rest of the process).
pub fn fd_shortfall(connections: u64) -> Option<String> {
    let (soft, _) = fd_limits()?;
    let need = connections.saturating_add(FD_HEADROOM);
    (need > soft).then(|| {
        format!(
            "{connections} connections need about {need} file descriptors but the limit is {soft}: requests beyond it will fail as client_resources (raise ulimit -n or lower the concurrency)"
        )
    })
}

/// Why `connections` connections at once cannot be had at all, when they cannot: they need
/// more descriptors (with [`FD_HEADROOM`]) than the hard limit, which this process cannot
/// raise. `fds_each` is the descriptors a connection takes here (2 when the server runs in
/// the same process, as the built-in simulator does).
pub fn fd_refusal(connections: u64, fds_each: u64) -> Option<String> {
    let (_, hard) = fd_limits()?;
    let need = connections
        .saturating_mul(fds_each)
        .saturating_add(FD_HEADROOM);
    (need > hard).then(|| {
        format!(
            "{connections} concurrent connections need about {need} file descriptors{} but this process may open at most {hard} (the hard limit, ulimit -Hn): lower the concurrency, raise the hard limit, send over HTTP/2 (--http2), or split the load across shard processes (docs/scale-out.md)",
            if fds_each > 1 { " (the built-in simulator runs in this process: two per connection)" } else { "" }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_rises_to_the_hard_one_and_shortfalls_are_named() {
        let Some(after) = raise_fd_limit() else {
            return; // Not Linux: nothing to check.
        };
        let (soft, hard) = fd_limits().unwrap();
        assert_eq!(after, soft);
        assert!(soft == hard || soft >= 1024, "soft {soft}, hard {hard}");
        assert!(fd_shortfall(1).is_none());
        assert!(fd_refusal(1, 2).is_none());
        let refused = fd_refusal(hard, 1).unwrap();
        assert!(refused.contains(&format!("at most {hard}")), "{refused}");
        let why = fd_shortfall(soft).unwrap();
        assert!(
            why.contains("file descriptors") && why.contains(&soft.to_string()),
            "{why}"
        );
    }
}
