//! Recommendations: measure each candidate deployment (a search when SLAs are given, a sweep
//! otherwise), cost it at its operating point, size a fleet for the peak and rank by one
//! objective. Each candidate's run lands in its own sub-folder; `recommendations.json` and
//! `report.html` sit on top.

use kneepoint_core::folder;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kneepoint_planner::{recommend, Candidate, Objective, PeakPlan, Recommendation};
use kneepoint_report::schema::{
    write_document, DeploymentRecord, PriceSource, RankedCandidate, Recommendations, Spent,
    SCHEMA_VERSION,
};
use kneepoint_runner::CancelToken;

use crate::candidate::{CandidateSource, CandidateSpec};
use crate::measure::{NOT_MEASURED, SERVER_EXITED};
use crate::strategy::{Gathered, Launches, Strategy};
use crate::{Error, Observer, Silent};

/// What a recommendation produced.
#[derive(Debug)]
#[non_exhaustive]
pub struct RecommendReport {
    /// The objective ranked by.
    pub objective: Objective,
    /// Ranked candidates, then provisional ones, then those that meet no SLA.
    pub recommendations: Vec<Recommendation>,
    /// The same, as written to `recommendations.json`: with each candidate's folder, stage-1
    /// bound and prediction.
    pub candidates: Vec<RankedCandidate>,
    /// Currency of the costs.
    pub currency: String,
    /// Where the files are.
    pub artifact_dir: PathBuf,
    /// True when interrupted (candidates not yet measured are missing).
    pub interrupted: bool,
    /// The settings proposed for launched candidates, and why (stage 2).
    pub proposals: Vec<String>,
    /// Candidates whose measurement stands (ran, and their server did not go away during it):
    /// 0 means there is nothing to recommend from.
    pub measured: usize,
    /// `grid` or `adaptive`.
    pub strategy: String,
    /// Why the adaptive search stopped.
    pub search_stop: Option<String>,
    /// What the launches cost, and what the grid would have.
    pub spent: Option<Spent>,
}

/// A recommendation ready to run: candidates, a source of their runs, the objective.
pub struct Recommend {
    objective: Objective,
    candidates: Vec<CandidateSpec>,
    source: Box<dyn CandidateSource>,
    by_search: bool,
    peak: Option<PeakPlan>,
    currency: String,
    price_table: Option<PriceSource>,
    artifact_dir: PathBuf,
    observer: Arc<dyn Observer>,
    overwrite: bool,
    log: Option<Arc<crate::RunLog>>,
    proposals: Vec<String>,
    parallel: usize,
    strategy: Strategy,
    slas: Vec<kneepoint_planner::Sla>,
}

/// Builds a [`Recommend`].
pub struct RecommendBuilder(Recommend);

impl RecommendBuilder {
    /// Adds a candidate.
    pub fn candidate(mut self, c: CandidateSpec) -> Self {
        self.0.candidates.push(c);
        self
    }

    /// Says that candidates are measured by SLA searches (the document's `mode`).
    pub fn by_search(mut self, yes: bool) -> Self {
        self.0.by_search = yes;
        self
    }

    /// Peak traffic and headroom to size each fleet for.
    pub fn peak(mut self, peak: Option<PeakPlan>) -> Self {
        self.0.peak = peak;
        self
    }

    /// Currency of the prices (default USD).
    pub fn currency(mut self, currency: impl Into<String>) -> Self {
        self.0.currency = currency.into();
        self
    }

    /// Where the prices come from, for the report.
    pub fn price_table(mut self, source: Option<PriceSource>) -> Self {
        self.0.price_table = source;
        self
    }

