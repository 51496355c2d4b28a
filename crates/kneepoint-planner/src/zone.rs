//! The operating zone of a set of measured levels (a sweep or a search's probes).
//!
//! - **Saturation point (knee)**: [`find_knee`]'s rule.
//! - **SLA breaking point**: the lowest level at which any SLA failed.
//! - **Ideal balance**: the level with the highest throughput among those at or below the knee
//!   that meet every SLA (ties go to the lower concurrency): most throughput at acceptable
//!   latency. Without a knee, every level counts; without SLAs, every level passes.
//! - **Safe zone**: levels up to the lower of the knee and the last level before the breaking
//!   point.

use serde::{Deserialize, Serialize};

use crate::knee::{find_knee, KneeEstimate, KneeRule, LevelPoint};
use crate::Error;

/// A measured level with its SLA verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ZonePoint {
    /// Throughput and p99 latency at the level.
    pub point: LevelPoint,
    /// Whether every SLA held (None when no SLA was given).
    pub meets_slas: Option<bool>,
}

/// Where to operate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatingZone {
    /// The saturation knee and its evidence.
    pub knee: KneeEstimate,
    /// The lowest level that failed an SLA.
    pub sla_breaking_point: Option<u32>,
    /// The recommended operating level.
    pub ideal_balance: Option<u32>,
    /// The highest level of the safe zone.
    pub safe_max: Option<u32>,
    /// One sentence for people.
    pub summary: String,
}

/// Computes the zone of `points` (any order).
pub fn operating_zone(points: &[ZonePoint], rule: &KneeRule) -> Result<OperatingZone, Error> {
    let mut pts = points.to_vec();
    pts.sort_by_key(|p| p.point.concurrency);
    let knee = find_knee(&pts.iter().map(|p| p.point).collect::<Vec<_>>(), rule)?;
    let breaking = pts
        .iter()
        .find(|p| p.meets_slas == Some(false))
        .map(|p| p.point.concurrency);
    let limit = knee.knee.unwrap_or(u32::MAX);
    let ideal = pts
        .iter()
        .filter(|p| p.point.concurrency <= limit && p.meets_slas != Some(false))
        .filter(|p| breaking.is_none_or(|b| p.point.concurrency < b))
        .fold(None::<&ZonePoint>, |best, p| match best {
            Some(b) if b.point.throughput >= p.point.throughput => Some(b),
            _ => Some(p),
        })
        .map(|p| p.point.concurrency);
    let below_break =
        breaking.and_then(|b| pts.iter().map(|p| p.point.concurrency).rfind(|&c| c < b));
    let safe_max = match (knee.knee, breaking) {
        (Some(k), Some(_)) => below_break.map(|b| b.min(k)),
        (Some(k), None) => Some(k),
        (None, Some(_)) => below_break,
        (None, None) => pts.last().map(|p| p.point.concurrency),
    };
    let mut summary = match ideal {
        Some(i) => format!("operate at {i} concurrent requests"),
        None => "no level meets the SLAs".to_owned(),
    };
    if let Some(k) = knee.knee {
        summary.push_str(&format!("; throughput saturates at {k}"));
    }
    if let Some(b) = breaking {
        summary.push_str(&format!("; SLAs break at {b}"));
    }
    Ok(OperatingZone {
        knee,
        sla_breaking_point: breaking,
        ideal_balance: ideal,
        safe_max,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn z(c: u32, t: f64, l: f64, ok: Option<bool>) -> ZonePoint {
        ZonePoint {
            point: LevelPoint::new(c, t, l),
            meets_slas: ok,
        }
    }

    #[test]
    fn source_sweep_without_slas() {
        let pts = [
            z(64, 1433.0, 12_000.0, None),
            z(256, 2823.0, 28_600.0, None),
            z(1024, 2790.0, 98_000.0, None),
        ];
        let zone = operating_zone(&pts, &KneeRule::default()).unwrap();
        assert_eq!(zone.knee.knee, Some(256));
        assert_eq!(zone.ideal_balance, Some(256));
        assert_eq!(zone.safe_max, Some(256));
        assert_eq!(zone.sla_breaking_point, None);
        assert!(zone.summary.contains("operate at 256"));
    }

    #[test]
    fn sla_breaks_before_the_knee() {
        let pts = [
            z(16, 490.0, 8_000.0, Some(true)),
            z(64, 1430.0, 12_000.0, Some(true)),
            z(128, 2060.0, 17_000.0, Some(false)),
            z(256, 2820.0, 28_000.0, Some(false)),
            z(1024, 2800.0, 98_000.0, Some(false)),
        ];
        let zone = operating_zone(&pts, &KneeRule::default()).unwrap();
        assert_eq!(zone.knee.knee, Some(256));
        assert_eq!(zone.sla_breaking_point, Some(128));
        assert_eq!(zone.ideal_balance, Some(64));
        assert_eq!(zone.safe_max, Some(64));
        assert!(zone.summary.contains("SLAs break at 128"));
    }

    #[test]
    fn nothing_meets_the_slas() {
        let pts = [
            z(16, 490.0, 8_000.0, Some(false)),
            z(32, 900.0, 9_000.0, Some(false)),
        ];
        let zone = operating_zone(&pts, &KneeRule::default()).unwrap();
        assert_eq!(zone.ideal_balance, None);
        assert_eq!(zone.safe_max, None);
        assert!(zone.summary.starts_with("no level"));
    }
}
