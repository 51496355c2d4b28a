//! Recommendations: measure each candidate deployment (a search when SLAs are given, a sweep
//! otherwise), cost it at its operating point, size a fleet for the peak and rank by one
//! objective. Each candidate's run lands in its own sub-folder; `recommendations.json` and
//! `report.html` sit on top.

use kneepoint_core::folder;
use kneepoint_core::{Metric, Stat};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{
    recommend, Candidate, CurvePoint, Objective, OperatingPoint, PeakPlan, Recommendation,
};
use kneepoint_report::schema::{
    write_document, PriceSource, RankedCandidate, Recommendations, SCHEMA_VERSION,
};
use kneepoint_runner::CancelToken;

use crate::{Error, Observer, Search, Silent, Sweep};

/// A deployment to measure and rank.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CandidateSpec {
    /// Its name (also its folder: `candidate_<name>`).
    pub name: String,
    /// Instance type, for the report.
    pub instance_type: String,
    /// Instances behind the endpoint measured.
    pub instance_count: u32,
    /// Price of one instance-hour.
    pub price_per_instance_hour: f64,
    /// The stage-1 bound: concurrent sequences the endpoint's engines hold at once (KV cache
    /// and scheduler). A sweep that has not saturated is extended up to it; a search's answer
    /// at its top counts as established.
    pub max_concurrency: Option<u32>,
    /// Why the model cannot run on this candidate (stage 1): it is listed, not measured.
    pub unfit: Option<String>,
    /// The first-order prediction for this candidate, shown beside the measurement.
    pub prediction: Option<kneepoint_fit::Prediction>,
}

impl CandidateSpec {
    /// A candidate of one `instance_type` instance at `price_per_instance_hour`.
    pub fn new(name: impl Into<String>, instance_type: impl Into<String>, price: f64) -> Self {
        CandidateSpec {
            name: name.into(),
            instance_type: instance_type.into(),
            instance_count: 1,
            price_per_instance_hour: price,
            max_concurrency: None,
            unfit: None,
            prediction: None,
        }
    }

    /// The stage-1 bound on concurrency (see [`CandidateSpec::max_concurrency`]).
    pub fn with_max_concurrency(mut self, bound: Option<u32>) -> Self {
        self.max_concurrency = bound;
        self
    }

    /// Marks the candidate as unable to hold the model: it is listed with `reason`, not
    /// measured.
    pub fn unfit(mut self, reason: impl Into<String>) -> Self {
        self.unfit = Some(reason.into());
        self
    }

    /// The first-order prediction to show beside the measurement.
    pub fn with_prediction(mut self, p: Option<kneepoint_fit::Prediction>) -> Self {
        self.prediction = p;
        self
    }

    /// Instances behind the endpoint.
    pub fn with_instance_count(mut self, n: u32) -> Self {
        self.instance_count = n;
        self
    }

    /// The candidate's folder under the recommendation's.
    pub fn folder(&self) -> String {
        let s: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        folder::candidate_dir(&s)
    }
}

/// How one candidate is measured.
#[derive(Debug)]
pub enum CandidateRun {
    /// A sweep; the candidate is judged at its ideal balance.
    Sweep(Sweep),
    /// A search; the candidate is judged at its highest feasible concurrency.
    Search(Search),
}

/// Makes each candidate's run when its turn comes (one target at a time: the previous one is
/// dropped first). `dir` is the candidate's folder, to give to the run's builder.
#[async_trait::async_trait]
pub trait CandidateSource: Send + Sync {
    /// The run that measures `candidate`, writing into `dir`.
    async fn prepare(
        &self,
        candidate: &CandidateSpec,
        dir: &Path,
    ) -> Result<CandidateRun, Box<dyn std::error::Error + Send + Sync>>;
}

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
        let mut seen = std::collections::BTreeSet::new();
        for c in &r.candidates {
            if c.name.trim().is_empty() {
                return Err(Error::invalid("every candidate needs a name"));
            }
            if !seen.insert(c.folder()) {
                return Err(Error::invalid(format!(
                    "two candidates share the name {:?}",
                    c.name
                )));
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
        r.observer = crate::Logged::wrap(r.observer.clone(), log.clone());
        r.log = Some(log);
        Ok(r)
    }
}

fn point(s: &LevelSummary) -> OperatingPoint {
    let st = |m: &str, q: &str| s.stat(m, q);
    OperatingPoint {
        concurrency: s.concurrency,
        output_token_throughput: s.output_token_throughput,
        request_throughput: s.request_throughput,
        ttft_p50_ms: st("time_to_first_token", "p50"),
        ttft_p99_ms: st("time_to_first_token", "p99"),
        itl_p50_ms: st("inter_token_latency", "p50"),
        itl_p99_ms: st("inter_token_latency", "p99"),
        e2e_p50_ms: st("request_latency", "p50"),
        e2e_p90_ms: st("request_latency", "p90"),
        e2e_p99_ms: st("request_latency", "p99"),
        error_rate: s.error_rate,
    }
}