    /// Receives progress.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.0.observer = observer;
        self
    }

    /// Says which settings were proposed for the candidates and why (stage 2): kept in
    /// `recommendations.json` and the run log.
    pub fn proposals(mut self, lines: Vec<String>) -> Self {
        self.0.proposals = lines;
        self
    }

    /// Measures `n` candidates at a time (default 1: one at a time, as the articles isolate
    /// them). Only for candidates that share nothing: separate machines, GPUs or endpoints.
    pub fn parallel(mut self, n: usize) -> Self {
        self.0.parallel = n.max(1);
        self
    }

    /// How launches are spent: every candidate ([`Strategy::Grid`], the default) or the
    /// configuration search over one matrix ([`Strategy::Adaptive`]).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.0.strategy = strategy;
        self
    }

    /// The SLAs the candidates' runs are judged by: the adaptive strategy reads each stage-1
    /// prediction at its best level within them.
    pub fn slas(mut self, slas: Vec<kneepoint_planner::Sla>) -> Self {
        self.0.slas = slas;
        self
    }

    /// Replace a previous run in the artifact folder (refused by default).
    pub fn overwrite(mut self, yes: bool) -> Self {
        self.0.overwrite = yes;
        self
    }

    /// Checks the candidates and creates the artifact folder.
    pub fn build(self) -> Result<Recommend, Error> {
        let r = self.0;
        if r.candidates.is_empty() {
            return Err(Error::invalid("no candidates to compare"));
        }
        let mut seen = std::collections::BTreeMap::new();
        for c in &r.candidates {
            if c.name.trim().is_empty() {
                return Err(Error::invalid("every candidate needs a name"));
            }
            if let Some(other) = seen.insert(c.folder(), &c.name) {
                return Err(Error::invalid(if *other == c.name {
                    format!("two candidates share the name {:?}", c.name)
                } else {
                    format!(
                        "candidates {other:?} and {:?} would share the folder {:?}: rename one",
                        c.name,
                        c.folder()
                    )
                }));
            }
            if !c.price_per_instance_hour.is_finite() || c.price_per_instance_hour < 0.0 {
                return Err(Error::invalid(format!(
                    "candidate {:?}: the price must be a number ≥ 0",
                    c.name
                )));
            }
            if c.instance_count == 0 {
                return Err(Error::invalid(format!(
                    "candidate {:?}: instance_count must be at least 1",
                    c.name
                )));
            }
        }
        if let Strategy::Adaptive(budget) = r.strategy {
            crate::adaptive::check_budget(&r.candidates, r.source.as_ref(), budget)?;
        }
        crate::bench::fresh_folder(&r.artifact_dir, r.overwrite)?;
        let mut r = r;
        let log = crate::RunLog::create(&r.artifact_dir)?;
        log.info(&format!(
            "recommendation in {}: objective {:?}, {} candidates ({}), {}",
            r.artifact_dir.display(),
            r.objective,
            r.candidates.len(),
            r.candidates
                .iter()
                .map(|c| format!(
                    "{} on {} × {} at {} {}/h{}",
                    c.name,
                    c.instance_count,
                    c.instance_type,
                    c.price_per_instance_hour,
                    r.currency,
                    c.max_concurrency
                        .map(|b| format!(", bound {b}"))
                        .unwrap_or_default()
                ))
                .collect::<Vec<_>>()
                .join("; "),
            if r.by_search {
                "SLA searches"
            } else {
                "sweeps"
            }
        ));
        if let Some(p) = &r.peak {
            log.info(&format!("peak {:?}, headroom {}", p.peak, p.headroom));
        }
        for p in &r.proposals {
            log.info(p);
        }
        r.observer = crate::Logged::wrap(r.observer.clone(), log.clone());
        r.log = Some(log);
        Ok(r)
    }
}

/// One candidate's outcome: what the planner ranks, its folder (when it has a run), its
/// deployment record, and whether the run was interrupted.
type One = (Candidate, Option<String>, Option<DeploymentRecord>, bool);

impl Recommend {
    /// Measures candidate `c` (number `i` of `total`): listed without a launch when it does
    /// not fit; `None` when interrupted before its run started.
    async fn one(
        &self,
        i: usize,
        total: usize,
        c: &CandidateSpec,
        cancel: &CancelToken,
    ) -> Result<Option<One>, Error> {
        let unmeasured = |reason: String| Candidate {
            name: c.name.clone(),
            instance_type: c.instance_type.clone(),
            instance_count: c.instance_count,
            price_per_instance_hour: c.price_per_instance_hour,
            point: None,
            curve: Vec::new(),
            unmet_reason: Some(reason),
            lower_bound: None,
            levels: Vec::new(),
            gpus_per_instance: c.gpus_per_instance,
        };
        if let Some(why) = &c.unfit {
            self.observer.note(&format!(
                "\ncandidate {} of {total}: {} does not fit: {why}",
                i + 1,
                c.name
            ));
            let reason = format!("{NOT_MEASURED}the model does not fit ({why})");
            return Ok(Some((unmeasured(reason), None, None, false)));
        }
        self.observer.note(&format!(
            "\ncandidate {} of {total}: {} ({})",
            i + 1,
            c.name,
            if self.by_search {
                "SLA search"
            } else {
                "sweep"
            }
        ));
        let dir = c.folder();
        let Some((m, record, _)) = crate::measure::measure_candidate(
            self.source.as_ref(),
            self.observer.as_ref(),
            c,
            &self.artifact_dir.join(&dir),
            false,
            cancel,
        )
        .await?
        else {
            return Ok(None);
        };
        let candidate = Candidate {
            point: m.point,
            curve: m.curve,
            levels: m.levels,
            unmet_reason: m.reason,
            lower_bound: m.lower_bound,
            ..unmeasured(String::new())
        };
        // A candidate that could not be prepared has no run to show (its folder may hold only
        // a launch log, which its reason names).
        Ok(Some((
            candidate,
            m.ran.then_some(dir),
            record,
            m.interrupted,
        )))
    }

