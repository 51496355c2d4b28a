//! The chunks of one read: the moment they count as yielded, and the delivery lags the health
//! probe gathers.

use std::time::Instant;

/// The chunks of one read (one receive time) seen so far, for the moment they count as
/// yielded and the health probe's delivery lag: a read is counted when the next read's first
/// chunk comes, and the request's counts reach the probe when it is dropped (the request ended,
/// failed, timed out or was cancelled).
pub(crate) struct ReadBatch<'a> {
    health: Option<&'a crate::health::HealthProbe>,
    /// `(received, yielded, chunks)`.
    open: Option<(Instant, Instant, u64)>,
    /// Chunks per delivery-lag bucket, not yet handed to the probe.
    counts: [u64; crate::health::BUCKETS],
}

impl<'a> ReadBatch<'a> {
    pub(crate) fn new(health: Option<&'a crate::health::HealthProbe>) -> Self {
        ReadBatch {
            health,
            open: None,
            counts: [0; crate::health::BUCKETS],
        }
    }

    /// The moment a chunk received at `received` counts as yielded: now for the first chunk of
    /// a read, the same moment for the rest of its chunks (one clock read per read, not per
    /// token).
    pub(crate) fn yielded(&mut self, received: Instant) -> Instant {
        match &mut self.open {
            Some((r, at, n)) if *r == received => {
                *n += 1;
                *at
            }
            _ => {
                self.flush();
                let now = Instant::now();
                self.open = Some((received, now, 1));
                now
            }
        }
    }

    pub(crate) fn flush(&mut self) {
        if let (Some((received, yielded, n)), Some(_)) = (self.open.take(), self.health) {
            let b = crate::health::HealthProbe::bucket(yielded.saturating_duration_since(received));
            self.counts[b] += n;
        }
    }
}

impl Drop for ReadBatch<'_> {
    fn drop(&mut self) {
        self.flush();
        if let Some(h) = self.health {
            h.delivered(&self.counts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_chunks_of_one_read_share_their_yield_time_and_count_once_each() {
        let probe = crate::health::HealthProbe::new();
        let (first, second) = (Instant::now(), Instant::now() + Duration::from_millis(1));
        {
            let mut read = ReadBatch::new(Some(&probe));
            let a = read.yielded(first);
            std::thread::sleep(Duration::from_millis(2));
            // the same read: the same moment, no clock read
            assert_eq!(read.yielded(first), a);
            assert_eq!(read.yielded(first), a);
            // a new read: its own moment; the request's counts reach the probe at its end
            let b = read.yielded(second);
            assert!(b > a);
            assert_eq!(
                read.counts.iter().sum::<u64>(),
                3,
                "the first read's three chunks"
            );
            assert_eq!(
                probe.delivered_chunks(),
                0,
                "counted when the request is over"
            );
        }
        // dropped (the response ended, or its future was dropped): the open read is counted
        assert_eq!(probe.delivered_chunks(), 4);
        // without a probe nothing is counted anywhere, and times still come
        let mut read = ReadBatch::new(None);
        assert!(read.yielded(first) >= first);
    }
}
