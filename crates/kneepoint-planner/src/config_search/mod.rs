//! The configuration search (issue 49): which engine configuration to launch next,
//! and at what fidelity, so that the best configuration is found without measuring the whole
//! grid. Pure: it proposes trials and takes their outcomes back; launching, measuring and
//! tearing down belong to the caller (the engine's recommendation, or any other tool).
//!
//! The method:
//! 1. **Skip** what cannot run or cannot win: a combination the stage-1 fit says does not fit
//!    is never launched; one whose calibrated prediction, or whose estimate from an additive
//!    model of the screenings, cannot reach the best measured even at the far end of its error
//!    is skipped, named with the numbers. Calibration (`calibration.rs`): a prior may be given
//!    at several speeds of the hardware ([`Prior::by_speed`]); each measurement is read as the
//!    speed at which its prediction matches it, those speeds are modelled by setting (a mean
//!    and shrunk effects, so an instance type slower than its datasheet is learnt from its own
//!    launches), and an untried combination may reach its prediction at its expected speed plus
//!    2.5 times the model's leave-one-out error (at least [`ConfigSearch::prior_error`]; about
//!    2.4 times faster or slower until three combinations were measured). The additive model's error is at
//!    least twice its residuals' spread.
//! 2. **Measure fully at once** the best predicted combination (the likeliest finalist) and,
//!    once at most [`ConfigSearch::direct_below`] are left, every one.
//! 3. **Screen** the rest cheaply (a short level, a coarse search), the one that may reach
//!    furthest first (before any measurement, the best predicted), or
//!    spread over the space (each new one as far as possible from those tried, counted in
//!    differing settings) when there are no priors.
//! 4. **Search fully** only the screened ones that could still be the best: those whose
//!    screening interval (its spread widened by the screening's own error) reaches the leader's.
//!
//! It stops when the leader's lead over the runner-up is certain (the probability that it
//! truly ranks ahead, from both spreads, at least [`ConfigSearch::certainty`]) and nothing
//! unmeasured could still overtake it, when every combination is measured or skipped, or
//! when the budget (launches, instance-hours) would be overrun; the answer says which. A launch
//! that failed to start counts against the budget too (one launch, and the hours until it
//! failed), and once the budget is spent nothing more is launched, whatever the outcomes.
//!
//! ```
//! use kneepoint_planner::config_search::{ConfigSearch, Dimension, Goal, TrialOutcome};
//! let dims = vec![
//!     Dimension::new("max_num_seqs", ["32", "128", "512"]),
//!     Dimension::new("kv_cache_dtype", ["auto", "fp8"]),
//! ];
//! let mut s = ConfigSearch::new(dims, Goal::Maximize).unwrap();
//! while let Some(t) = s.next_trial() {
//!     let seqs: f64 = s.settings(t.combination)[0].1.parse().unwrap();
//!     let score = seqs.min(200.0) * if s.settings(t.combination)[1].1 == "fp8" { 1.1 } else { 1.0 };
//!     s.observe(t, TrialOutcome::measured(score, 0.02, 0.1));
//! }
//! let a = s.answer();
//! assert_eq!(s.settings(a.best.unwrap()), [("max_num_seqs", "512"), ("kv_cache_dtype", "fp8")]);
//! ```

use statrs::distribution::{ContinuousCDF, Normal};

use crate::Error;

mod calibration;
mod outcome;
mod skip;

pub use calibration::prior_speeds;
pub use outcome::TrialOutcome;
#[cfg(test)]
mod tests;

/// One setting of the engine and the values tried, in order (an ordinal setting in its
/// natural order).
#[derive(Debug, Clone, PartialEq)]
pub struct Dimension {
    /// The setting's name (`max_num_seqs`).
    pub name: String,
    /// Its values.
    pub values: Vec<String>,
    /// Whether a later value never scores worse, the other settings alike (a batch limit under
    /// the throughput or cost goal: a larger limit runs every level a smaller one does the same
    /// way, and more): a combination without a prediction is then skipped once one with later
    /// values of these settings, and the same others, is measured.
    pub monotone: bool,
}