    /// Measures every candidate in turn (or `parallel` at a time).
    async fn gather_grid(&self, cancel: &CancelToken) -> Result<Gathered, Error> {
        let mut g = Gathered::default();
        let total = self.candidates.len();
        let parallel = self.parallel.max(1);
        let mut next = 0;
        while next < total && !g.interrupted {
            if cancel.is_cancelled() {
                g.interrupted = true;
                break;
            }
            let chunk: Vec<(usize, &CandidateSpec)> = self
                .candidates
                .iter()
                .enumerate()
                .skip(next)
                .take(parallel)
                .collect();
            next += chunk.len();
            let runs = chunk.iter().map(|(i, c)| self.one(*i, total, c, cancel));
            // Every member of the group is kept, whatever another one did: an interrupt
            // ends the recommendation after the group.
            for ((_, c), one) in chunk.iter().zip(futures_util::future::join_all(runs).await) {
                let Some((candidate, dir, record, stopped)) = one? else {
                    g.interrupted = true;
                    continue;
                };
                // a launch that failed to start is spent, but measured nothing
                g.count(record.as_ref(), dir.is_some());
                g.candidates.push(candidate);
                g.dirs.push(dir);
                g.deployments.insert(c.name.clone(), record);
                g.interrupted |= stopped;
            }
        }
        Ok(g)
    }

    /// Starts a recommendation ranked by `objective`, writing into `dir`, with each
    /// candidate's run made by `source`.
    pub fn builder(
        objective: Objective,
        dir: impl Into<PathBuf>,
        source: impl CandidateSource + 'static,
    ) -> RecommendBuilder {
        RecommendBuilder(Recommend {
            objective,
            candidates: Vec::new(),
            source: Box::new(source),
            by_search: false,
            peak: None,
            currency: "USD".into(),
            price_table: None,
            artifact_dir: dir.into(),
            observer: Arc::new(Silent),
            overwrite: false,
            log: None,
            proposals: Vec::new(),
            parallel: 1,
            strategy: Strategy::Grid,
            slas: Vec::new(),
        })
    }

    /// What the launches spent, and what the grid would have: always under the adaptive
    /// strategy (its budget's account, even when nothing was launched or every launch
    /// failed), under the grid when something was launched.
    fn spent(&self, g: &crate::strategy::Gathered) -> Option<Spent> {
        let launchable = self.candidates.iter().filter(|c| c.unfit.is_none()).count() as u32;
        let adaptive = matches!(self.strategy, Strategy::Adaptive(_));
        (adaptive || g.launches > 0).then(|| Spent {
            launches: g.launches,
            instance_hours: g.instance_hours,
            cost: g.cost,
            grid_launches: launchable,
            grid_instance_hours: match self.strategy {
                Strategy::Grid if !g.interrupted => Some(g.instance_hours),
                _ => (!g.full_hours.is_empty()).then(|| {
                    g.full_hours.iter().sum::<f64>() / g.full_hours.len() as f64
                        * f64::from(launchable)
                }),
            },
        })
    }

    /// The ranking, a line per candidate, in the run log.
    fn log_ranking(&self, recommendations: &[kneepoint_planner::Recommendation]) {
        if let Some(log) = &self.log {
            for r in recommendations {
                log.info(&format!(
                    "{} {}: {}",
                    r.rank.map_or("unranked".into(), |n| format!("#{n}")),
                    r.name,
                    r.explanation
                ));
            }
        }
    }

