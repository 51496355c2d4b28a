//! How sure the operating zone is. Each level's throughput and p99 latency are redrawn from
//! their measured values and relative standard errors (log-normal, independent between
//! levels), and its SLA verdict from the probability that every SLA holds; the knee, the ideal
//! balance and the safe zone are found again on each draw. Their 90 % intervals are the 5th and
//! 95th percentiles of the draws (levels, so the interval is a range of the levels measured),
//! with the share of draws that agreed with the measured answer. Deterministic: the same points
//! give the same intervals.

use crate::knee::KneeRule;
use crate::zone::{operating_zone, OperatingZone, ZonePoint};
use crate::zone_range::{LevelRange, ZoneDraw, ZoneIntervals};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

/// Draws of the zone.
pub const ZONE_DRAWS: usize = 400;

/// The zone's intervals over `points` (as measured: `measured`); `None` when no point carries
/// its uncertainty.
pub fn zone_intervals(
    points: &[ZonePoint],
    rule: &KneeRule,
    measured: &OperatingZone,
) -> Option<ZoneIntervals> {
    if points.iter().all(|p| p.uncertainty.is_none()) {
        return None;
    }
    let seed = points.iter().fold(0x7a6f_6e65_u64, |h, p| {
        h.rotate_left(7) ^ u64::from(p.point.concurrency)
    });
    let mut rng = StdRng::seed_from_u64(seed);
    let mut samples = Vec::with_capacity(ZONE_DRAWS);
    let mut redrawn = points.to_vec();
    for _ in 0..ZONE_DRAWS {
        for (r, p) in redrawn.iter_mut().zip(points) {
            let Some(u) = p.uncertainty else { continue };
            let (a, b): (f64, f64) = (rng.sample(StandardNormal), rng.sample(StandardNormal));
            r.point.throughput = p.point.throughput * (u.throughput_se * a).exp();
            r.point.p99_latency_ms = p.point.p99_latency_ms * (u.latency_se * b).exp();
            if let Some(prob) = u.pass_probability {
                r.meets_slas = Some(rng.random::<f64>() < prob);
            }
        }
        let Ok(z) = operating_zone(&redrawn, rule) else {
            continue;
        };
        let factor = z
            .ideal_balance
            .and_then(|c| {
                let i = points.iter().position(|p| p.point.concurrency == c)?;
                let m = points[i].point.throughput;
                (m > 0.0).then(|| redrawn[i].point.throughput / m)
            })
            .unwrap_or(1.0);
        samples.push(ZoneDraw {
            knee: z.knee.knee,
            ideal_balance: z.ideal_balance,
            safe_max: z.safe_max,
            throughput_factor: factor,
        });
    }
    let column = |f: fn(&ZoneDraw) -> Option<u32>| samples.iter().map(f).collect::<Vec<_>>();
    Some(ZoneIntervals {
        level: 0.9,
        draws: samples.len(),
        knee: LevelRange::of(&column(|d| d.knee), measured.knee.knee),
        ideal_balance: LevelRange::of(&column(|d| d.ideal_balance), measured.ideal_balance),
        safe_max: LevelRange::of(&column(|d| d.safe_max), measured.safe_max),
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knee::LevelPoint;

    fn sweep(se: f64) -> Vec<ZonePoint> {
        // the source documents' sweep: throughput flattens after 256
        [
            (16, 492.5, 8_000.0),
            (64, 1433.4, 12_000.0),
            (128, 2100.0, 17_000.0),
            (256, 2823.4, 28_000.0),
            (512, 2850.0, 55_000.0),
            (1024, 2790.0, 98_000.0),
        ]
        .map(|(c, t, l)| {
            ZonePoint::new(LevelPoint::new(c, t, l), None, 0.0).with_uncertainty(se, se, None)
        })
        .to_vec()
    }

    #[test]
    fn a_precise_sweep_agrees_and_a_noisy_one_spreads() {
        let rule = KneeRule::default();
        let precise = sweep(0.005);
        let zone = operating_zone(&precise, &rule).unwrap();
        assert_eq!(zone.knee.knee, Some(256));
        let i = zone_intervals(&precise, &rule, &zone).unwrap();
        assert_eq!((i.knee.low, i.knee.high), (Some(256), Some(256)), "{i:?}");
        assert!(i.knee.agreement > 0.95, "{i:?}");
        let noisy = sweep(0.15);
        let j = zone_intervals(&noisy, &rule, &zone).unwrap();
        assert!(j.knee.agreement < i.knee.agreement, "{j:?}");
        assert!(j.knee.low < Some(256) || j.knee.high > Some(256), "{j:?}");
        assert_eq!(j.draws, ZONE_DRAWS);
        assert_eq!(zone_intervals(&noisy, &rule, &zone).unwrap(), j);
        // without uncertainty there is nothing to redraw
        let exact: Vec<ZonePoint> = precise
            .iter()
            .map(|p| ZonePoint::new(p.point, None, 0.0))
            .collect();
        assert!(zone_intervals(&exact, &rule, &zone).is_none());
        assert!(
            i.knee.to_string().starts_with("90 % interval 256"),
            "{}",
            i.knee
        );
    }

    #[test]
    fn an_uncertain_sla_verdict_moves_the_ideal_balance() {
        let rule = KneeRule::default();
        let mut pts = sweep(0.01);
        // 128 passes its SLAs only 40 % of the time
        for p in &mut pts {
            let prob = match p.point.concurrency {
                c if c < 128 => 1.0,
                128 => 0.4,
                _ => 0.0,
            };
            *p = ZonePoint::new(p.point, Some(prob >= 0.5), 0.0).with_uncertainty(
                0.01,
                0.01,
                Some(prob),
            );
        }
        let zone = operating_zone(&pts, &rule).unwrap();
        assert_eq!(zone.ideal_balance, Some(64));
        let i = zone_intervals(&pts, &rule, &zone).unwrap();
        assert_eq!(
            (i.ideal_balance.low, i.ideal_balance.high),
            (Some(64), Some(128))
        );
        assert!((0.5..0.7).contains(&i.ideal_balance.agreement), "{i:?}");
    }
}
