//! Fleet sizing: instances needed to carry a peak, from one instance's measured capacity.

use serde::{Deserialize, Serialize};

use crate::Error;

/// The peak traffic to serve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakTraffic {
    /// Concurrent requests in flight.
    Concurrency(f64),
    /// Requests per second.
    RequestsPerSecond(f64),
    /// Output tokens per second.
    OutputTokensPerSecond(f64),
}

/// What one instance carries at its operating point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InstanceCapacity {
    /// The operating concurrency.
    pub concurrency: u32,
    /// Requests per second at that point.
    pub request_throughput: f64,
    /// Output tokens per second at that point.
    pub output_token_throughput: f64,
}

/// How many instances, and how loaded each would be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetPlan {
    /// Instances needed.
    pub instances: u32,
    /// The fraction of its operating-point capacity each instance carries at the peak.
    pub utilisation: f64,
    /// The headroom that was reserved (0.2 = plan each instance at 80 % of its capacity).
    pub headroom: f64,
    /// One sentence for people.
    pub explanation: String,
    /// The 90 % interval of `instances` (the fewest and most instances over the redraws of the
    /// sweep's measurements), when the levels carried their uncertainty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances_interval: Option<[u32; 2]>,
}

/// Instances needed for `peak` when each carries `capacity` and `headroom` of it is reserved:
/// `ceil(peak / (capacity × (1 − headroom)))`, at least 1.
pub fn fleet_size(
    peak: PeakTraffic,
    capacity: &InstanceCapacity,
    headroom: f64,
) -> Result<FleetPlan, Error> {
    let bad = |field: &'static str, reason: &str| {
        Err(Error::InvalidSearch {
            field,
            reason: reason.to_owned(),
        })
    };
    if !(0.0..1.0).contains(&headroom) {
        return bad("headroom", "must be at least 0 and below 1");
    }
    let (need, per_instance, unit) = match peak {
        PeakTraffic::Concurrency(n) => (n, f64::from(capacity.concurrency), "concurrent requests"),
        PeakTraffic::RequestsPerSecond(r) => (r, capacity.request_throughput, "requests/s"),
        PeakTraffic::OutputTokensPerSecond(t) => {
            (t, capacity.output_token_throughput, "output tokens/s")
        }
    };
    if !need.is_finite() || need < 0.0 {
        return bad("peak", "must be a finite number ≥ 0");
    }
    if !per_instance.is_finite() || per_instance <= 0.0 {
        return bad(
            "capacity",
            "the operating point carries no traffic of that kind",
        );
    }
    let usable = per_instance * (1.0 - headroom);
    let instances = ((need / usable).ceil() as u32).max(1);
    let utilisation = need / (f64::from(instances) * per_instance);
    Ok(FleetPlan {
        instances,
        utilisation,
        headroom,
        explanation: format!(
            "{need} {unit} at peak / ({per_instance:.1} per instance at concurrency {} × {:.0} % usable) = {instances} instance{}, each at {:.0} % of its operating point",
            capacity.concurrency,
            (1.0 - headroom) * 100.0,
            if instances == 1 { "" } else { "s" },
            utilisation * 100.0
        ),
        instances_interval: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: InstanceCapacity = InstanceCapacity {
        concurrency: 256,
        request_throughput: 11.0,
        output_token_throughput: 2823.0,
    };

    #[test]
    fn sizing_by_each_kind_of_peak() {
        let p = fleet_size(PeakTraffic::Concurrency(1000.0), &CAP, 0.2).unwrap();
        // 1000 / (256 × 0.8) = 4.88 → 5
        assert_eq!(p.instances, 5);
        assert!((p.utilisation - 1000.0 / 1280.0).abs() < 1e-12);
        assert_eq!(
            fleet_size(PeakTraffic::RequestsPerSecond(44.0), &CAP, 0.0)
                .unwrap()
                .instances,
            4
        );
        assert_eq!(
            fleet_size(PeakTraffic::RequestsPerSecond(44.1), &CAP, 0.0)
                .unwrap()
                .instances,
            5
        );
        assert_eq!(
            fleet_size(PeakTraffic::OutputTokensPerSecond(10_000.0), &CAP, 0.1)
                .unwrap()
                .instances,
            4
        );
        assert_eq!(
            fleet_size(PeakTraffic::Concurrency(0.0), &CAP, 0.2)
                .unwrap()
                .instances,
            1
        );
    }

    #[test]
    fn invalid_inputs() {
        assert!(fleet_size(PeakTraffic::Concurrency(10.0), &CAP, 1.0).is_err());
        assert!(fleet_size(PeakTraffic::Concurrency(-1.0), &CAP, 0.2).is_err());
        let none = InstanceCapacity {
            request_throughput: 0.0,
            ..CAP
        };
        assert!(fleet_size(PeakTraffic::RequestsPerSecond(1.0), &none, 0.2).is_err());
    }
}
