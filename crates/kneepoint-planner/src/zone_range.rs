//! The shapes of the operating zone's intervals ([`crate::zone_intervals`] computes them).

use serde::{Deserialize, Serialize};

/// Where an answer that is a level fell over the draws.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LevelRange {
    /// The 5th percentile of the draws that gave an answer.
    pub low: Option<u32>,
    /// The 95th percentile.
    pub high: Option<u32>,
    /// Share of the draws that gave the measured answer (no answer included).
    pub agreement: f64,
    /// Share of the draws that gave no answer (no knee reached, say).
    pub none_share: f64,
}

impl LevelRange {
    pub(crate) fn of(values: &[Option<u32>], measured: Option<u32>) -> LevelRange {
        let n = values.len().max(1) as f64;
        let mut some: Vec<u32> = values.iter().flatten().copied().collect();
        some.sort_unstable();
        let at = |q: f64| {
            (!some.is_empty()).then(|| some[((some.len() - 1) as f64 * q).round() as usize])
        };
        LevelRange {
            low: at(0.05),
            high: at(0.95),
            agreement: values.iter().filter(|v| **v == measured).count() as f64 / n,
            none_share: values.iter().filter(|v| v.is_none()).count() as f64 / n,
        }
    }
}

impl std::fmt::Display for LevelRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = |x: f64| (x * 100.0).round();
        match (self.low, self.high) {
            (Some(l), Some(h)) if l == h => write!(f, "90 % interval {l}")?,
            (Some(l), Some(h)) => write!(f, "90 % interval {l}–{h}")?,
            _ => return write!(f, "none in {} % of redraws", pct(self.none_share)),
        }
        write!(f, " (as measured in {} % of redraws", pct(self.agreement))?;
        if self.none_share > 0.0 {
            write!(f, ", none in {} %", pct(self.none_share))?;
        }
        write!(f, ")")
    }
}

/// One redraw's answers.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ZoneDraw {
    /// The knee.
    pub knee: Option<u32>,
    /// The ideal balance.
    pub ideal_balance: Option<u32>,
    /// The top of the safe zone.
    pub safe_max: Option<u32>,
    /// The redrawn throughput at the ideal balance over its measured value (1 without one).
    pub throughput_factor: f64,
}

/// The operating zone's intervals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ZoneIntervals {
    /// The stated coverage (0.9).
    pub level: f64,
    /// Redraws.
    pub draws: usize,
    /// The knee.
    pub knee: LevelRange,
    /// The ideal balance.
    pub ideal_balance: LevelRange,
    /// The top of the safe zone.
    pub safe_max: LevelRange,
    /// Each redraw, for intervals of what depends on the zone (the fleet size).
    #[serde(skip)]
    pub samples: Vec<ZoneDraw>,
}

impl ZoneIntervals {
    /// One sentence for people: each answer's interval over the redraws.
    pub fn sentence(&self) -> String {
        format!(
            "how sure ({} redraws of each level within its measured precision): knee {}; ideal balance {}; safe zone up to {}",
            self.draws, self.knee, self.ideal_balance, self.safe_max
        )
    }
}
