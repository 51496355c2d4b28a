//! The max-concurrency-under-SLA search: one probe at a time, each probe a level with its own
//! folder, and `search_history.json` rewritten after every probe.

use std::sync::Arc;

use kneepoint_core::Transport;
use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{Measurement, Probe, SearchConfig};
use kneepoint_runner::{drive_search, CancelToken};
use tokio::sync::Mutex;

use crate::bench::BenchBuilder;
use crate::search_doc::{cost_of, probe_dir, write_search_history, zone_of, SearchReport};
use crate::sweep_doc::RunState;
use crate::BenchOptions;
use crate::{Bench, Error};

/// Builds a [`Search`]: the bench's methods and the search's parameters.
pub struct SearchBuilder {
    bench: BenchBuilder,
    config: Option<SearchConfig>,
    by_confidence: bool,
    error_guard: Option<f64>,
    request_count: Option<u32>,
}

/// The error rate above which a probe fails when the SLAs say nothing of errors: a server
/// that fails fast meets every latency SLA, and such a level must never be the answer.
pub const DEFAULT_ERROR_GUARD: f64 = 0.05;

impl BenchOptions for SearchBuilder {
    fn bench_mut(&mut self) -> &mut BenchBuilder {
        &mut self.bench
    }
}

impl SearchBuilder {
    /// Measured requests per probe: replaces the `request_count` of [`SearchBuilder::config`].
    pub fn request_count(mut self, n: u32) -> Self {
        self.request_count = Some(n);
        self
    }

    /// The search's parameters and SLAs (its `request_count` is each probe's, unless
    /// [`SearchBuilder::request_count`] sets it).
    pub fn config(mut self, config: SearchConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// Judges each SLA at the pessimistic end of its confidence interval across runs (needs
    /// `num_runs` ≥ 2 in the settings).
    pub fn sla_by_confidence(mut self, yes: bool) -> Self {
        self.by_confidence = yes;
        self
    }

    /// When no SLA bounds `error_rate`, adds `error_rate:avg:<=:limit` (default
    /// [`DEFAULT_ERROR_GUARD`]; `None` adds nothing). The added SLA is written in
    /// `search_history.json` with the others.
    pub fn error_guard(mut self, limit: Option<f64>) -> Self {
        self.error_guard = limit;
        self
    }

    /// Validates everything and creates the artifact folder.
    pub fn build(self) -> Result<Search, Error> {
        let mut config = self
            .config
            .ok_or_else(|| Error::invalid("a search needs its parameters: call .config(...)"))?;
        if let Some(limit) = self.error_guard {
            if !config
                .slas
                .iter()
                .any(|s| s.metric == kneepoint_planner::Metric::ErrorRate)
            {
                // Named apart from a user's `error_rate_sla`: nobody set it.
                let mut guard = kneepoint_planner::Sla::error_rate(limit)?;
                guard.name = "error_guard".into();
                config.slas.push(guard);
            }
        }
        match (self.request_count, self.bench.explicit_request_count()) {
            (Some(n), Some(m)) if n != m => {
                return Err(Error::invalid(format!(
                    "the search is asked for {n} requests per probe and its level settings for {m}: set one of them"
                )))
            }
            (Some(n), _) => config.request_count = n,
            (None, Some(m)) if m != config.request_count => {
                return Err(Error::invalid(format!(
                    "the level settings ask for {m} requests per level, the search's parameters for {} per probe: a search measures each probe with its parameters' request_count (or SearchBuilder::request_count), so set one of them",
                    config.request_count
                )))
            }
            _ => {}
        }
        config.validate()?;
        let settings = self.bench.level_settings();
        if settings.open_loop.is_some() {
            return Err(Error::invalid("the search finds the highest concurrency under the SLAs in a closed loop; open-loop rates apply to a sweep"));
        }
        if self.by_confidence && settings.runs.num_runs < 2 {
            return Err(Error::invalid(
                "judging SLAs by their confidence interval across runs needs num_runs of 2 or more",
            ));
        }
        let bench = self.bench.build()?;
        Ok(Search {
            bench,
            config,
            by_confidence: self.by_confidence,
        })
    }
}

/// A search ready to run.
#[derive(Debug)]
pub struct Search {
    bench: Bench,
    config: SearchConfig,
    by_confidence: bool,
}

/// The most probes a screening search makes.
pub const SCREEN_ITERATIONS: u32 = 4;

impl Search {
    /// The search's parameters (its range, SLAs, budget).
    pub fn search_config(&self) -> &SearchConfig {
        &self.config
    }

