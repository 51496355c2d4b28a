//! What the search may leave untried: the combinations that cannot fit, and those that cannot
//! win by a calibrated prediction or by the additive model of the screenings.

use super::{ConfigSearch, Status};

impl ConfigSearch {
    /// Combination `i`'s merit estimated from the screenings: an additive model (a mean and
    /// one effect per setting's value) fitted by least squares (backfitting, which an
    /// unbalanced set of screenings needs: plain means per value would credit a value with its
    /// companions' effects), with the model's own relative error: the residuals' spread
    /// (corrected for the effects fitted), doubled, or [`ConfigSearch::model_error`] when
    /// larger. Settings that interact (tensor parallelism with the batch limit under a latency
    /// SLA) leave large residuals, and the model then skips little. `None` until every one of
    /// `i`'s values was screened and there are two more screenings than effects.
    pub(super) fn additive(&self, i: usize) -> Option<(f64, f64)> {
        let seen: Vec<(Vec<usize>, f64)> = (0..self.len())
            .filter_map(|j| self.evidence(j).map(|(m, _)| (self.value_indices(j), m)))
            .collect();
        let effects = 1 + self.dims.iter().map(|d| d.values.len() - 1).sum::<usize>();
        if seen.len() < effects + 2 {
            return None;
        }
        let mine = self.value_indices(i);
        for (d, v) in mine.iter().enumerate() {
            if !seen.iter().any(|(vs, _)| vs[d] == *v) {
                return None;
            }
        }
        let mean = seen.iter().map(|(_, m)| m).sum::<f64>() / seen.len() as f64;
        let mut effect: Vec<Vec<f64>> = self
            .dims
            .iter()
            .map(|d| vec![0.0; d.values.len()])
            .collect();
        for _ in 0..50 {
            for d in 0..self.dims.len() {
                for v in 0..self.dims[d].values.len() {
                    let residuals: Vec<f64> = seen
                        .iter()
                        .filter(|(vs, _)| vs[d] == v)
                        .map(|(vs, m)| {
                            let others: f64 = (0..self.dims.len())
                                .filter(|&e| e != d)
                                .map(|e| effect[e][vs[e]])
                                .sum();
                            m - mean - others
                        })
                        .collect();
                    if !residuals.is_empty() {
                        effect[d][v] = residuals.iter().sum::<f64>() / residuals.len() as f64;
                    }
                }
            }
        }
        let fitted = |vs: &[usize]| {
            mean + vs
                .iter()
                .enumerate()
                .map(|(d, v)| effect[d][*v])
                .sum::<f64>()
        };
        let squares: f64 = seen.iter().map(|(vs, m)| (m - fitted(vs)).powi(2)).sum();
        let spread = (squares / (seen.len() - effects) as f64).sqrt();
        Some((fitted(&mine), self.model_error.max((2.0 * spread).exp_m1())))
    }

    /// How far up its monotone dimensions combination `i` sits (the sum of its value indices
    /// there): without predictions the highest go first, since they may make the rest
    /// dominated.
    pub(super) fn monotone_rank(&self, i: usize) -> usize {
        self.value_indices(i)
            .iter()
            .zip(&self.dims)
            .filter(|(_, d)| d.monotone)
            .map(|(v, _)| *v)
            .sum()
    }

    /// Whether `j` dominates `i`: the same values on every dimension but the monotone ones,
    /// and on those values at least `i`'s.
    fn dominates(&self, j: usize, i: usize) -> bool {
        j != i
            && self
                .value_indices(j)
                .iter()
                .zip(self.value_indices(i))
                .zip(&self.dims)
                .all(|((vj, vi), d)| if d.monotone { *vj >= vi } else { *vj == vi })
    }

    /// Whether `i` is the top of its monotone settings among what could still score: every
    /// combination above it was skipped or scored nothing (it failed, or met no SLA).
    pub(super) fn monotone_top(&self, i: usize) -> bool {
        self.dims.iter().any(|d| d.monotone)
            && (0..self.len()).filter(|&j| self.dominates(j, i)).all(|j| {
                matches!(
                    self.status[j],
                    Status::Skipped(_) | Status::Searched(None, _) | Status::Screened(None, _)
                )
            })
    }

    /// A fully measured combination (with a score) that dominates `i`: the same values on
    /// every dimension but the monotone ones, and on those values at least `i`'s.
    fn dominated_by(&self, i: usize) -> Option<usize> {
        if !self.dims.iter().any(|d| d.monotone) {
            return None;
        }
        (0..self.len()).find(|&j| {
            matches!(self.status[j], Status::Searched(Some(_), _)) && self.dominates(j, i)
        })
    }

    pub(super) fn skip_what_cannot_win(&mut self) {
        let best = self.best_merit();
        let calibration = self.calibration();
        for i in 0..self.len() {
            if self.status[i] != Status::Untried {
                continue;
            }
            if let Some(why) = &self.priors[i].cannot_fit {
                self.status[i] = Status::Skipped(format!("cannot fit: {why}"));
                continue;
            }
            // a prediction counts once it is calibrated against a measurement
            let has_prior = self.has_prediction(i);
            // without one, structure: a measured combination further up its monotone settings
            if let Some(j) = self.dominated_by(i).filter(|_| !has_prior) {
                let up: Vec<String> = self
                    .settings(j)
                    .iter()
                    .zip(&self.dims)
                    .filter(|(_, d)| d.monotone)
                    .map(|((k, v), _)| format!("{k} {v}"))
                    .collect();
                self.status[i] = Status::Skipped(format!(
                    "cannot win: {} was measured, and a larger value does not score worse",
                    up.join(", ")
                ));
                continue;
            }
            let prior = calibration.as_ref().filter(|_| has_prior).map(|c| {
                let (reach, error) = self.reach(i, c);
                (self.expected(i, c), reach, error)
            });
            // ln(1 + error): a prediction may be this far too pessimistic
            let predicted = prior
                .and_then(|(e, r, error)| {
                    let r = r?;
                    Some((
                        e.unwrap_or(r),
                        r,
                        error,
                        "predicted (calibrated on the measured)",
                    ))
                })
                .or_else(|| {
                    self.additive(i).map(|(p, error)| {
                        (p, p + error.ln_1p(), error, "estimated from the screenings")
                    })
                });
            if let (Some((p, reach, error, how)), Some(b)) = (predicted, best) {
                if reach < b {
                    self.status[i] = Status::Skipped(format!(
                        "cannot win: {how} {:.0} % behind the best measured; it would have to do {:.0} % better than that, beyond the estimate's {:.0} % error",
                        (1.0 - (p - b).exp()) * 100.0,
                        (b - p).exp_m1() * 100.0,
                        error * 100.0
                    ));
                }
            }
        }
    }
}