impl Dimension {
    /// `name` over `values`.
    pub fn new<S: Into<String>>(name: &str, values: impl IntoIterator<Item = S>) -> Self {
        Dimension {
            name: name.to_owned(),
            values: values.into_iter().map(Into::into).collect(),
            monotone: false,
        }
    }

    /// The dimension with later values never scoring worse ([`Dimension::monotone`]); its
    /// values in ascending order.
    pub fn monotone(mut self) -> Self {
        self.monotone = true;
        self
    }
}

/// Which way the score is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// Higher is better (throughput per instance).
    Maximize,
    /// Lower is better (cost per million output tokens, latency).
    Minimize,
}

/// How hard a trial measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fidelity {
    /// A short level at a predicted operating point: cheap, coarse.
    Screen,
    /// The full measurement (an SLA search or a sweep).
    Full,
}

/// A trial to run: which combination (an index into the space), at what fidelity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trial {
    /// The combination's index ([`ConfigSearch::settings`] names it).
    pub combination: usize,
    /// How hard to measure it.
    pub fidelity: Fidelity,
}

/// What is known of a combination before any launch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prior {
    /// Why it cannot run (the stage-1 fit): never launched.
    pub cannot_fit: Option<String>,
    /// Its predicted score (on the modelled hardware).
    pub predicted: Option<f64>,
    /// Its predicted score if the hardware ran `speed` times as fast as modelled (every
    /// latency divided by it, every rate multiplied), `None` where no level would meet the
    /// SLAs, speeds ascending (empty: `predicted` at any speed). The search fits the speed the
    /// measurements show ([`Prior::from_speeds`] fills it over [`prior_speeds`]).
    pub by_speed: Vec<(f64, Option<f64>)>,
}

/// The budget of a search.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Budget {
    /// At most this many launches (trials).
    pub max_launches: Option<u32>,
    /// At most this many instance-hours.
    pub max_instance_hours: Option<f64>,
}

/// Why the search stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The leader's lead is certain and nothing unmeasured can overtake it.
    Certain,
    /// Every combination was measured fully or skipped.
    Exhausted,
    /// The budget is spent, or the next trial would overrun it.
    Budget,
}

/// Where one combination stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Not tried yet.
    Untried,
    /// Skipped before any launch, and why.
    Skipped(String),
    /// Screened: its score (or none) and spread.
    Screened(Option<f64>, f64),
    /// Measured fully: its score (or none) and spread.
    Searched(Option<f64>, f64),
}

/// The search's answer so far.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigAnswer {
    /// The best fully measured combination.
    pub best: Option<usize>,
    /// The probability that it truly ranks ahead of the runner-up.
    pub ahead_of_next: Option<f64>,
    /// Why it stopped (`None` while it goes on).
    pub stop: Option<Stop>,
    /// Launches spent.
    pub launches: u32,
    /// Instance-hours spent.
    pub instance_hours: f64,
}

/// The planner. Build it with [`ConfigSearch::new`], set priors and a budget, then alternate
/// [`ConfigSearch::next_trial`] and [`ConfigSearch::observe`].
#[derive(Debug, Clone)]
pub struct ConfigSearch {
    dims: Vec<Dimension>,
    goal: Goal,
    priors: Vec<Prior>,
    status: Vec<Status>,
    budget: Budget,
    launches: u32,
    hours: f64,
    hours_by: [(f64, u32); 2],
    start_hours: (f64, u32),
    stop: Option<Stop>,
    /// The probability of a true lead at which the search stops (default 0.9).
    pub certainty: f64,
    /// The least relative error of a prior prediction once calibrated (default 0.3; the
    /// engine's recommendation uses 0.5): a prediction worse than the best measured by more
    /// than its error cannot win.
    pub prior_error: f64,
    /// The relative error of a screening against a full measurement (default 0.1).
    pub screen_error: f64,
    /// The relative error of the estimate made from the screenings (each setting's effect
    /// added up; default 0.15).
    pub model_error: f64,
    /// With at most this many combinations left untried, each is measured fully, not
    /// screened (default 6).
    pub direct_below: usize,
    /// The least a launch can cost, instance-hours (default 0): what the next launch is
    /// expected to cost at the least, before any launch told better. A `max_instance_hours`
    /// below it launches nothing.
    pub least_launch_hours: f64,
    /// How far (log) one setting's value may move every prediction that has it, a priori
    /// (default 0.4): the shrinkage of the gap model's effects (an instance type slower than
    /// its datasheet, a KV dtype's cost the model does not know).
    pub effect_spread: f64,
    /// How many of the calibration's spreads an untried combination may reach above its
    /// expectation (default 2.5: on the structural family 2 gave fewer launches and fewer
    /// winners within 5 %, 3 the reverse; `STRUCTURAL_REACH` in that bench).
    pub reach_spreads: f64,
}

