//! How a recommendation spends its launches, and what measuring its candidates gathered.

use std::collections::BTreeMap;
use std::path::Path;

use kneepoint_planner::config_search::Budget;
use kneepoint_planner::{Candidate, Objective, PeakPlan, Sla};
use kneepoint_report::schema::DeploymentRecord;

use crate::candidate::{CandidateSource, CandidateSpec};
use crate::Observer;

/// How a recommendation spends its launches.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum Strategy {
    /// Every candidate measured fully (the default).
    #[default]
    Grid,
    /// The configuration search over one matrix, within a budget.
    Adaptive(Budget),
}

/// What a strategy launches with: the recommendation's candidates and where runs go.
pub(crate) struct Launches<'a> {
    pub(crate) specs: &'a [CandidateSpec],
    pub(crate) objective: Objective,
    pub(crate) peak: Option<PeakPlan>,
    /// The SLAs the candidates are measured against, for the predictions' operating points.
    pub(crate) slas: &'a [Sla],
    pub(crate) observer: &'a dyn Observer,
    pub(crate) source: &'a dyn CandidateSource,
    pub(crate) artifact_dir: &'a Path,
}

/// What measuring the candidates gathered, by either strategy.
#[derive(Default)]
pub(crate) struct Gathered {
    pub(crate) candidates: Vec<Candidate>,
    pub(crate) dirs: Vec<Option<String>>,
    pub(crate) deployments: BTreeMap<String, Option<DeploymentRecord>>,
    pub(crate) interrupted: bool,
    pub(crate) trials: BTreeMap<String, Vec<String>>,
    pub(crate) stop: Option<String>,
    pub(crate) launches: u32,
    pub(crate) instance_hours: f64,
    pub(crate) cost: f64,
    /// Instance-hours of each full measurement (for the grid's estimate).
    pub(crate) full_hours: Vec<f64>,
}

impl Gathered {
    /// Counts a launch (`None`: nothing was launched; a launch that failed to start counts)
    /// in what was spent; `full`: it was a full measurement, whose hours estimate the grid's.
    pub(crate) fn count(&mut self, launch: Option<&DeploymentRecord>, full: bool) {
        let Some(d) = launch else { return };
        self.launches += 1;
        self.instance_hours += d.instance_hours;
        self.cost += d.benchmark_cost;
        if full {
            self.full_hours.push(d.instance_hours);
        }
    }
}
