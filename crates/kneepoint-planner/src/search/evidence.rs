//! What the probes say about each level once noise is taken into account.
//!
//! Each SLA's reading at a probe is a *load* (value / threshold for an upper limit, the inverse
//! for a lower one; above 1 breaks). A level's evidence for an SLA is the mean of `ln(load)` over
//! its observations, and its noise the larger of the relative standard error the measurement
//! reported (a bootstrap over the level's requests) and the spread seen between repeats of the
//! same level (pooled over every repeated level, once it has at least two degrees of freedom).
//! With a noise estimate, a level passes an SLA when its mean load is at most 1, and the verdict
//! is *certain* when the mean lies [`Z`] standard errors from the threshold. Without one (a
//! caller that reports no spread, and no repeats yet), the readings are taken as exact: a level
//! passes only if every observation passed, as before noise was modelled.

use std::collections::BTreeMap;

use crate::predict::load;
use crate::probe::ProbeRecord;
use crate::sla::{Op, Sla};

mod pool;
pub(super) use pool::Reading;

/// The one-sided normal quantile behind certain verdicts and the boundary interval (5 % on
/// each side: a 90 % interval).
pub(super) const Z: f64 = 1.645;
/// The joint pass probability at which a level counts as holding every SLA: the level the
/// answer is stated at, and the lower end of the boundary interval.
pub const CERTAIN: f64 = 0.95;
/// The stated level of the boundary interval.
pub const INTERVAL_LEVEL: f64 = 0.9;
/// Loads are floored here before taking logarithms (an error rate that read zero).
const LOAD_FLOOR: f64 = 1e-6;

/// One SLA at one level.
#[derive(Debug, Clone, Copy)]
pub(super) struct SlaEvidence {
    /// Mean `ln(load)` over the observations (+∞ when one measured nothing).
    pub mean: f64,
    /// Some reading has no load (a threshold of 0 or below): the verdict is the checks'.
    exact: bool,
    /// Some reading was at the load floor (an error rate of zero): kept out of the noise and
    /// cliff estimates, whose logarithms it would swamp.
    floored: bool,
    /// The SLA's comparison is strict (`<`, `>`): a mean load of exactly 1 fails.
    strict: bool,
    /// Observations.
    pub n: u32,
    /// Every observation held the SLA.
    pub all_hold: bool,
    /// Some observation held it.
    pub any_hold: bool,
    /// The largest relative standard error reported at this level.
    reported: Option<f64>,
    /// Sum of squared deviations from the mean (for the pooled repeat spread).
    ss: f64,
}

/// One level's verdict.
#[derive(Debug, Clone, Copy)]
pub(super) struct Verdict {
    /// The level's point verdict: every SLA's mean load at most 1 (every observation passing
    /// where the noise is unknown).
    pub pass: bool,
    /// Some observation passed every SLA.
    pub any_pass: bool,
    /// Every observation passed every SLA.
    pub all_pass: bool,
    /// The probability, given the evidence, that every SLA holds at this level: the product
    /// over the SLAs of `Φ(−mean / standard error)` (1 or 0 for exact readings). SLAs that
    /// move together make the true joint probability higher, so the product errs low.
    pub pass_probability: f64,
    /// Some SLA fails with [`Z`] standard errors to spare (or measured nothing).
    pub certain_fail: bool,
    /// Observations of the level.
    pub observations: u32,
    /// The smallest relative SLA margin over all observations.
    pub min_margin: f64,
}

impl Verdict {
    /// Every SLA holds jointly with probability at least [`CERTAIN`] (and the level passes).
    pub fn certain_pass(&self) -> bool {
        self.pass && self.pass_probability >= CERTAIN
    }
}

/// The evidence of every level, and each SLA's noise.
#[derive(Debug, Clone)]
pub(super) struct Evidence {
    levels: BTreeMap<u32, Vec<SlaEvidence>>,
    /// Per level: the smallest margin, observations, some passed, all passed.
    margins: BTreeMap<u32, (f64, u32, bool, bool)>,
    /// Per SLA: the spread between repeats of a level (relative), once it has 2 degrees of
    /// freedom.
    repeat_sigma: Vec<Option<f64>>,
    /// The noise assumed where nothing else estimates it (see [`Evidence::assume_noise`]).
    fallback: Option<f64>,
}

