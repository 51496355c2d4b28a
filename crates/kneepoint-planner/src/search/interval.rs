//! Where the true boundary lies, from the levels' certain verdicts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::evidence::{Verdict, INTERVAL_LEVEL};
use super::{ProbePhase, SearchPlanner};

/// An interval on the true boundary (the highest concurrency that meets every SLA), at
/// [`BoundaryInterval::level`]: from the answer (the highest level below every point failure
/// whose SLAs all hold jointly with probability 0.95 on its readings, pooled with those of
/// the levels up to 10 % above it) to one below the lowest level that failed one SLA with
/// certainty (its mean load [`1.645`](INTERVAL_LEVEL) standard errors over the threshold, its
/// readings pooled with those up to 10 % below it). On a curve whose loads grow with
/// concurrency, each end is wrong with probability at most 5 %. Readings with no noise
/// estimate count as exact, so the interval is then the bracket itself.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BoundaryInterval {
    /// The stated coverage (0.9).
    pub level: f64,
    /// The highest level that passed with certainty, below every failing level (`None`: none
    /// did, and the boundary may lie under the lowest level probed).
    pub low: Option<u32>,
    /// One below the lowest level that failed with certainty (`None`: none did, and the
    /// boundary may lie above the highest level probed).
    pub high: Option<u32>,
}

impl BoundaryInterval {
    /// The interval of a set of verdicts (`lowest_fail`: the lowest level whose point verdict
    /// failed, above which no certain pass is taken as the lower end).
    pub(super) fn of(verdicts: &BTreeMap<u32, Verdict>, lowest_fail: Option<u32>) -> Self {
        let fail = verdicts
            .iter()
            .find(|(_, v)| v.certain_fail)
            .map(|(c, _)| *c);
        // a certain fail is also a point fail, so the lowest point fail comes first
        let low = super::evidence::safe_answer(verdicts, lowest_fail);
        BoundaryInterval {
            level: INTERVAL_LEVEL,
            low,
            high: fail.map(|f| f.saturating_sub(1)),
        }
    }

    /// True when `boundary` lies inside (an open end covers everything beyond it).
    pub fn covers(&self, boundary: u32) -> bool {
        self.low.is_none_or(|l| l <= boundary) && self.high.is_none_or(|h| boundary <= h)
    }

    /// (high − low) / high, when both ends are known.
    pub fn relative_width(&self) -> Option<f64> {
        let (l, h) = (self.low?, self.high?);
        (h > 0).then(|| f64::from(h.saturating_sub(l)) / f64::from(h))
    }
}

impl std::fmt::Display for BoundaryInterval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = (self.level * 100.0).round();
        match (self.low, self.high) {
            (Some(l), Some(h)) if l == h => write!(f, "{pct} % interval {l}"),
            (Some(l), Some(h)) => write!(f, "{pct} % interval {l}–{h}"),
            (Some(l), None) => write!(f, "{pct} % interval ≥ {l}"),
            (None, Some(h)) => write!(f, "{pct} % interval ≤ {h}"),
            (None, None) => write!(f, "{pct} % interval unknown"),
        }
    }
}

impl SearchPlanner {
    /// The interval on the boundary. Where the measurements reported no noise and no level was
    /// repeated, the readings' noise is taken to be the median error of the search's own
    /// predictions inside the bracket (model misfit included, so the interval errs wide).
    pub(super) fn interval(&self, lowest_fail: Option<u32>) -> BoundaryInterval {
        let evidence = self.evidence();
        let evidence = if evidence.noisy() {
            evidence
        } else {
            let mut errors: Vec<f64> = self
                .history
                .iter()
                .filter(|r| r.probe.phase != ProbePhase::Bracket)
                .filter_map(|r| r.prediction_error)
                .filter(|e| e.is_finite())
                .collect();
            errors.sort_by(f64::total_cmp);
            evidence.assume_noise(errors.get(errors.len() / 2).copied())
        };
        BoundaryInterval::of(&evidence.verdicts(), lowest_fail)
    }
}