/// The most combinations a space may hold.
pub const MAX_COMBINATIONS: usize = 4096;

impl ConfigSearch {
    /// A search over every combination of `dims` for the `goal`.
    pub fn new(dims: Vec<Dimension>, goal: Goal) -> Result<Self, Error> {
        let mut n: usize = 1;
        for d in &dims {
            if d.values.is_empty() {
                return Err(Error::InvalidSearch {
                    field: "matrix",
                    reason: format!("{} lists no values", d.name),
                });
            }
            n = n.saturating_mul(d.values.len());
        }
        if n > MAX_COMBINATIONS {
            return Err(Error::InvalidSearch {
                field: "matrix",
                reason: format!("{n} combinations: at most {MAX_COMBINATIONS}"),
            });
        }
        Ok(ConfigSearch {
            dims,
            goal,
            priors: vec![Prior::default(); n],
            status: vec![Status::Untried; n],
            budget: Budget::default(),
            launches: 0,
            hours: 0.0,
            hours_by: [(0.0, 0); 2],
            start_hours: (0.0, 0),
            stop: None,
            certainty: 0.9,
            prior_error: 0.3,
            screen_error: 0.1,
            model_error: 0.15,
            direct_below: 6,
            least_launch_hours: 0.0,
            effect_spread: 0.4,
            reach_spreads: 2.5,
        })
    }

    /// The search with `budget`.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Sets combination `i`'s prior (ignored past the space).
    pub fn set_prior(&mut self, i: usize, prior: Prior) {
        if let Some(p) = self.priors.get_mut(i) {
            *p = prior;
        }
    }

    /// How many combinations the space holds.
    pub fn len(&self) -> usize {
        self.status.len()
    }

    /// Whether the space is empty (never: every dimension has a value).
    pub fn is_empty(&self) -> bool {
        self.status.is_empty()
    }

    /// Combination `i` as `(setting, value)` pairs, in the dimensions' order.
    pub fn settings(&self, i: usize) -> Vec<(&str, &str)> {
        self.dims
            .iter()
            .zip(self.value_indices(i))
            .map(|(d, v)| (d.name.as_str(), d.values[v].as_str()))
            .collect()
    }

    /// Where combination `i` stands.
    pub fn status(&self, i: usize) -> Option<&Status> {
        self.status.get(i)
    }

    /// The next trial, or `None` once the search has stopped ([`ConfigSearch::answer`] says
    /// why).
    pub fn next_trial(&mut self) -> Option<Trial> {
        if self.stop.is_some() {
            return None;
        }
        self.skip_what_cannot_win();
        let trial = self
            .next_screen()
            .map(|t| self.direct(t))
            .or_else(|| self.next_search());
        let Some(trial) = trial else {
            self.stop = Some(if self.lead_is_certain() {
                Stop::Certain
            } else {
                Stop::Exhausted
            });
            return None;
        };
        if self.over_budget(trial.fidelity) {
            self.stop = Some(Stop::Budget);
            return None;
        }
        Some(trial)
    }

    /// A screening made a full measurement where screening cannot pay: the first trial when
    /// there are predictions (the best predicted is the likeliest finalist, and a screening
    /// would be followed by a second launch to search it), without predictions a combination
    /// at the top of its monotone settings, and every trial once at most
    /// [`ConfigSearch::direct_below`] combinations are left untried (too few to skip by what a
    /// screening teaches).
    fn direct(&self, t: Trial) -> Trial {
        let first_predicted = self.has_prediction(t.combination)
            && !self
                .status
                .iter()
                .any(|s| matches!(s, Status::Searched(..) | Status::Screened(..)));
        // without a prediction, the top of the monotone settings is measured fully: its
        // measurement is what lets the combinations below it be skipped
        let top = !self.has_prediction(t.combination) && self.monotone_top(t.combination);
        if first_predicted || top || self.untried().count() <= self.direct_below {
            Trial {
                fidelity: Fidelity::Full,
                ..t
            }
        } else {
            t
        }
    }

