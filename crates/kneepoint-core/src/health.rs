//! The client's own health during a level: whether the measuring process, not the server,
//! could have shaped what it measured.

use serde::{Deserialize, Serialize};

/// How the client fared during one level's measured phase (see `docs/search.md`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ClientHealth {
    /// Seconds of the measured phase.
    pub wall_seconds: f64,
    /// CPU seconds (user + system) the whole process used meanwhile, where the platform says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// Cores the process may use.
    pub cores: u32,
    /// How late a 10 ms timer on the client's runtime fired (its scheduling lag), ms: median,
    /// 90th percentile and worst.
    pub timer_lag_p50_ms: f64,
    /// The 90th percentile.
    pub timer_lag_p90_ms: f64,
    /// The worst.
    pub timer_lag_max_ms: f64,
    /// Time between the kernel receiving a token's bytes and the client handling them, ms
    /// (90th percentile; from the connections' kernel receive stamps, where available).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_lag_p90_ms: Option<f64>,
    /// Mean requests in flight over the measured phase (sampled with the timer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_mean: Option<f64>,
    /// Why the level is client-limited (`None`: the client kept up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_limited: Option<String>,
}

/// A lag counts against the client from this many ms...
pub const LAG_FLOOR_MS: f64 = 20.0;
/// ... and from this share of the level's median request latency.
pub const LAG_SHARE: f64 = 0.1;
/// The process used at least this share of every core it may use.
pub const CPU_SATURATED: f64 = 0.95;

impl ClientHealth {
    /// The CPU share of the cores the process may use (1 = every core busy).
    pub fn cpu_share(&self) -> Option<f64> {
        let cpu = self.cpu_seconds?;
        (self.wall_seconds > 0.0 && self.cores > 0)
            .then(|| cpu / (self.wall_seconds * f64::from(self.cores)))
    }

    /// Judges the level against its median latency (ms; the engine passes the smaller of the
    /// TTFT and request-latency medians): client-limited when the
    /// client's timers or its reads of arrived tokens ran late by at least [`LAG_FLOOR_MS`] and
    /// [`LAG_SHARE`] of that latency at the 90th percentile, or when the process kept every
    /// core it may use busy ([`CPU_SATURATED`]).
    pub fn judge(mut self, latency_p50_ms: Option<f64>) -> Self {
        let bound = latency_p50_ms.map_or(LAG_FLOOR_MS, |l| (l * LAG_SHARE).max(LAG_FLOOR_MS));
        let mut why = Vec::new();
        if self.timer_lag_p90_ms >= bound {
            why.push(format!(
                "the client's runtime ran its timers {:.0} ms late at p90 (worst {:.0} ms)",
                self.timer_lag_p90_ms, self.timer_lag_max_ms
            ));
        }
        if let Some(d) = self.delivery_lag_p90_ms.filter(|d| *d >= bound) {
            why.push(format!(
                "tokens waited {d:.0} ms at p90 between reaching this host and being read"
            ));
        }
        if let Some(s) = self.cpu_share().filter(|s| *s >= CPU_SATURATED) {
            why.push(format!(
                "the process kept {:.0} % of its {} cores busy",
                s * 100.0,
                self.cores
            ));
        }
        self.client_limited = (!why.is_empty()).then(|| why.join("; "));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lags_against_the_latency_decide() {
        let h = ClientHealth {
            wall_seconds: 10.0,
            cpu_seconds: Some(2.0),
            cores: 2,
            timer_lag_p90_ms: 30.0,
            ..ClientHealth::default()
        };
        assert!(h.clone().judge(Some(100.0)).client_limited.is_some());
        // 30 ms is under a tenth of a 1 s latency
        assert!(h.clone().judge(Some(1000.0)).client_limited.is_none());
        let busy = ClientHealth {
            cpu_seconds: Some(19.5),
            ..h
        };
        let j = busy.judge(Some(1000.0));
        assert!(j.client_limited.unwrap().contains("98 % of its 2 cores"));
    }
}
