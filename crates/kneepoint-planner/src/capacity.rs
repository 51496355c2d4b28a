//! Whether a measurement established a candidate's capacity or only a lower bound of it.
//!
//! A sweep establishes it when it found a knee, a level that broke an SLA or had too many
//! errors, or reached the engine's bound (the sequences its KV cache and scheduler run at once:
//! beyond it requests queue). A search establishes it when it found a failing level, or held
//! every SLA up to the engine's bound. Otherwise the highest level measured is only a floor:
//! sizing a fleet or a cost from it overstates what the candidate needs.

use crate::{OperatingZone, Outcome, StopReason};

/// Why a sweep's operating point is only a lower bound (`None`: the capacity is established).
/// `highest` is the highest level measured; `engine_bound` the stage-1 bound, when known.
pub fn sweep_lower_bound(
    zone: &OperatingZone,
    highest: Option<u32>,
    engine_bound: Option<u32>,
) -> Option<String> {
    let highest = highest?;
    if zone.knee.knee.is_some()
        || zone.sla_breaking_point.is_some()
        || zone.error_breaking_point.is_some()
        || engine_bound.is_some_and(|b| highest >= b)
    {
        return None;
    }
    Some(format!(
        "throughput was still rising at concurrency {highest}, the highest level measured (no knee, no SLA or error limit{}); measure higher levels before ranking it",
        match engine_bound {
            Some(b) => format!(", below the engine's bound of {b}"),
            None => String::new(),
        }
    ))
}

/// Why a search's answer is only a lower bound (`None`: established): every SLA held at the
/// top of the range, and the range stopped below the engine's bound.
pub fn search_lower_bound(
    outcome: &Outcome,
    concurrency_max: u32,
    engine_bound: Option<u32>,
) -> Option<String> {
    if outcome.stop_reason != Some(StopReason::FeasibleAtMax)
        || engine_bound.is_some_and(|b| concurrency_max >= b)
    {
        return None;
    }
    Some(format!(
        "every SLA held at concurrency_max {concurrency_max}, the top of the range searched; raise it{} before ranking",
        match engine_bound {
            Some(b) => format!(" (the engine holds {b})"),
            None => String::new(),
        }
    ))
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;
    use crate::{operating_zone, KneeRule, LevelPoint, ZonePoint};

    fn zone(pts: &[(u32, f64, f64)]) -> OperatingZone {
        let z: Vec<ZonePoint> = pts
            .iter()
            .map(|&(c, t, l)| ZonePoint::new(LevelPoint::new(c, t, l), None, 0.0))
            .collect();
        operating_zone(&z, &KneeRule::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn rising_throughput_is_a_floor_until_the_engine_bound() {
        let rising = zone(&[(4, 100.0, 900.0), (16, 380.0, 950.0), (64, 1400.0, 1100.0)]);
        let why = sweep_lower_bound(&rising, Some(64), None).unwrap_or_default();
        assert!(why.contains("still rising at concurrency 64"), "{why}");
        assert!(sweep_lower_bound(&rising, Some(64), Some(256)).is_some());
        assert_eq!(sweep_lower_bound(&rising, Some(64), Some(64)), None);
        let knee = zone(&[
            (64, 1400.0, 900.0),
            (256, 2800.0, 1000.0),
            (1024, 2790.0, 4000.0),
        ]);
        assert_eq!(sweep_lower_bound(&knee, Some(1024), None), None);
    }
}
