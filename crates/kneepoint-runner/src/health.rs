//! Watches the client while a level runs: a timer task on the client's own runtime measures how
//! late it wakes (the runtime's scheduling lag, which delays every token the client stamps when
//! no kernel stamp exists), samples the requests in flight, and the request tasks report how
//! long arrived tokens waited before being read; the process's CPU time comes from
//! `getrusage`. What it gathers becomes the level's [`ClientHealth`].

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kneepoint_core::ClientHealth;

use crate::CancelToken;

/// The timer's period.
const TICK: Duration = Duration::from_millis(10);
/// Timer samples kept (past this, every other one: ~2.7 hours at one per 10 ms in 1 MB).
const MAX_SAMPLES: usize = 1 << 18;
/// Delivery lags are counted in buckets of powers of two microseconds.
pub(crate) const BUCKETS: usize = 40;

/// What the request tasks and the timer share.
#[derive(Debug)]
pub(crate) struct HealthProbe {
    in_flight: AtomicU32,
    delivery: [AtomicU64; BUCKETS],
    lags_ms: Mutex<Vec<f32>>,
    in_flight_sum: AtomicU64,
    ticks: AtomicU64,
}

impl HealthProbe {
    pub(crate) fn new() -> Self {
        HealthProbe {
            in_flight: AtomicU32::new(0),
            delivery: std::array::from_fn(|_| AtomicU64::new(0)),
            lags_ms: Mutex::new(Vec::new()),
            in_flight_sum: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
        }
    }

    /// A request started; the guard ends it.
    pub(crate) fn enter(&self) -> InFlightGuard<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlightGuard(self)
    }

    /// The bucket of a delivery lag (powers of two microseconds).
    pub(crate) fn bucket(lag: Duration) -> usize {
        let us = lag.as_micros().max(1) as u64;
        (63 - us.leading_zeros() as usize).min(BUCKETS - 1)
    }

    /// Adds one request's delivery counts per bucket (see [`Self::bucket`]): the token-bearing
    /// chunks that reached this host that long before the client read them. A request
    /// gathers them itself and adds them once, so that no token touches a counter shared
    /// between the client's threads.
    pub(crate) fn delivered(&self, counts: &[u64; BUCKETS]) {
        for (c, n) in self.delivery.iter().zip(counts) {
            if *n > 0 {
                c.fetch_add(*n, Ordering::Relaxed);
            }
        }
    }

    /// One read of `chunks` chunks that waited `lag` (tests).
    #[cfg(test)]
    pub(crate) fn deliver(&self, lag: Duration, chunks: u64) {
        let mut counts = [0; BUCKETS];
        counts[Self::bucket(lag)] = chunks;
        self.delivered(&counts);
    }

    /// Chunks counted by [`Self::delivered`] so far.
    #[cfg(test)]
    pub(crate) fn delivered_chunks(&self) -> u64 {
        self.delivery
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// The 90th percentile of the delivery lags, ms (interpolated geometrically inside its
    /// power-of-two bucket).
    fn delivery_p90_ms(&self) -> Option<f64> {
        let counts: Vec<u64> = self
            .delivery
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let target = 0.9 * total as f64;
        let mut seen = 0u64;
        for (b, c) in counts.iter().enumerate() {
            if *c > 0 && (seen + c) as f64 >= target {
                let within = ((target - seen as f64) / *c as f64).clamp(0.0, 1.0);
                return Some((1u64 << b) as f64 * 2f64.powf(within) / 1000.0);
            }
            seen += c;
        }
        None
    }
}