    /// Measures every candidate in turn, ranks them, and writes `recommendations.json`, plots
    /// and `report.html`. Stops early (keeping what was measured) when `cancel` fires.
    pub async fn run(self, cancel: &CancelToken) -> Result<RecommendReport, Error> {
        if let (
            Some(PeakPlan {
                peak: kneepoint_planner::PeakTraffic::Concurrency(_),
                ..
            }),
            true,
        ) = (self.peak, self.candidates.len() > 1)
        {
            self.observer.warning(
                "the peak is given as concurrent requests: a faster candidate holds each request for less time, so the same traffic keeps fewer of them in flight; give the peak in requests/s (peak_rps) or output tokens/s to compare candidates of different speeds",
            );
        }
        let g = match self.strategy {
            Strategy::Grid => self.gather_grid(cancel).await?,
            Strategy::Adaptive(budget) => {
                let launches = Launches {
                    specs: &self.candidates,
                    objective: self.objective,
                    peak: self.peak,
                    slas: &self.slas,
                    observer: self.observer.as_ref(),
                    source: self.source.as_ref(),
                    artifact_dir: &self.artifact_dir,
                };
                crate::adaptive::gather(&launches, budget, cancel).await?
            }
        };
        let interrupted = g.interrupted;
        let candidates = &g.candidates;
        let measured = candidates
            .iter()
            .filter(|c| {
                !c.unmet_reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with(NOT_MEASURED) || r.starts_with(SERVER_EXITED))
            })
            .count();
        let recommendations = recommend(candidates, self.objective, self.peak)?;
        self.log_ranking(&recommendations);
        let by_name: BTreeMap<&str, (Option<&str>, &CandidateSpec)> = candidates
            .iter()
            .zip(&g.dirs)
            .filter_map(|(c, d)| {
                let spec = self.candidates.iter().find(|s| s.name == c.name)?;
                Some((c.name.as_str(), (d.as_deref(), spec)))
            })
            .collect();
        let spent = self.spent(&g);
        let doc = Recommendations {
            schema_version: SCHEMA_VERSION,
            kneepoint_version: env!("CARGO_PKG_VERSION").to_owned(),
            complete: !interrupted,
            interrupted,
            objective: self.objective,
            mode: if self.by_search {
                "max-concurrency-under-sla".into()
            } else {
                "sweep".into()
            },
            currency: self.currency.clone(),
            price_table: self.price_table.clone(),
            peak: self.peak,
            hours_per_month: kneepoint_planner::HOURS_PER_MONTH,
            candidates: recommendations
                .iter()
                .map(|r| {
                    let (dir, spec) = by_name
                        .get(r.name.as_str())
                        .map_or((None, None), |(d, s)| (*d, Some(*s)));
                    RankedCandidate {
                        recommendation: r.clone(),
                        artifact_dir: dir.map(str::to_owned),
                        max_concurrency: spec.and_then(|s| s.max_concurrency),
                        prediction: spec.and_then(|s| s.prediction.clone()),
                        tensor_parallel: spec.and_then(|s| s.tensor_parallel),
                        replicas_per_instance: spec.and_then(|s| s.replicas_per_instance),
                        deployment: g.deployments.get(&r.name).cloned().flatten(),
                        trials: g.trials.get(&r.name).cloned().unwrap_or_default(),
                    }
                })
                .collect(),
            not_measured: self
                .candidates
                .iter()
                .filter(|c| !candidates.iter().any(|m| m.name == c.name))
                .map(|c| c.name.clone())
                .collect(),
            proposals: self.proposals.clone(),
            pareto: kneepoint_planner::candidates_front(candidates),
            strategy: match self.strategy {
                Strategy::Grid => "grid".into(),
                Strategy::Adaptive(_) => "adaptive".into(),
            },
            search_stop: g.stop.clone(),
            spent,
        };
        write_document(&self.artifact_dir.join(folder::RECOMMENDATIONS), &doc)?;
        let Recommendations {
            candidates: ranked,
            strategy,
            search_stop,
            spent,
            ..
        } = doc;
        crate::render::render_quietly(&self.artifact_dir, self.observer.as_ref());
        Ok(RecommendReport {
            objective: self.objective,
            recommendations,
            candidates: ranked,
            currency: self.currency,
            artifact_dir: self.artifact_dir,
            interrupted,
            proposals: self.proposals,
            measured,
            strategy,
            search_stop,
            spent,
        })
    }
}
