//! The simulator's own record of what it did: the ground truth tests compare clients against.

use std::collections::VecDeque;

/// Server-side timing of one completed request (wall time, as the server saw it).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTiming {
    /// The server's sequence id.
    pub server_id: u64,
    /// The client's `x-request-id` header, when sent.
    pub client_request_id: Option<String>,
    /// Prompt tokens counted by the server.
    pub prompt_tokens: u32,
    /// Tokens generated.
    pub output_tokens: u32,
    /// From the request's arrival (body read) to its first token's emission.
    pub ttft_ms: f64,
    /// Mean gap between emitted tokens.
    pub itl_ms: Option<f64>,
    /// From arrival to the last token's emission.
    pub latency_ms: f64,
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