pub(crate) struct InFlightGuard<'a>(&'a HealthProbe);

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The process's CPU seconds so far (user + system), where the platform says.
fn cpu_seconds() -> Option<f64> {
    #[cfg(unix)]
    {
        use nix::sys::resource::{getrusage, UsageWho};
        use nix::sys::time::TimeValLike;
        let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
        let us = u.user_time().num_microseconds() + u.system_time().num_microseconds();
        Some(us as f64 / 1e6)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

impl Drop for Watch {
    /// A watch dropped unfinished (an error ended the level) stops its timer.
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A running watch over one level's measured phase.
pub(crate) struct Watch {
    probe: Arc<HealthProbe>,
    stop: CancelToken,
    timer: Option<tokio::task::JoinHandle<()>>,
    start: Instant,
    cpu_start: Option<f64>,
}

impl Watch {
    /// Starts the timer task on the current runtime.
    pub(crate) fn start() -> Watch {
        let probe = Arc::new(HealthProbe::new());
        let stop = CancelToken::new();
        let (p, s) = (probe.clone(), stop.clone());
        let timer = tokio::spawn(async move {
            while !s.is_cancelled() {
                let t = Instant::now();
                tokio::time::sleep(TICK).await;
                let lag = t.elapsed().saturating_sub(TICK).as_secs_f64() * 1000.0;
                p.in_flight_sum.fetch_add(
                    u64::from(p.in_flight.load(Ordering::Relaxed)),
                    Ordering::Relaxed,
                );
                p.ticks.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut v) = p.lags_ms.lock() {
                    if v.len() >= MAX_SAMPLES {
                        // keep every other sample: the distribution, in bounded memory
                        let kept: Vec<f32> = v.iter().step_by(2).copied().collect();
                        *v = kept;
                    }
                    v.push(lag as f32);
                }
            }
        });
        Watch {
            probe,
            stop,
            timer: Some(timer),
            start: Instant::now(),
            cpu_start: cpu_seconds(),
        }
    }

    /// The probe the request tasks report to.
    pub(crate) fn probe(&self) -> Arc<HealthProbe> {
        self.probe.clone()
    }

    /// Stops the timer and says how the client fared (not yet judged).
    pub(crate) async fn finish(mut self) -> ClientHealth {
        self.stop.cancel();
        if let Some(t) = self.timer.take() {
            let _ = t.await;
        }
        let wall = self.start.elapsed().as_secs_f64();
        let mut lags: Vec<f32> = self
            .probe
            .lags_ms
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default();
        lags.sort_by(f32::total_cmp);
        let q = |p: f64| {
            lags.get(((lags.len().max(1) - 1) as f64 * p).round() as usize)
                .map_or(0.0, |v| f64::from(*v))
        };
        let ticks = self.probe.ticks.load(Ordering::Relaxed);
        let mut h = ClientHealth::default();
        h.wall_seconds = wall;
        h.cpu_seconds = cpu_seconds()
            .zip(self.cpu_start)
            .map(|(b, a)| (b - a).max(0.0));
        h.cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        h.timer_lag_p50_ms = q(0.5);
        h.timer_lag_p90_ms = q(0.9);
        h.timer_lag_max_ms = q(1.0);
        h.delivery_lag_p90_ms = self.probe.delivery_p90_ms();
        h.in_flight_mean = (ticks > 0)
            .then(|| self.probe.in_flight_sum.load(Ordering::Relaxed) as f64 / ticks as f64);
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_blocked_runtime_shows_as_timer_lag() {
        let w = Watch::start();
        let p = w.probe();
        let _g = p.enter();
        p.deliver(Duration::from_millis(3), 1);
        for _ in 0..5 {
            // block the only runtime thread, as a CPU hog beside the client would
            std::thread::sleep(Duration::from_millis(60));
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        let h = w.finish().await;
        assert!(h.timer_lag_max_ms >= 40.0, "{h:?}");
        assert!(h.in_flight_mean.unwrap() > 0.5, "{h:?}");
        let d = h.delivery_lag_p90_ms.unwrap();
        assert!((2.0..=8.2).contains(&d), "{d}");
        assert!(h.wall_seconds >= 0.3);
    }

    #[test]
    fn delivery_lags_count_every_chunk_of_a_read() {
        let w = HealthProbe::new();
        // one read of 95 chunks that waited 1 ms, one of 5 that waited 100 ms: the 90th
        // percentile chunk waited about a millisecond
        w.deliver(Duration::from_millis(1), 95);
        w.deliver(Duration::from_millis(100), 5);
        let d = w.delivery_p90_ms().unwrap();
        assert!((0.5..=2.1).contains(&d), "{d}");
        // the other way round, the tail read holds most chunks
        let w = HealthProbe::new();
        w.deliver(Duration::from_millis(1), 5);
        w.deliver(Duration::from_millis(100), 95);
        let d = w.delivery_p90_ms().unwrap();
        assert!((60.0..=140.0).contains(&d), "{d}");
    }
}
