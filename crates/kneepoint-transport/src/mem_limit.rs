//! The memory a run may still take: every stream in flight holds its connection's buffers, its
//! task and its record, about 28 KB each as measured at 18,000 streams (docs/PERFORMANCE.md).
//! A concurrency whose streams cannot fit is refused before anything is sent, instead of
//! aborting on a failed allocation halfway through a level.

/// Memory one stream in flight is reckoned to hold (28 KB measured, rounded up).
pub const STREAM_BYTES: u64 = 32 * 1024;

/// The bytes this process may still allocate, when the platform says: the least of the
/// machine's available memory (`MemAvailable`), what the cgroup still allows (`memory.max`
/// less `memory.current`, its inactive page cache counted as free) and the address-space
/// limit (`ulimit -v`) less the process's current virtual size.
pub fn memory_budget() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let field = |text: &str, name: &str| -> Option<u64> {
            let line = text.lines().find(|l| l.starts_with(name))?;
            Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
        };
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let number = |path: &str| read(path)?.trim().parse::<u64>().ok();
        let available = read("/proc/meminfo").and_then(|t| field(&t, "MemAvailable:"));
        // The cgroup's usage less its inactive page cache, which the kernel reclaims first.
        let cache = read("/sys/fs/cgroup/memory.stat")
            .and_then(|t| {
                let line = t.lines().find(|l| l.starts_with("inactive_file "))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .unwrap_or(0);
        let cgroup = number("/sys/fs/cgroup/memory.max").map(|max| {
            let used = number("/sys/fs/cgroup/memory.current").unwrap_or(0);
            max.saturating_sub(used.saturating_sub(cache))
        });
        let address_space = {
            use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
            match getrlimit(Resource::RLIMIT_AS) {
                Ok((soft, _)) if soft != RLIM_INFINITY => {
                    let size = read("/proc/self/status").and_then(|t| field(&t, "VmSize:"));
                    Some(soft.saturating_sub(size.unwrap_or(0)))
                }
                _ => None,
            }
        };
        [available, cgroup, address_space]
            .into_iter()
            .flatten()
            .min()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Why `streams` streams in flight at once will not fit in [`memory_budget`], when they will
/// not (each reckoned at [`STREAM_BYTES`]).
pub fn memory_shortfall(streams: u64) -> Option<String> {
    memory_shortfall_within(streams, memory_budget()?)
}

fn memory_shortfall_within(streams: u64, budget: u64) -> Option<String> {
    let need = streams.saturating_mul(STREAM_BYTES);
    (need > budget).then(|| {
        format!(
            "{streams} streams in flight need about {} MB of memory (about {} KB each) but this process may take about {} MB more (the least of available memory, the cgroup's limit and ulimit -v): lower the concurrency or split the load across shard processes on several machines",
            need >> 20,
            STREAM_BYTES >> 10,
            budget >> 20
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_million_streams_do_not_fit_in_two_gigabytes() {
        let why = memory_shortfall_within(1_000_000, 2 << 30).unwrap();
        assert!(
            why.contains("1000000 streams") && why.contains("31250 MB"),
            "{why}"
        );
        assert!(memory_shortfall_within(1_000, 2 << 30).is_none());
        // Wherever this runs, one stream fits.
        assert!(memory_shortfall(1).is_none());
    }
}
