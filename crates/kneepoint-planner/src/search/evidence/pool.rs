//! Certain verdicts from neighbouring levels: on a curve whose loads grow with concurrency, a
//! level's load is at most the mean load of the levels at and above it, and at least the mean
//! of the levels at and below it. So readings near a level count as evidence for it, pooled
//! over a window of levels within [`super::super::POOL_SPAN`] of it, without any model of the
//! curve's shape: a few single readings just below the boundary make the lowest of them a
//! certain pass, where on its own each would need repeating.

use std::collections::BTreeMap;

use super::{normal_cdf, Evidence, SlaEvidence, Verdict, Z};

/// One SLA's readings pooled over a window of levels.
#[derive(Default, Clone, Copy)]
struct Pool {
    /// Σ n·mean
    sum: f64,
    /// Σ n·σ²
    var: f64,
    /// Σ n
    n: f64,
}

impl Pool {
    fn add(&mut self, e: &SlaEvidence, sigma: f64) {
        let n = f64::from(e.n);
        self.sum += n * e.mean;
        self.var += n * sigma * sigma;
        self.n += n;
    }

    /// `mean / standard error` of the pooled readings.
    fn z(&self) -> f64 {
        (self.sum / self.n) / (self.var.sqrt() / self.n)
    }
}

impl Evidence {
    /// The noise of SLA `i` at a level when its readings may be pooled: finite, not floored,
    /// not exact, with a noise estimate.
    fn poolable(&self, i: usize, e: &SlaEvidence) -> Option<f64> {
        (e.mean.is_finite() && !e.floored && !e.exact)
            .then(|| self.sigma(i, e))
            .flatten()
    }

    /// Makes certain the point verdicts that the readings of neighbouring levels, pooled
    /// under monotone loads, make certain: a pass from the levels at and above it (all its
    /// SLAs jointly with probability [`super::CERTAIN`]), a fail from the levels at and below it (one
    /// SLA [`Z`] standard errors over its threshold). Each window starts at the level and
    /// grows one level at a time up to a span of `span`; the best window counts.
    pub(in crate::search) fn pool(&self, verdicts: &mut BTreeMap<u32, Verdict>, span: f64) {
        let levels: Vec<(u32, &Vec<SlaEvidence>)> =
            self.levels.iter().map(|(c, l)| (*c, l)).collect();
        for (k, (c, own)) in levels.iter().enumerate() {
            let Some(v) = verdicts.get_mut(c) else {
                continue;
            };
            let limit = f64::from(*c);
            if v.pass && !v.certain_pass() {
                let above = levels[k..]
                    .iter()
                    .take_while(|(u, _)| f64::from(*u) <= limit * span);
                v.pass_probability = v.pass_probability.max(self.pooled_pass(own, above));
            } else if !v.pass && !v.certain_fail {
                let below = levels[..=k]
                    .iter()
                    .rev()
                    .take_while(|(u, _)| f64::from(*u) * span >= limit);
                v.certain_fail = self.pooled_fail(own, below);
            }
        }
    }

    /// The highest joint pass probability of the windows of levels from the first upward. An
    /// SLA whose reading at the level cannot be pooled keeps the level's own probability.
    fn pooled_pass<'a>(
        &self,
        own: &[SlaEvidence],
        window: impl Iterator<Item = &'a (u32, &'a Vec<SlaEvidence>)>,
    ) -> f64 {
        let fixed: Vec<Option<f64>> = own
            .iter()
            .enumerate()
            .map(|(i, e)| match self.poolable(i, e) {
                Some(_) => None,
                None => Some(self.own_probability(i, e)),
            })
            .collect();
        let mut pools = vec![Pool::default(); own.len()];
        let mut best: f64 = 0.0;
        for (_, level) in window {
            for (i, e) in level.iter().enumerate() {
                if let (None, Some(s)) = (fixed[i], self.poolable(i, e)) {
                    pools[i].add(e, s);
                }
            }
            let p: f64 = pools
                .iter()
                .zip(&fixed)
                .map(|(pool, f)| f.unwrap_or_else(|| normal_cdf(-pool.z())))
                .product();
            best = best.max(p);
        }
        best
    }

    /// True when some window of levels from the first downward puts one SLA's pooled load
    /// [`Z`] standard errors over its threshold.
    fn pooled_fail<'a>(
        &self,
        own: &[SlaEvidence],
        window: impl Iterator<Item = &'a (u32, &'a Vec<SlaEvidence>)>,
    ) -> bool {
        let mut pools = vec![Pool::default(); own.len()];
        for (_, level) in window {
            for (i, e) in level.iter().enumerate() {
                if let (Some(_), Some(s)) = (self.poolable(i, &own[i]), self.poolable(i, e)) {
                    pools[i].add(e, s);
                }
            }
            if pools.iter().any(|p| p.n > 0.0 && p.z() >= Z) {
                return true;
            }
        }
        false
    }

    /// The probability that SLA `i` holds at a level on its own readings.
    fn own_probability(&self, i: usize, e: &SlaEvidence) -> f64 {
        match self.sigma(i, e) {
            _ if e.exact || !e.mean.is_finite() => f64::from(u8::from(e.all_hold)),
            Some(s) => normal_cdf(-e.mean / (s / f64::from(e.n).sqrt())),
            None => f64::from(u8::from(e.all_hold)),
        }
    }
}

/// One SLA at one level, when its readings may be pooled: mean `ln(load)`, observations and
/// the noise of one observation.
#[derive(Debug, Clone, Copy)]
pub(in crate::search) struct Reading {
    pub mean: f64,
    pub n: u32,
    pub sigma: f64,
}

impl Evidence {
    /// Every level's poolable readings, per SLA (`None` where they may not be pooled).
    pub(in crate::search) fn readings(&self) -> BTreeMap<u32, Vec<Option<Reading>>> {
        self.levels
            .iter()
            .map(|(c, l)| {
                let r = l
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        self.poolable(i, e).map(|sigma| Reading {
                            mean: e.mean,
                            n: e.n,
                            sigma,
                        })
                    })
                    .collect();
                (*c, r)
            })
            .collect()
    }
}
