//! How predictions are read against measurements (issue 58 part 5): a prediction of a launched
//! engine is rarely off by one constant factor. When the hardware is faster or slower than
//! modelled (other efficiencies, a simulator's time scale, an instance slower than its
//! datasheet), every latency moves, and with latency SLAs a combination's best level under the
//! SLAs moves too: a prediction off by 2 in speed can be off by 10 in value, or flip between
//! meeting the SLAs and not. So a prior may carry its prediction at several speeds
//! ([`Prior::by_speed`]); each measurement is read as the speed at which its prediction
//! matches it, and those speeds are modelled by setting (a mean, one shrunk effect per
//! setting's value, a residual: [`Calibration`]), so that an instance type slower than its
//! datasheet, or a KV dtype's cost, is learnt from the launches that have it and applied to
//! the combinations not launched yet. The residuals' spread sets how far an untried
//! combination may reach. A prior without speeds is read the same way in value.

use super::{ConfigSearch, Prior};

/// The speeds (times the modelled hardware's) a prior is best given at: 1/64 to 64 in steps of
/// a quarter octave (a simulator at `--time-scale 0.1` runs 10 times as fast as it models).
pub fn prior_speeds() -> Vec<f64> {
    (-24..=24).map(|k| 2f64.powf(f64::from(k) / 4.0)).collect()
}

impl Prior {
    /// A prior whose prediction at speed `s` (times the modelled hardware's) is `at(s)`, over
    /// [`prior_speeds`]; its `predicted` is `at(1.0)`.
    pub fn from_speeds(cannot_fit: Option<String>, at: impl Fn(f64) -> Option<f64>) -> Self {
        Prior {
            cannot_fit,
            predicted: at(1.0),
            by_speed: prior_speeds().into_iter().map(|s| (s, at(s))).collect(),
        }
    }
}

/// The spread of one gap around the model (log) that the fit's shrinkage assumes.
const FIT_SPREAD: f64 = 0.25;

/// How many gaps the prior spread ([`FIT_SPREAD`]) weighs as, pooled with the measured one.
const PRIOR_WEIGHT: f64 = 8.0;

/// The least spread of the gaps (log): measurement noise alone.
const LEAST_SPREAD: f64 = 0.05;

/// The gaps between predictions and measurements, modelled: each measured combination's gap
/// (the log of the speed at which its prediction matches its measurement, or for a prior
/// without speeds the log of measured over predicted) is a mean, plus one effect per
/// setting's value (an instance type slower than its datasheet, an fp8 KV cache's
/// dequantisation, a batch limit's scheduling cost), plus a residual of its own. The effects
/// are shrunk towards zero (a ridge, prior spread [`ConfigSearch::effect_spread`]) and fitted
/// by backfitting; the residuals' spread is the model's error.
#[derive(Debug, Clone)]
pub(super) struct Calibration {
    /// The mean gap.
    mean: f64,
    /// Each dimension's values' effects.
    effects: Vec<Vec<f64>>,
    /// Which values have been measured.
    seen: Vec<Vec<bool>>,
    /// The model's error on a measured value (`ln 2 / 2` with fewer than three gaps).
    pub(super) spread: f64,
}

impl ConfigSearch {
    /// Combination `i`'s predicted merit at `speed` (the grid point nearest it); a prior
    /// without speeds is the same at every speed.
    pub(super) fn prior_merit(&self, i: usize, speed: f64) -> Option<f64> {
        let p = &self.priors[i];
        if p.by_speed.is_empty() {
            return p.predicted.and_then(|v| self.merit(v));
        }
        let near = |s: f64| (s.ln() - speed.ln()).abs();
        p.by_speed
            .iter()
            .min_by(|a, b| near(a.0).total_cmp(&near(b.0)))
            .and_then(|(_, v)| *v)
            .and_then(|v| self.merit(v))
    }