    /// Takes a trial's outcome back.
    pub fn observe(&mut self, trial: Trial, outcome: TrialOutcome) {
        let Some(s) = self.status.get_mut(trial.combination) else {
            return;
        };
        let spread = outcome.spread.max(0.0);
        *s = match trial.fidelity {
            Fidelity::Screen => Status::Screened(outcome.score, spread),
            Fidelity::Full => Status::Searched(outcome.score, spread),
        };
        let hours = outcome.instance_hours.max(0.0);
        self.hours += hours;
        if outcome.launched {
            self.launches = self.launches.saturating_add(1);
            let by = if outcome.failed_start {
                &mut self.start_hours
            } else {
                &mut self.hours_by[usize::from(trial.fidelity == Fidelity::Full)]
            };
            by.0 += hours;
            by.1 += 1;
        }
    }

    /// The answer so far.
    pub fn answer(&self) -> ConfigAnswer {
        let (best, next) = self.leaders();
        ConfigAnswer {
            best: best.map(|(i, _, _)| i),
            ahead_of_next: best.zip(next).map(|(a, b)| ahead(a, b)),
            stop: self.stop,
            launches: self.launches,
            instance_hours: self.hours,
        }
    }

    /// A score as merit: the log of the score, oriented so that higher is better.
    fn merit(&self, score: f64) -> Option<f64> {
        (score > 0.0 && score.is_finite()).then(|| match self.goal {
            Goal::Maximize => score.ln(),
            Goal::Minimize => -score.ln(),
        })
    }

    /// Each combination's merit and spread, from its best evidence (a full measurement over a
    /// screening, whose spread is widened by the screening's error).
    fn evidence(&self, i: usize) -> Option<(f64, f64)> {
        match &self.status[i] {
            Status::Searched(Some(s), sp) => Some((self.merit(*s)?, *sp)),
            Status::Screened(Some(s), sp) => Some((
                self.merit(*s)?,
                (sp * sp + self.screen_error.powi(2)).sqrt(),
            )),
            _ => None,
        }
    }

    /// The best and second-best fully measured combinations: `(index, merit, spread)`.
    #[allow(clippy::type_complexity)]
    fn leaders(&self) -> (Option<(usize, f64, f64)>, Option<(usize, f64, f64)>) {
        let mut full: Vec<(usize, f64, f64)> = (0..self.len())
            .filter(|i| matches!(self.status[*i], Status::Searched(Some(_), _)))
            .filter_map(|i| self.evidence(i).map(|(m, s)| (i, m, s)))
            .collect();
        full.sort_by(|a, b| b.1.total_cmp(&a.1));
        (full.first().copied(), full.get(1).copied())
    }

    /// Combination `i` as the index of its value in each dimension.
    fn value_indices(&self, i: usize) -> Vec<usize> {
        let mut rest = i;
        let mut out = vec![0; self.dims.len()];
        for (d, dim) in self.dims.iter().enumerate().rev() {
            out[d] = rest % dim.values.len();
            rest /= dim.values.len();
        }
        out
    }

    /// The best merit measured so far (any fidelity).
    fn best_merit(&self) -> Option<f64> {
        (0..self.len())
            .filter_map(|i| self.evidence(i).map(|(m, _)| m))
            .max_by(f64::total_cmp)
    }

    /// The next screened combination that could still be the best (its reach at the
    /// certainty's quantile at least the leader's merit), highest reach first; the best
    /// screened one when nothing is measured fully yet.
    fn next_search(&self) -> Option<Trial> {
        let leader = self.leaders().0;
        let z = normal_quantile(self.certainty);
        let mut open: Vec<(usize, f64)> = (0..self.len())
            .filter(|i| matches!(self.status[*i], Status::Screened(Some(_), _)))
            .filter_map(|i| self.evidence(i).map(|(m, s)| (i, m + z * s)))
            .filter(|(_, reach)| leader.is_none_or(|(_, m, _)| *reach >= m))
            .collect();
        open.sort_by(|a, b| b.1.total_cmp(&a.1));
        open.first().map(|&(combination, _)| Trial {
            combination,
            fidelity: Fidelity::Full,
        })
    }