impl Evidence {
    pub fn new(slas: &[Sla], history: &[ProbeRecord]) -> Evidence {
        let mut levels: BTreeMap<u32, Vec<Vec<Observation>>> = BTreeMap::new();
        let mut margins: BTreeMap<u32, (f64, u32, bool, bool)> = BTreeMap::new();
        for r in history {
            let c = r.probe.concurrency;
            let obs = levels
                .entry(c)
                .or_insert_with(|| vec![Vec::new(); slas.len()]);
            for (i, s) in slas.iter().enumerate() {
                let check = r.checks.iter().find(|k| k.sla == s.name);
                let value = check.and_then(|k| k.value);
                let l = value.and_then(|v| load(s, v));
                obs[i].push(Observation {
                    // nothing measured: a breach; a value with no load: compared as it is
                    y: match (value, l) {
                        (None, _) => f64::INFINITY,
                        (Some(_), None) => f64::NAN,
                        (Some(_), Some(l)) => l.max(LOAD_FLOOR).ln(),
                    },
                    floored: l.is_some_and(|l| l < LOAD_FLOOR * 10.0),
                    holds: check.is_some_and(|k| k.holds),
                    spread: check.and_then(|k| k.spread),
                });
            }
            let margin = r
                .checks
                .iter()
                .map(|k| k.margin.unwrap_or(f64::NEG_INFINITY))
                .fold(f64::INFINITY, f64::min);
            let m = margins.entry(c).or_insert((f64::INFINITY, 0, false, true));
            m.0 = m.0.min(margin);
            m.1 += 1;
            m.2 |= r.pass;
            m.3 &= r.pass;
        }
        let levels: BTreeMap<u32, Vec<SlaEvidence>> = levels
            .into_iter()
            .map(|(c, per_sla)| {
                let e = per_sla
                    .iter()
                    .zip(slas)
                    .map(|(o, s)| summarise(o, matches!(s.op, Op::Lt | Op::Gt)))
                    .collect();
                (c, e)
            })
            .collect();
        let repeat_sigma = (0..slas.len())
            .map(|i| {
                let (ss, df) = levels
                    .values()
                    .map(|l| &l[i])
                    .filter(|e| e.n > 1 && e.ss.is_finite() && !e.floored && !e.exact)
                    .fold((0.0, 0u32), |(ss, df), e| (ss + e.ss, df + e.n - 1));
                (df >= 2).then(|| (ss / f64::from(df)).sqrt())
            })
            .collect();
        Evidence {
            levels,
            margins,
            repeat_sigma,
            fallback: None,
        }
    }

    /// Assumes `sigma` where neither the measurements nor repeats estimate the noise: the
    /// boundary interval then takes the search's prediction errors as the noise rather than
    /// calling exact readings certain.
    pub fn assume_noise(mut self, sigma: Option<f64>) -> Self {
        self.fallback = sigma.filter(|s| s.is_finite() && *s > 0.0);
        self
    }

    /// The noise (standard deviation of one observation's `ln(load)`) of SLA `i` at a level:
    /// `None` when nothing estimates it.
    fn sigma(&self, i: usize, e: &SlaEvidence) -> Option<f64> {
        match (e.reported, self.repeat_sigma[i]) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
        .filter(|s| *s > 0.0)
        .or(self.fallback)
    }

    /// Where an SLA's load jumps between two adjacent probed levels `lo < hi`: the largest
    /// growth exponent `ln(load ratio) / ln(hi / lo)` over the SLAs, when the jump is also
    /// well beyond the noise; `None` when no SLA reads at both.
    pub fn jump(&self, lo: u32, hi: u32) -> Option<(f64, f64)> {
        let (a, b) = (self.levels.get(&lo)?, self.levels.get(&hi)?);
        let span = (f64::from(hi) / f64::from(lo)).ln();
        a.iter()
            .zip(b)
            .enumerate()
            .filter(|(_, (x, y))| {
                x.mean.is_finite() && y.mean.is_finite() && y.mean > 0.0 && !x.floored
            })
            .map(|(i, (x, y))| {
                let rise = y.mean - x.mean;
                let noise = self
                    .sigma(i, x)
                    .unwrap_or(0.0)
                    .max(self.sigma(i, y).unwrap_or(0.0));
                (rise / span, rise - 3.0 * noise * std::f64::consts::SQRT_2)
            })
            .max_by(|p, q| p.0.total_cmp(&q.0))
    }

    /// True when some SLA's noise is estimated at some level.
    pub fn noisy(&self) -> bool {
        self.levels.values().any(|l| {
            l.iter()
                .enumerate()
                .any(|(i, e)| self.sigma(i, e).is_some())
        })
    }