    /// The best predicted merit at any speed from `low` to `high`.
    fn prior_reach(&self, i: usize, low: f64, high: f64) -> Option<f64> {
        let p = &self.priors[i];
        let inside = p
            .by_speed
            .iter()
            .filter(|(s, _)| *s >= low * 0.999 && *s <= high * 1.001)
            .filter_map(|(_, v)| v.and_then(|v| self.merit(v)));
        inside
            .chain(self.prior_merit(i, low))
            .chain(self.prior_merit(i, high))
            .max_by(f64::total_cmp)
    }

    /// Measured combination `i`'s gap (log): the speed, among those where it predicts a score,
    /// at which its prediction best matches its merit `m` (the one nearest 1 among equals),
    /// or measured over predicted for a prior without speeds; `None` without a prediction at
    /// any speed.
    fn gap(&self, i: usize, m: f64) -> Option<f64> {
        let p = &self.priors[i];
        if p.by_speed.is_empty() {
            return p.predicted.and_then(|v| self.merit(v)).map(|q| m - q);
        }
        if !p.by_speed.iter().any(|(_, v)| v.is_some()) {
            return None;
        }
        // only speeds where it predicts a score: one where it meets no SLA explains no score
        let misfit = |s: f64| match self.prior_merit(i, s) {
            Some(q) => (m - q).powi(2) + 1e-6 * s.ln().powi(2),
            None => f64::INFINITY,
        };
        p.by_speed
            .iter()
            .map(|(s, _)| *s)
            .min_by(|a, b| misfit(*a).total_cmp(&misfit(*b)))
            .map(f64::ln)
    }

    /// The ridge fit of `gaps` (each a combination's value indices and its gap): the mean
    /// and each dimension's values' effects, by backfitting.
    fn fit_gaps(&self, gaps: &[(Vec<usize>, f64)]) -> (f64, Vec<Vec<f64>>) {
        let shrink = (FIT_SPREAD / self.effect_spread.max(1e-3)).powi(2);
        let mut effects: Vec<Vec<f64>> = self
            .dims
            .iter()
            .map(|d| vec![0.0; d.values.len()])
            .collect();
        let mut mean = 0.0;
        if gaps.is_empty() {
            return (mean, effects);
        }
        let fitted = |effects: &[Vec<f64>], vs: &[usize]| -> f64 {
            vs.iter().enumerate().map(|(d, v)| effects[d][*v]).sum()
        };
        for _ in 0..30 {
            mean = gaps
                .iter()
                .map(|(vs, g)| g - fitted(&effects, vs))
                .sum::<f64>()
                / gaps.len() as f64;
            for d in 0..self.dims.len() {
                for v in 0..self.dims[d].values.len() {
                    let (sum, count) = gaps.iter().filter(|(vs, _)| vs[d] == v).fold(
                        (0.0, 0.0),
                        |(s, c), (vs, g)| {
                            (s + g - mean - fitted(&effects, vs) + effects[d][v], c + 1.0)
                        },
                    );
                    effects[d][v] = sum / (count + shrink);
                }
            }
        }
        (mean, effects)
    }

