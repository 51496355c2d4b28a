//! The `max-concurrency-under-sla` search as a state machine: [`SearchPlanner::next_probe`] says which
//! level to run, [`SearchPlanner::observe`] takes what it measured, [`SearchPlanner::outcome`] reports. No I/O,
//! no clock: callers run probes however they like.
//!
//! The algorithm (`docs/search.md` has the reasoning and the evaluation; the models are in
//! `predict.rs`):
//! 1. **Bracket**: probe `concurrency_min`, then aim each probe just below the lowest crossing
//!    any SLA predicts from the passes so far (at most [`MAX_JUMP`] times the highest pass, and
//!    not above `concurrency_max`), or just above it when that fail would close the search;
//!    double (×4 above `search_initial_points`) when nothing predicts a crossing.
//! 2. **Narrow** the bracket [highest pass, lowest fail]: the crossing of each breached SLA on
//!    the log-log line between the bracket's readings, the lowest taken, and a probe just on
//!    one side of it (the side that cuts the bracket most), within the stated precision. A
//!    verdict that contradicts the prediction is followed by the line through the two readings
//!    on the side that moved, then the pass–fail line again, then a bisection. Probes are the
//!    "roundest" integers in the target range (320 rather than 317).
//! 3. **Stop** when `(fail − pass) ≤ precision × fail`, or at `search_max_iterations`.
//!    A passing answer whose smallest SLA margin is under `confirm_margin` is probed once more
//!    (a close call near a noisy boundary) unless the last predictions of that SLA came true
//!    more closely than the margin; a level passes only if every observation passes.
//!
//! 4. **Noise** (when measurements report it, or levels were repeated): verdicts are joint
//!    probabilities over the SLAs, pooled with neighbouring levels under monotone loads
//!    (`evidence.rs`, `evidence/pool.rs`); the answer is the highest level that holds every
//!    SLA with probability 0.95, the point estimate beside it; once the bracket converges the
//!    remaining probes (and up to `noise_iterations` more while the interval is wide) go where
//!    they most raise the answer or close the interval (`certify.rs`).
//!
//! Non-monotone data (a pass above a fail, as in the source's 320-pass / 284-fail) is read
//! conservatively: the answer is below the lowest fail, and it is flagged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::probe::{Probe, ProbePhase, ProbeRecord};
pub use crate::search_config::SearchConfig;
use crate::sla::{check_all, Measurement};
use crate::Error;

mod certify;
mod evidence;
mod explain;
mod interval;
mod outcome;
pub use evidence::INTERVAL_LEVEL;
use evidence::{Evidence, Verdict};
pub use interval::BoundaryInterval;
pub use outcome::Outcome;

/// The largest step above the highest pass while bracketing, however far the predicted
/// crossing: a probe far above the boundary is the most expensive one a search can run.
pub const MAX_JUMP: f64 = 16.0;
/// Predictions whose errors are read as the noise estimate before a close call goes unconfirmed.
const NOISE_SAMPLES: usize = 2;
/// A load growing faster than concurrency to this power between two adjacent levels is a cliff.
const CLIFF_EXPONENT: f64 = 8.0;
/// How far above (below) a level the readings of other levels count as evidence that it
/// passes (fails) with certainty, on loads that grow with concurrency.
const POOL_SPAN: f64 = 1.1;
/// How many times the noise estimate must fit inside a close call's margin for it to stand
/// without a repeat.
const NOISE_CLEARANCE: f64 = 3.0;

/// Why the search stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The bracket is narrower than the precision.
    Converged,
    /// `search_max_iterations` probes were used.
    MaxIterations,
    /// An SLA failed already at `concurrency_min`.
    InfeasibleAtMin,
    /// Every SLA held at `concurrency_max`: the limit is higher than the range searched.
    FeasibleAtMax,
}

/// How far to trust the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Converged, with a clear margin or a confirmed close call, on monotone data.
    High,
    /// Converged, but a close call went unconfirmed or the data was not monotone.
    Medium,
    /// Not converged (budget spent), or no boundary inside the range.
    Low,
}

/// The search state machine.
#[derive(Debug, Clone)]
pub struct SearchPlanner {
    config: SearchConfig,
    history: Vec<ProbeRecord>,
    pending: Option<Probe>,
    stop: Option<StopReason>,
    /// Narrow probes in a row whose verdict contradicted the prediction (and on which side:
    /// true when an expected pass failed).
    misses: (u32, bool),
}