    /// The largest noise estimate over the SLAs and levels (relative), for reports.
    pub fn noise(&self) -> Option<f64> {
        self.levels
            .values()
            .flat_map(|l| l.iter().enumerate().filter_map(|(i, e)| self.sigma(i, e)))
            .reduce(f64::max)
    }

    /// Every level's verdict, its certainty pooled with its neighbours' readings (see
    /// [`Evidence::pool`]).
    pub fn verdicts(&self) -> BTreeMap<u32, Verdict> {
        let mut v = self.own_verdicts();
        self.pool(&mut v, super::POOL_SPAN);
        v
    }

    /// Every level's verdict on its own readings.
    fn own_verdicts(&self) -> BTreeMap<u32, Verdict> {
        self.levels
            .iter()
            .map(|(c, l)| {
                let (min_margin, observations, any_pass, all_pass) = self
                    .margins
                    .get(c)
                    .copied()
                    .unwrap_or((0.0, 0, false, false));
                let mut v = Verdict {
                    pass: true,
                    pass_probability: 1.0,
                    any_pass,
                    all_pass,
                    certain_fail: false,
                    observations,
                    min_margin,
                };
                for (i, e) in l.iter().enumerate() {
                    // exact readings (no noise estimate, or no load to compare: a threshold of
                    // 0 or below): every observation must hold
                    let exact = |e: &SlaEvidence| match (e.all_hold, e.any_hold) {
                        (true, _) => (true, f64::NEG_INFINITY),
                        (false, true) => (false, 0.0),
                        (false, false) => (false, f64::INFINITY),
                    };
                    let (pass, z) = match self.sigma(i, e) {
                        _ if e.exact => exact(e),
                        _ if !e.mean.is_finite() => (e.mean < 0.0, e.mean),
                        Some(s) => (
                            if e.strict {
                                e.mean < 0.0
                            } else {
                                e.mean <= 0.0
                            },
                            e.mean / (s / f64::from(e.n).sqrt()),
                        ),
                        None => exact(e),
                    };
                    v.pass &= pass;
                    v.pass_probability *= match (pass, z.is_finite()) {
                        (_, true) => normal_cdf(-z),
                        (true, false) => 1.0,
                        (false, false) => 0.0,
                    };
                    v.certain_fail |= z >= Z;
                }
                // joint verdicts: the level passes when all its SLAs more likely hold than
                // not on the same evidence, and with certainty when they all hold with
                // probability CERTAIN
                v.pass &= v.pass_probability >= 0.5;
                (*c, v)
            })
            .collect()
    }
}

/// The answer a set of verdicts supports: the highest level below the lowest point fail `hi`
/// whose SLAs all hold with certainty (on exact readings, the highest pass).
pub(super) fn safe_answer(verdicts: &BTreeMap<u32, Verdict>, hi: Option<u32>) -> Option<u32> {
    verdicts
        .range(..hi.unwrap_or(u32::MAX))
        .rev()
        .find(|(_, v)| v.certain_pass())
        .map(|(c, _)| *c)
}

/// The standard normal distribution function.
pub(super) fn normal_cdf(x: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(-x / std::f64::consts::SQRT_2)
}

/// One observation of one SLA.
#[derive(Debug, Clone, Copy)]
struct Observation {
    /// `ln(load)`: +∞ when nothing was measured, NaN when the value has no load.
    y: f64,
    /// The load was at the floor.
    floored: bool,
    /// The SLA held.
    holds: bool,
    /// The reported relative error.
    spread: Option<f64>,
}

fn summarise(obs: &[Observation], strict: bool) -> SlaEvidence {
    let n = obs.len() as u32;
    let exact = obs.iter().any(|o| o.y.is_nan());
    let mean = if exact {
        f64::NAN
    } else {
        obs.iter().map(|o| o.y).sum::<f64>() / f64::from(n.max(1))
    };
    let ss = if mean.is_finite() {
        obs.iter().map(|o| (o.y - mean).powi(2)).sum()
    } else {
        f64::INFINITY
    };
    SlaEvidence {
        mean,
        exact,
        floored: obs.iter().any(|o| o.floored),
        strict,
        n,
        all_hold: obs.iter().all(|o| o.holds),
        any_hold: obs.iter().any(|o| o.holds),
        reported: obs.iter().filter_map(|o| o.spread).reduce(f64::max),
        ss,
    }
}