    /// The gap model fitted to what was measured, or `None` before any measurement of a
    /// predicted combination. Its spread is what the model fails to predict: the root mean
    /// square of each gap's error when the model is fitted without it (leave-one-out), so a
    /// model that fits its few points by as many effects is not taken at its word.
    pub(super) fn calibration(&self) -> Option<Calibration> {
        let gaps: Vec<(Vec<usize>, f64)> = (0..self.len())
            .filter_map(|i| {
                let (m, _) = self.evidence(i)?;
                Some((self.value_indices(i), self.gap(i, m)?))
            })
            .collect();
        if gaps.is_empty() {
            return None;
        }
        let (mean, effects) = self.fit_gaps(&gaps);
        let spread = if gaps.len() < 3 {
            // with fewer than three the spread is not known: ln 2 / 2 until then (2.5 of it,
            // the reach: about 2.4 times faster or slower)
            std::f64::consts::LN_2 / 2.0
        } else {
            let squares: f64 = (0..gaps.len())
                .map(|k| {
                    let rest: Vec<(Vec<usize>, f64)> = gaps
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != k)
                        .map(|(_, g)| g.clone())
                        .collect();
                    let (m, e) = self.fit_gaps(&rest);
                    let (vs, g) = &gaps[k];
                    let predicted = m + vs.iter().enumerate().map(|(d, v)| e[d][*v]).sum::<f64>();
                    (g - predicted).powi(2)
                })
                .sum();
            // pooled with a prior spread worth PRIOR_WEIGHT gaps, so a few gaps that happen
            // to agree do not make the model certain
            let n = gaps.len() as f64;
            ((squares + PRIOR_WEIGHT * FIT_SPREAD * FIT_SPREAD) / (n + PRIOR_WEIGHT))
                .sqrt()
                .max(LEAST_SPREAD)
        };
        let seen: Vec<Vec<bool>> = self
            .dims
            .iter()
            .enumerate()
            .map(|(d, dim)| {
                (0..dim.values.len())
                    .map(|v| gaps.iter().any(|(vs, _)| vs[d] == v))
                    .collect()
            })
            .collect();
        Some(Calibration {
            mean,
            effects,
            seen,
            spread,
        })
    }

    /// Combination `i`'s expected gap under `c`, and its standard deviation (the model's and
    /// the residual's).
    fn gap_of(&self, i: usize, c: &Calibration) -> (f64, f64) {
        let vs = self.value_indices(i);
        let mut g = c.mean;
        let mut var = c.spread * c.spread;
        for (d, v) in vs.iter().enumerate() {
            g += c.effects[d][*v];
            if !c.seen[d][*v] {
                var += self.effect_spread.powi(2);
            }
        }
        (g, var.sqrt())
    }

    /// Applies gap `g` to combination `i`'s prediction: the prediction at speed `e^g`, or
    /// moved by `g` for a prior without speeds.
    fn at_gap(&self, i: usize, g: f64) -> Option<f64> {
        if self.priors[i].by_speed.is_empty() {
            self.prior_merit(i, 1.0).map(|p| p + g)
        } else {
            self.prior_merit(i, g.exp())
        }
    }

    /// Combination `i`'s expected merit: its prediction at its expected gap (`None`: predicted
    /// to meet no SLA there, or no prediction).
    pub(super) fn expected(&self, i: usize, c: &Calibration) -> Option<f64> {
        self.at_gap(i, self.gap_of(i, c).0)
    }

    /// The most combination `i` may reach, and the relative error that allows: its
    /// prediction at its expected gap plus [`ConfigSearch::reach_spreads`] standard deviations (at least
    /// [`ConfigSearch::prior_error`]); `None` in the first when it is predicted to meet no SLA
    /// at any speed up to there.
    pub(super) fn reach(&self, i: usize, c: &Calibration) -> (Option<f64>, f64) {
        let (g, sd) = self.gap_of(i, c);
        let width = (self.reach_spreads * sd).max(self.prior_error.ln_1p());
        let reach = if self.priors[i].by_speed.is_empty() {
            self.at_gap(i, g + width)
        } else {
            // slower as well as faster: under SLAs a faster engine's best level is a busier
            // one, whose latency can be longer
            self.prior_reach(i, (g - width).exp(), (g + width).exp())
        };
        // the error in value: how far above its expectation the reach lies
        let error = match (reach, self.expected(i, c)) {
            (Some(r), Some(e)) if r > e => (r - e).exp_m1(),
            _ => width.exp_m1(),
        };
        (reach, error)
    }

    /// Whether combination `i` has a prediction (at some speed).
    pub(super) fn has_prediction(&self, i: usize) -> bool {
        let p = &self.priors[i];
        p.predicted.is_some() || p.by_speed.iter().any(|(_, v)| v.is_some())
    }
}