    fn untried(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len()).filter(|i| self.status[*i] == Status::Untried)
    }

    /// The next combination to screen: the best predicted, or the one farthest (in differing
    /// settings) from everything tried so far.
    fn next_screen(&self) -> Option<Trial> {
        let tried: Vec<usize> = (0..self.len())
            .filter(|i| matches!(self.status[*i], Status::Screened(..) | Status::Searched(..)))
            .collect();
        let calibration = self.calibration();
        // the most each may reach (an optimistic order finds a winner the prior ranks low
        // sooner, and every launch after it skips more)
        let expected = |i: usize| match &calibration {
            Some(c) => self.reach(i, c).0,
            None => self.prior_merit(i, 1.0),
        };
        let pick = self.untried().max_by(|&a, &b| {
            let (pa, pb) = (expected(a), expected(b));
            match (pa, pb) {
                (Some(x), Some(y)) => x.total_cmp(&y).then(b.cmp(&a)),
                (Some(_), None) => std::cmp::Ordering::Greater,
                (None, Some(_)) => std::cmp::Ordering::Less,
                (None, None) => self
                    .monotone_rank(a)
                    .cmp(&self.monotone_rank(b))
                    .then(self.distance(a, &tried).cmp(&self.distance(b, &tried)))
                    .then(b.cmp(&a)),
            }
        })?;
        Some(Trial {
            combination: pick,
            fidelity: Fidelity::Screen,
        })
    }

    /// The fewest settings in which `i` differs from any of `tried`.
    fn distance(&self, i: usize, tried: &[usize]) -> usize {
        let mine = self.settings(i);
        tried
            .iter()
            .map(|&t| {
                mine.iter()
                    .zip(self.settings(t))
                    .filter(|(a, b)| a.1 != b.1)
                    .count()
            })
            .min()
            .unwrap_or(self.dims.len())
    }

    /// Whether the leader's lead is certain and nothing unmeasured can overtake it.
    fn lead_is_certain(&self) -> bool {
        let (best, next) = self.leaders();
        let Some(b) = best else { return false };
        next.is_none_or(|n| ahead(b, n) >= self.certainty)
    }

    /// Whether the budget is spent (launches, instance-hours), or a launch at `fidelity`
    /// would overrun it.
    fn over_budget(&self, fidelity: Fidelity) -> bool {
        if self.budget.max_launches.is_some_and(|m| self.launches >= m) {
            return true;
        }
        let Some(max) = self.budget.max_instance_hours else {
            return false;
        };
        self.hours >= max || self.hours + self.expected_hours(fidelity) > max
    }

    /// What a launch at `fidelity` is expected to cost, instance-hours: the mean of the
    /// measured launches at that fidelity; without one, of the launches that failed to start
    /// (a launch costs at least its start); never below [`ConfigSearch::least_launch_hours`].
    fn expected_hours(&self, fidelity: Fidelity) -> f64 {
        let mean = |(hours, n): (f64, u32)| (n > 0).then(|| hours / f64::from(n));
        mean(self.hours_by[usize::from(fidelity == Fidelity::Full)])
            .or_else(|| mean(self.start_hours))
            .unwrap_or(0.0)
            .max(self.least_launch_hours)
    }
}

/// The probability that `a` truly ranks ahead of `b` (merits and spreads as in `leaders`).
fn ahead(a: (usize, f64, f64), b: (usize, f64, f64)) -> f64 {
    let se = (a.2 * a.2 + b.2 * b.2).sqrt();
    let gap = a.1 - b.1;
    if se == 0.0 {
        return if gap > 0.0 { 1.0 } else { 0.5 };
    }
    Normal::standard().cdf(gap / se)
}

/// The standard normal's `p` quantile (`p` clamped inside (0, 1)).
fn normal_quantile(p: f64) -> f64 {
    Normal::standard().inverse_cdf(p.clamp(1e-6, 1.0 - 1e-6))
}
