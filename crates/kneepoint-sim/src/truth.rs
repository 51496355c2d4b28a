//! The simulator's own record of what it did: the ground truth tests compare clients against.

use std::collections::VecDeque;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Server-side timing of one completed request (wall time, as the server saw it). Served as
/// JSON lines at `GET /truth`, so a client in another process can compare itself against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerTiming {
    /// The server's sequence id.
    pub server_id: u64,
    /// The client's `x-request-id` header, when sent.
    pub client_request_id: Option<String>,
    /// Prompt tokens counted by the server.
    pub prompt_tokens: u32,
    /// Tokens generated.
    pub output_tokens: u32,
    /// From the request's arrival to its first token's emission.
    pub ttft_ms: f64,
    /// Mean gap between emitted tokens.
    pub itl_ms: Option<f64>,
    /// From arrival to the last token's emission.
    pub latency_ms: f64,
    /// The request's arrival, Unix nanoseconds: when the bytes that completed its headers
    /// reached the host (the kernel's receive time on Linux).
    pub arrival_unix_ns: u64,
    /// The first token's emission, Unix nanoseconds.
    pub first_token_unix_ns: u64,
    /// The last token's emission, Unix nanoseconds.
    pub last_token_unix_ns: u64,
    /// Every token's emission, Unix nanoseconds, in order (the `fixed` profile only: each
    /// token's send stamp, against which a client's per-token lateness is measured).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_unix_ns: Vec<u64>,
}

/// Converts monotonic instants to Unix nanoseconds through one anchor taken at start-up, so
/// that stamps are cheap and never jump with wall-clock adjustments. Two processes on one
/// machine read the same clocks, so their stamps can be subtracted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WallClock {
    instant: Instant,
    unix_ns: u64,
}

impl WallClock {
    pub(crate) fn now() -> Self {
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        WallClock {
            instant: Instant::now(),
            unix_ns,
        }
    }

    /// `t` in Unix nanoseconds.
    pub(crate) fn unix_ns(&self, t: Instant) -> u64 {
        match t.checked_duration_since(self.instant) {
            Some(d) => self.unix_ns.saturating_add(d.as_nanos() as u64),
            None => self
                .unix_ns
                .saturating_sub(self.instant.duration_since(t).as_nanos() as u64),
        }
    }
}

/// A bounded log of the most recent completions.
#[derive(Debug)]
pub struct TruthLog {
    entries: VecDeque<ServerTiming>,
    capacity: usize,
}

impl TruthLog {
    /// A log keeping at most `capacity` entries (oldest dropped first).
    pub fn new(capacity: usize) -> Self {
        TruthLog {
            entries: VecDeque::new(),
            capacity,
        }
    }

    /// Adds an entry.
    pub fn push(&mut self, t: ServerTiming) {
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(t);
    }

    /// A copy of the entries, oldest first.
    pub fn snapshot(&self) -> Vec<ServerTiming> {
        self.entries.iter().cloned().collect()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}