impl SearchPlanner {
    /// A new search; fails on an invalid configuration.
    pub fn new(config: SearchConfig) -> Result<Self, Error> {
        config.validate()?;
        Ok(SearchPlanner {
            config,
            history: Vec::new(),
            pending: None,
            stop: None,
            misses: (0, false),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    /// Every probe so far, in order.
    pub fn history(&self) -> &[ProbeRecord] {
        &self.history
    }

    /// The next level to measure, or `None` when the search is done. Until it is observed, the
    /// same probe is returned again.
    pub fn next_probe(&mut self) -> Option<Probe> {
        if let Some(p) = self.pending {
            return Some(p);
        }
        if self.stop.is_some() {
            return None;
        }
        let probe = self.choose();
        self.pending = probe;
        probe
    }

    /// Records what the pending probe measured, and returns its verdict (every SLA's check,
    /// pass or fail, the first breach).
    pub fn observe(&mut self, concurrency: u32, m: &Measurement) -> Result<&ProbeRecord, Error> {
        let probe = match self.pending {
            Some(p) if p.concurrency == concurrency => p,
            other => {
                return Err(Error::UnexpectedObservation {
                    got: concurrency,
                    expected: other.map(|p| p.concurrency),
                })
            }
        };
        self.record(probe, m);
        self.history.last().ok_or(Error::UnexpectedObservation {
            got: concurrency,
            expected: None,
        })
    }

    /// Records a probe the search may not have chosen: a saved search replayed after the
    /// algorithm changed (`probe` as saved, phase and expected verdict kept), or a level
    /// measured by other means. Its verdict counts like any other, and the next probe is chosen
    /// afresh from everything recorded. Fails on a concurrency outside
    /// `[concurrency_min, concurrency_max]`.
    pub fn replay(&mut self, probe: Probe, m: &Measurement) -> Result<(), Error> {
        let c = probe.concurrency;
        if c < self.config.concurrency_min || c > self.config.concurrency_max {
            return Err(Error::InvalidSearch {
                field: "concurrency",
                reason: format!(
                    "a replayed probe at {c} lies outside [{}, {}]",
                    self.config.concurrency_min, self.config.concurrency_max
                ),
            });
        }
        let chosen = self.pending.take().is_some_and(|p| p.concurrency == c);
        if !chosen {
            self.misses = (0, false);
        }
        self.stop = None;
        self.record(probe, m);
        Ok(())
    }

    fn record(&mut self, probe: Probe, m: &Measurement) {
        let checks = check_all(&self.config.slas, m);
        let pass = checks.iter().all(|c| c.holds);
        match (probe.phase, probe.expect_pass) {
            (ProbePhase::Narrow, Some(expected)) if expected != pass => {
                self.misses = (self.misses.0 + 1, !pass);
            }
            // a right prediction, or a bisection after misses: the lines are trusted again
            (ProbePhase::Narrow | ProbePhase::Bisect, _) => self.misses = (0, false),
            _ => {}
        }
        let mut record = ProbeRecord {
            probe,
            throughput: m.throughput,
            first_breach: checks.iter().find(|c| !c.holds).map(|c| c.sla.clone()),
            checks,
            pass,
            prediction_error: None,
            client_limited: m.client_limited.clone(),
        };
        record.prediction_error =
            crate::predict::prediction_error(&self.config.slas, &self.history, &record);
        self.history.push(record);
        self.pending = None;
    }

    fn evidence(&self) -> Evidence {
        Evidence::new(&self.config.slas, &self.history)
    }

    fn verdicts(&self) -> BTreeMap<u32, Verdict> {
        self.evidence().verdicts()
    }

    /// (highest pass below the lowest fail, lowest fail, noisy verdicts: a level both passed and
    /// failed, or a pass lies above the lowest fail)
    fn bracket(&self) -> (Option<u32>, Option<u32>, bool) {
        let v = self.verdicts();
        let hi = v.iter().find(|(_, l)| !l.pass).map(|(c, _)| *c);
        let lo = v
            .iter()
            .filter(|(c, l)| l.pass && hi.is_none_or(|h| **c < h))
            .map(|(c, _)| *c)
            .next_back();
        // verdicts that disagree: a level both passing and failing across its observations
        // (whichever way its pooled reading went), or a pass above the lowest fail
        let non_monotone = v.values().any(|l| l.any_pass != l.all_pass)
            || hi.is_some_and(|h| v.iter().any(|(c, l)| *c > h && l.pass));
        (lo, hi, non_monotone)
    }

    /// The probes this search may run: `max_iterations`, and `noise_iterations` more while the
    /// readings report noise and the boundary interval is wider than twice the precision.
    fn budget(&self, noisy: bool, hi: Option<u32>) -> u32 {
        let c = &self.config;
        let wide = || {
            self.interval(hi)
                .relative_width()
                .is_none_or(|w| w > 2.0 * c.precision)
        };
        if noisy && c.noise_iterations > 0 && wide() {
            c.max_iterations.saturating_add(c.noise_iterations)
        } else {
            c.max_iterations
        }
    }

    /// True when the answer `at` passed by a margin well clear of the search's estimate of
    /// measurement noise: for the SLA with the smallest margin there, the prediction errors of
    /// the last [`NOISE_SAMPLES`] probes that had a prediction, each under a
    /// [`NOISE_CLEARANCE`]-th of the answer's distance from the threshold (both as
    /// `|ln(load)|`, so that `<=` and `>=` SLAs compare alike).
    fn clear_of_noise(&self, at: u32) -> bool {
        let Some((check, sla)) = self
            .history
            .iter()
            .filter(|r| r.probe.concurrency == at)
            .flat_map(|r| &r.checks)
            .filter(|k| k.margin.is_some())
            .min_by(|a, b| a.margin.unwrap_or(0.0).total_cmp(&b.margin.unwrap_or(0.0)))
            .and_then(|k| Some((k, self.config.slas.iter().find(|s| s.name == k.sla)?)))
        else {
            return false;
        };
        let Some(distance) = check
            .value
            .and_then(|v| crate::predict::load(sla, v))
            .map(|l| l.ln().abs())
            .filter(|d| d.is_finite())
        else {
            return false;
        };
        let recent: Vec<f64> = (0..self.history.len())
            .rev()
            .filter_map(|i| {
                crate::predict::prediction_error(
                    std::slice::from_ref(sla),
                    &self.history[..i],
                    &self.history[i],
                )
            })
            .take(NOISE_SAMPLES)
            .collect();
        recent.len() == NOISE_SAMPLES && recent.iter().all(|e| NOISE_CLEARANCE * e < distance)
    }

    fn probe(
        &self,
        concurrency: u32,
        phase: ProbePhase,
        expect_pass: Option<bool>,
    ) -> Option<Probe> {
        Some(Probe {
            iteration: self.history.len() as u32 + 1,
            concurrency,
            // Every slot sends at least once, or the level would not reach its concurrency.
            request_count: self.config.request_count.max(concurrency),
            phase,
            expect_pass,
        })
    }

    fn choose(&mut self) -> Option<Probe> {
        let c = &self.config;
        let (lo, hi, non_monotone) = self.bracket();
        let noisy = self.evidence().noisy();
        let budget = self.budget(noisy, hi);
        let decided = match (lo, hi) {
            (None, Some(_)) => Some(StopReason::InfeasibleAtMin),
            (Some(l), None) if l >= c.concurrency_max => Some(StopReason::FeasibleAtMax),
            (Some(l), Some(h)) if c.converged(l, h) => {
                let v = self.verdicts();
                // A close call is measured again unless the latest predictions came true well
                // within its margin (noise of that size would have shown).
                let close = !noisy
                    && v.get(&l).is_some_and(|x| {
                        x.observations == 1
                            && x.min_margin < c.confirm_margin
                            && (non_monotone || !self.clear_of_noise(l))
                    });
                if close && (self.history.len() as u32) < budget {
                    return self.probe(l, ProbePhase::Confirm, Some(true));
                }
                Some(StopReason::Converged)
            }
            _ => None,
        };
        if let Some(reason) = decided {
            if noisy && (self.history.len() as u32) < budget {
                if let Some(p) = self.certify(lo, hi) {
                    return Some(p);
                }
            }
            self.stop = Some(reason);
            return None;
        }
        if self.history.len() as u32 >= budget {
            self.stop = Some(StopReason::MaxIterations);
            return None;
        }
        match (lo, hi) {
            (None, None) => self.probe(c.concurrency_min, ProbePhase::Bracket, None),
            (Some(l), None) => self.grow(l),
            (Some(l), Some(h)) => self.narrow(l, h),
            (None, Some(_)) => None,
        }
    }

    /// The next probe above the highest pass `lo` while nothing has failed: aimed just below
    /// the predicted crossing (at most [`MAX_JUMP`] times `lo`), or just above it when a fail
    /// there would already close the search; doubling when nothing predicts a crossing.
    fn grow(&mut self, lo: u32) -> Option<Probe> {
        let c = &self.config;
        let p = c.precision;
        let max = f64::from(c.concurrency_max);
        let double = |s: &Self| s.probe(s.config.next_doubling(lo), ProbePhase::Bracket, None);
        let Some(star) = crate::predict::crossing(&c.slas, &self.history, lo, None) else {
            return double(self);
        };
        let closing = f64::from(lo) / (1.0 - p);
        let (range, expect_pass) = if star <= closing {
            ((star.ceil(), closing.floor().min(max)), false)
        } else {
            let t = star.min(f64::from(lo) * MAX_JUMP).min(max);
            if t >= max {
                ((max, max), true)
            } else {
                (((t * (1.0 - p / 2.0)).ceil(), t.floor()), true)
            }
        };
        let a = (range.0.max(0.0) as u32).max(lo + 1);
        let b = (range.1.max(0.0) as u32).min(c.concurrency_max);
        // No integer in the window (small levels): the next one up, whose fail closes the
        // search, rather than a doubling the prediction says would fail.
        match roundest_in(a, b).or_else(|| roundest_in(lo + 1, b.max(lo + 1))) {
            Some(n) if n <= c.concurrency_max => {
                self.probe(n, ProbePhase::Bracket, Some(expect_pass))
            }
            _ => double(self),
        }
    }

    fn narrow(&mut self, lo: u32, hi: u32) -> Option<Probe> {
        let bisect = |s: &Self| {
            // The middle third of the bracket, in log space while it spans more than ×2.
            let (l, h) = (f64::from(lo), f64::from(hi));
            let (a, b) = if h > 2.0 * l {
                let r = (h / l).ln() / 3.0;
                ((l.ln() + r).exp().ceil(), (h.ln() - r).exp().floor())
            } else {
                let w = h - l;
                ((l + w / 3.0).ceil(), (h - w / 3.0).floor())
            };
            let c = roundest_in((a as u32).max(lo + 1), (b as u32).min(hi - 1))
                .unwrap_or(lo + (hi - lo) / 2);
            s.probe(c, ProbePhase::Bisect, None)
        };
        let slas = &self.config.slas;
        let star = match self.misses {
            // The line between pass and fail was wrong there (the curve bends): the two
            // readings on the side that just moved say how it bends. After a second miss, the
            // line again (the bracket is narrower now); a third bisects.
            (1, fails) => crate::predict::side_crossing(slas, &self.history, lo, hi, fails),
            (0 | 2, _) => crate::predict::crossing(slas, &self.history, lo, Some(hi)),
            _ => None,
        };
        let Some(star) = star else {
            return bisect(self);
        };
        let half = (self.config.precision * star / 2.0).max(0.5);
        let (below, above) = (star - f64::from(lo), f64::from(hi) - star);
        let (range, expect_pass) = if below >= above {
            (((star - half).ceil(), star.floor()), true)
        } else {
            ((star.ceil(), (star + half).floor()), false)
        };
        let a = (range.0.max(0.0) as u32).max(lo + 1);
        let b = (range.1.max(0.0) as u32).min(hi - 1);
        match roundest_in(a, b) {
            Some(c) => self.probe(c, ProbePhase::Narrow, Some(expect_pass)),
            None => bisect(self),
        }
    }
}

/// The "roundest" integer in `[a, b]`: the one divisible by the largest power of two.
pub fn roundest_in(a: u32, b: u32) -> Option<u32> {
    if a > b {
        return None;
    }
    (0..32).rev().find_map(|k| {
        let step = 1u64 << k;
        let m = u64::from(a).div_ceil(step) * step;
        (m <= u64::from(b)).then_some(m as u32)
    })
}

#[cfg(test)]
mod tests;
