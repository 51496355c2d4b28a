//! Where the search spends repeats on noisy readings, and its interval on the boundary.

use super::evidence::Verdict;
use super::{roundest_in, BoundaryInterval, Probe, ProbePhase, SearchPlanner, MAX_OBSERVATIONS};

impl SearchPlanner {
    /// Once the bracket is decided on noisy readings: the end of it whose verdict is not yet
    /// certain (its mean load within [`super::evidence::Z`] standard errors of a threshold), the
    /// closer call first, measured again (at most [`MAX_OBSERVATIONS`] times in all); then,
    /// when no level has failed with certainty, one level above the lowest fail.
    pub(super) fn repeat_doubtful(&self, lo: Option<u32>, hi: Option<u32>) -> Option<Probe> {
        let v = self.verdicts();
        let doubt = |c: Option<u32>, certain: fn(&Verdict) -> bool| {
            let c = c?;
            let x = v.get(&c)?;
            (!certain(x) && x.observations < MAX_OBSERVATIONS).then_some((x.doubt, c, x.pass))
        };
        let pick = [doubt(lo, |x| x.certain_pass), doubt(hi, |x| x.certain_fail)]
            .into_iter()
            .flatten()
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some(pick) = pick {
            return self.probe(pick.1, ProbePhase::Confirm, Some(pick.2));
        }
        // Nothing failed with certainty, and the lowest fail is measured as often as it may
        // be: a level far enough above it (three noise widths, at least the precision) to
        // close the interval from above.
        let h = hi?;
        if v.values().any(|x| x.certain_fail) || h >= self.config.concurrency_max {
            return None;
        }
        let noise = self.evidence().noise().unwrap_or(0.0);
        let step = (3.0 * noise).max(self.config.precision);
        let a = (f64::from(h) * (1.0 + step)).ceil() as u32;
        let b = (f64::from(h) * (1.0 + 2.0 * step)).floor() as u32;
        let c = roundest_in(a.max(h + 1), b.min(self.config.concurrency_max))?;
        (!v.contains_key(&c)).then(|| self.probe(c, ProbePhase::Confirm, Some(false)))?
    }

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