    /// The same search made coarse, to screen a configuration: at most
    /// [`SCREEN_ITERATIONS`] probes, a bracket within 25 %.
    pub fn screening(mut self) -> Self {
        self.config.max_iterations = self.config.max_iterations.min(SCREEN_ITERATIONS);
        self.config.precision = self.config.precision.max(0.25);
        self
    }
}

impl Search {
    /// Starts a search over `transport`.
    pub fn builder(transport: Arc<dyn Transport>) -> SearchBuilder {
        Search::on(Bench::builder(transport))
    }

    /// Starts a search on a bench already configured.
    pub fn on(bench: BenchBuilder) -> SearchBuilder {
        SearchBuilder {
            bench,
            config: None,
            by_confidence: false,
            error_guard: Some(DEFAULT_ERROR_GUARD),
            request_count: None,
        }
    }

    /// Runs probes until the planner stops, writing every artifact. When `cancel` fires, the
    /// probe in progress is written and marked partial (and not fed to the planner), and the
    /// history is marked interrupted.
    pub async fn run(self, cancel: &CancelToken) -> Result<SearchReport, Error> {
        let log = self.bench.log.clone();
        let run = self.run_probes(cancel).await;
        if let Err(e) = &run {
            log.failed(e);
        }
        run
    }

    async fn run_probes(self, cancel: &CancelToken) -> Result<SearchReport, Error> {
        let dir = self.bench.artifact_dir.clone();
        let description = self.bench.description.clone();
        let observer = self.bench.observer.clone();
        let log = self.bench.log.clone();
        let mut planner = kneepoint_planner::SearchPlanner::new(self.config.clone())?;
        let bench = Arc::new(Mutex::new(self.bench));
        let summaries = Arc::new(Mutex::new(Vec::<LevelSummary>::new()));
        let by_confidence = self.by_confidence;
        let slas = self.config.slas.clone();
        let measure = |p: Probe| {
            let (bench, summaries, dir) = (bench.clone(), summaries.clone(), dir.clone());
            let (slas, cancel) = (slas.clone(), cancel.clone());
            async move {
                let mut b = bench.lock().await;
                let label = format!("probe {} @ {}", p.iteration, p.concurrency);
                let (summary, cancelled, runs) = b
                    .run_level(
                        &dir.join(probe_dir(&p)),
                        p.concurrency,
                        p.request_count,
                        &label,
                        &cancel,
                    )
                    .await
                    .map_err(Stop::Failed)?;
                if cancelled {
                    return Err(Stop::Interrupted);
                }
                let m = match (&runs, by_confidence) {
                    (Some(r), true) => {
                        crate::runs::pessimistic(Measurement::from(&summary), &r.aggregate, &slas)
                    }
                    _ => Measurement::from(&summary),
                };
                summaries.lock().await.push(summary);
                Ok::<_, Stop>(m)
            }
        };
        let started = std::time::Instant::now();
        let max_probes = self.config.max_iterations;
        let after = |search: &kneepoint_planner::SearchPlanner| -> Result<(), Stop> {
            if let Some(r) = search.history().last() {
                observer.probe_decided(r);
            }
            // A real-time server can make each probe minutes long: say what the whole search
            // may take while there is time to change it.
            let first = started.elapsed().as_secs_f64();
            if search.history().len() == 1 && first > 60.0 {
                observer.note(&format!(
                    "probe 1 took {:.1} min; a search runs up to {max_probes} probes, so this one may take up to about {:.0} min: fewer requests per probe (request_count) or a lower search_max_iterations shorten it",
                    first / 60.0,
                    first * f64::from(max_probes) / 60.0
                ));
            }
            let done = summaries.try_lock().map(|s| s.clone()).unwrap_or_default();
            write_search_history(&dir, &description, search, &done, RunState::Running)
                .map_err(Stop::Failed)
        };
        let interrupted = match drive_search(&mut planner, measure, after).await {
            Ok(_) => false,
            Err(Stop::Interrupted) => true,
            Err(Stop::Failed(e)) => return Err(e),
        };
        let summaries = std::mem::take(&mut *summaries.lock().await);
        let state = if interrupted {
            RunState::Interrupted
        } else {
            RunState::Complete
        };
        write_search_history(&dir, &description, &planner, &summaries, state)?;
        log.info(&format!(
            "search {}: {}",
            if interrupted { "interrupted" } else { "done" },
            planner.outcome().explanation
        ));
        crate::render::render_quietly(&dir, observer.as_ref());
        Ok(SearchReport {
            history: planner.history().to_vec(),
            outcome: planner.outcome(),
            zone: zone_of(&planner, &summaries)?,
            cost: cost_of(&planner, &summaries),
            summaries,
            artifact_dir: dir,
            interrupted,
        })
    }
}

/// Why the probe loop stopped early.
enum Stop {
    Interrupted,
    Failed(Error),
}

impl From<kneepoint_planner::Error> for Stop {
    fn from(e: kneepoint_planner::Error) -> Self {
        Stop::Failed(e.into())
    }
}
