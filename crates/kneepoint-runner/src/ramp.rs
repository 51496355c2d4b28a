//! A closed loop's ramp: slots are released one at a time over the ramp's duration.
//!
//! One ticker task with one timer releases every slot (instead of one sleeping timer per slot):
//! with thousands of slots, thousands of pending timers would sit in the runtime's timer wheel
//! while the first requests are already streaming.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::CancelToken;

/// Releases `slots` slots evenly over a ramp: the first at once, slot `k` at `k/slots` of it.
pub(crate) struct RampGate {
    permits: Arc<Semaphore>,
    ticker: JoinHandle<()>,
}

impl RampGate {
    /// `None` when there is nothing to spread (no ramp, a zero ramp, or one slot).
    pub(crate) fn start(ramp: Option<Duration>, slots: u32) -> Option<Self> {
        let ramp = ramp.filter(|r| !r.is_zero() && slots > 1)?;
        let permits = Arc::new(Semaphore::new(1));
        let origin = tokio::time::Instant::now();
        let ticker = {
            let permits = permits.clone();
            tokio::spawn(async move {
                for k in 1..slots {
                    let due = origin + ramp.mul_f64(f64::from(k) / f64::from(slots));
                    tokio::time::sleep_until(due).await;
                    permits.add_permits(1);
                }
            })
        };
        Some(RampGate { permits, ticker })
    }

    /// Waits until this slot may send its first request.
    pub(crate) async fn wait(&self) {
        if let Ok(p) = self.permits.acquire().await {
            p.forget();
        }
    }
}

/// Waits for a slot's turn under `gate` (at once without one); false when the level was
/// cancelled or stopped sending meanwhile.
pub(crate) async fn admit(
    gate: Option<&RampGate>,
    cancel: &CancelToken,
    stop: &CancelToken,
) -> bool {
    let Some(gate) = gate else {
        return true;
    };
    tokio::select! {
        biased;
        _ = cancel.cancelled() => false,
        _ = stop.cancelled() => false,
        _ = gate.wait() => true,
    }
}

impl Drop for RampGate {
    fn drop(&mut self) {
        self.ticker.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Paused time: the clock jumps to each timer, so the release times are exact.
    #[tokio::test(start_paused = true)]
    async fn slots_are_released_evenly() {
        let gate = RampGate::start(Some(Duration::from_millis(400)), 4).unwrap();
        let t0 = tokio::time::Instant::now();
        for k in 0..4u64 {
            gate.wait().await;
            let at = (tokio::time::Instant::now() - t0).as_millis() as u64;
            assert!(
                at >= k * 100 && at < k * 100 + 5,
                "slot {k} released at {at} ms"
            );
        }
        assert!(RampGate::start(None, 4).is_none());
        assert!(RampGate::start(Some(Duration::from_secs(1)), 1).is_none());
    }
}