fn curve(summaries: &[LevelSummary]) -> Vec<CurvePoint> {
    let mut by_c: BTreeMap<u32, f64> = BTreeMap::new();
    for s in summaries {
        if let Some(p99) = s.value(Metric::RequestLatency, Stat::P99) {
            by_c.insert(s.concurrency, p99);
        }
    }
    by_c.into_iter()
        .map(|(concurrency, e2e_p99_ms)| CurvePoint {
            concurrency,
            e2e_p99_ms,
        })
        .collect()
}

struct Measured {
    point: Option<OperatingPoint>,
    curve: Vec<CurvePoint>,
    reason: Option<String>,
    lower_bound: Option<String>,
    interrupted: bool,
}

async fn measure(
    run: CandidateRun,
    bound: Option<u32>,
    cancel: &CancelToken,
) -> Result<Measured, Error> {
    match run {
        CandidateRun::Search(s) => {
            let top = s.search_config().concurrency_max;
            let o = s.run(cancel).await?;
            let at = o.outcome.feasible_max.and_then(|c| {
                o.history
                    .iter()
                    .zip(&o.summaries)
                    .rev()
                    .find(|(r, _)| r.probe.concurrency == c && r.pass)
                    .map(|(_, s)| point(s))
            });
            Ok(Measured {
                reason: at.is_none().then(|| o.outcome.explanation.clone()),
                lower_bound: kneepoint_planner::search_lower_bound(&o.outcome, top, bound),
                point: at,
                curve: curve(&o.summaries),
                interrupted: o.interrupted,
            })
        }
        CandidateRun::Sweep(s) => {
            let o = s.run(cancel).await?;
            let at = o
                .zone
                .ideal_balance
                .and_then(|c| o.summaries.iter().find(|s| s.concurrency == c))
                .map(point);
            let highest = o.summaries.iter().map(|s| s.concurrency).max();
            Ok(Measured {
                reason: at.is_none().then(|| o.zone.summary.clone()),
                lower_bound: kneepoint_planner::sweep_lower_bound(&o.zone, highest, bound),
                point: at,
                curve: curve(&o.summaries),
                interrupted: o.interrupted,
            })
        }
    }
}

impl Recommend {
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
        })
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
        let mut candidates = Vec::new();
        let mut dirs = Vec::new();
        let mut interrupted = false;
        let total = self.candidates.len();
        for (i, c) in self.candidates.iter().enumerate() {
            if cancel.is_cancelled() {
                interrupted = true;
                break;
            }
            if let Some(why) = &c.unfit {
                self.observer.note(&format!(
                    "\ncandidate {} of {total}: {} does not fit: {why}",
                    i + 1,
                    c.name
                ));
                candidates.push(Candidate {
                    name: c.name.clone(),
                    instance_type: c.instance_type.clone(),
                    instance_count: c.instance_count,
                    price_per_instance_hour: c.price_per_instance_hour,
                    point: None,
                    curve: Vec::new(),
                    unmet_reason: Some(format!("not measured: the model does not fit ({why})")),
                    lower_bound: None,
                });
                dirs.push(None);
                continue;
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
            let run = self
                .source
                .prepare(c, &self.artifact_dir.join(&dir))
                .await
                .map_err(|source| Error::Candidate {
                    name: c.name.clone(),
                    source,
                })?;
            let m =
                measure(run, c.max_concurrency, cancel)
                    .await
                    .map_err(|e| Error::Measuring {
                        name: c.name.clone(),
                        source: Box::new(e),
                    })?;
            candidates.push(Candidate {
                name: c.name.clone(),
                instance_type: c.instance_type.clone(),
                instance_count: c.instance_count,
                price_per_instance_hour: c.price_per_instance_hour,
                point: m.point,
                curve: m.curve,
                unmet_reason: m.reason,
                lower_bound: m.lower_bound,
            });
            dirs.push(Some(dir));
            if m.interrupted {
                interrupted = true;
                break;
            }
        }
        let recommendations = recommend(&candidates, self.objective, self.peak)?;
        if let Some(log) = &self.log {
            for r in &recommendations {
                log.info(&format!(
                    "{} {}: {}",
                    r.rank.map_or("unranked".into(), |n| format!("#{n}")),
                    r.name,
                    r.explanation
                ));
            }
        }
        let by_name: BTreeMap<&str, (Option<&str>, &CandidateSpec)> = candidates
            .iter()
            .zip(&dirs)
            .zip(&self.candidates)
            .map(|((c, d), spec)| (c.name.as_str(), (d.as_deref(), spec)))
            .collect();
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
                    }
                })
                .collect(),
            not_measured: self
                .candidates
                .iter()
                .skip(candidates.len())
                .map(|c| c.name.clone())
                .collect(),
        };
        write_document(&self.artifact_dir.join(folder::RECOMMENDATIONS), &doc)?;
        let ranked = doc.candidates;
        crate::render::render_quietly(&self.artifact_dir, self.observer.as_ref());
        Ok(RecommendReport {
            objective: self.objective,
            recommendations,
            candidates: ranked,
            currency: self.currency,
            artifact_dir: self.artifact_dir,
            interrupted,
        })
    }
}
