//! A [`Bench`]: a transport, a workload and the level settings, ready to run levels into
//! artifact folders. Sweeps, searches and recommendations are made of a bench's levels.

use kneepoint_core::folder;
use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kneepoint_core::{ApproxTokenCounter, RequestRecord, TokenCounter, Transport};
use kneepoint_runner::{CancelToken, EarlyStop, LevelConfig, RecordObserver};
use kneepoint_workload::Workload;
use serde_json::Value;

use crate::{Error, LevelSettings, Observer, Silent};

/// A transport, a workload and the level settings: what every sweep, search and
/// recommendation candidate runs its levels with. Built by [`Bench::builder`] (or through
/// the sweep and search builders, which hold one: [`crate::BenchOptions`]).
pub struct Bench {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) workload: Arc<Mutex<Box<dyn Workload>>>,
    /// Requests drawn from the workload ahead of a timed level's senders but not sent: the
    /// next level sends them first, so that every request drawn is sent, in order, and a seed
    /// gives the same prompts to the same levels.
    pub(crate) pending: std::collections::VecDeque<kneepoint_core::Request>,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) settings: LevelSettings,
    pub(crate) description: Value,
    pub(crate) observer: Arc<dyn Observer>,
    /// The run log (`logs/kneepoint.log`); the observer writes to it too.
    pub(crate) log: Arc<crate::RunLog>,
    pub(crate) artifact_dir: PathBuf,
    /// Open loop: the rate of the levels run next (requests/s).
    pub(crate) rate: Option<f64>,
    /// Levels run so far (varies the arrival schedule's seed).
    pub(crate) levels_run: u64,
    /// Trace replay: the trace's send times (ms) in record order, and the next record.
    pub(crate) replay: Option<(Vec<u64>, usize)>,
    /// The server's own metrics around each level, when asked.
    pub(crate) server: crate::server::ServerView,
    /// Empties the server's prefix cache before every run of a level, when asked.
    pub(crate) prefix_reset: Option<crate::PrefixCacheReset>,
    /// Prefix-cache resets that succeeded so far.
    pub(crate) prefix_resets: u64,
    /// The last reset's outcome (`url` and `status` or `error`), for the level's input_config.
    pub(crate) reset_outcome: Option<Value>,
    _keep: Vec<Box<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for Bench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bench")
            .field("settings", &self.settings)
            .field("artifact_dir", &self.artifact_dir)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Bench`]: its options are [`crate::BenchOptions`]'s.
pub struct BenchBuilder {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) workload: Option<Box<dyn Workload>>,
    pub(crate) counter: Option<Arc<dyn TokenCounter>>,
    pub(crate) settings: LevelSettings,
    /// Set by [`BenchBuilder::settings`].
    pub(crate) settings_given: bool,
    /// Set by [`BenchBuilder::request_count`]: wins over the settings', whatever the order.
    pub(crate) request_count: Option<u32>,
    pub(crate) description: Value,
    pub(crate) observer: Arc<dyn Observer>,
    pub(crate) artifact_dir: Option<PathBuf>,
    pub(crate) trace: Option<Vec<u64>>,
    pub(crate) keep: Vec<Box<dyn Any + Send + Sync>>,
    pub(crate) overwrite: bool,
    pub(crate) server_metrics: Option<kneepoint_scrape::ScrapeSettings>,
    pub(crate) prefix_reset: Option<crate::PrefixCacheReset>,
}

/// Prepares `dir` for a new run: refuses a folder that holds a kneepoint run (a new run would
/// mix its levels and plots with the stale ones, and `report` would render both) unless
/// `overwrite`, which removes exactly what a run writes and nothing else; then creates it.
pub(crate) fn fresh_folder(dir: &Path, overwrite: bool) -> Result<(), Error> {
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut ours: Vec<(PathBuf, bool)> = entries
            .flatten()
            .filter_map(|e| {
                let is_dir = e.file_type().ok()?.is_dir();
                let name = e.file_name().to_str()?.to_owned();
                folder::is_written_by_a_run(&name, is_dir).then(|| (e.path(), is_dir))
            })
            .collect();
        // `logs/` may hold the user's files: only our log in it is ours.
        let log = dir.join(crate::LOG_FILE);
        if log.is_file() {
            ours.push((log, false));
        }
        if !ours.is_empty() && !overwrite {
            return Err(Error::invalid(format!(
                "{} already holds a kneepoint run: choose another artifact folder, or pass --overwrite (`.overwrite(true)`) to replace it",
                dir.display()
            )));
        }
        for (path, is_dir) in ours {
            let removed = if is_dir {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.map_err(|e| Error::io("remove", &path, e))?;
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))
}

impl BenchBuilder {
    pub(crate) fn level_settings(&self) -> LevelSettings {
        let mut s = self.settings.clone();
        if let Some(n) = self.request_count {
            s.request_count = n;
        }
        s
    }

    /// The request count asked for explicitly: by [`BenchBuilder::request_count`], else by
    /// settings given with another count than the default's (settings made with
    /// `LevelSettings::default()` to set other fields say nothing of the count).
    pub(crate) fn explicit_request_count(&self) -> Option<u32> {
        let default = LevelSettings::default().request_count;
        self.request_count.or(
            (self.settings_given && self.settings.request_count != default)
                .then_some(self.settings.request_count),
        )
    }

    /// Keeps each level loaded with the default lead-in when nothing else shapes the levels
    /// (no lead-in, warm-up, duration or open loop given): the default sweep's.
    pub(crate) fn default_lead_in(&mut self) {
        let s = &mut self.settings;
        if s.lead_in.is_none()
            && s.warmup_requests == 0
            && s.duration.is_none()
            && s.open_loop.is_none()
        {
            s.lead_in = Some(crate::DEFAULT_LEAD_IN);
        }
    }

    /// The request count [`BenchBuilder::request_count`] set, if any.
    pub(crate) fn request_count_called(&self) -> Option<u32> {
        self.request_count
    }

    /// Measured requests per level.
    pub fn request_count(mut self, n: u32) -> Self {
        self.request_count = Some(n);
        self
    }

    /// Checks the settings, creates the artifact folder and returns the bench.
    pub fn build(mut self) -> Result<Bench, Error> {
        if let Some(n) = self.request_count {
            self.settings.request_count = n;
        }
        self.settings.validate()?;
        let workload = self
            .workload
            .ok_or_else(|| Error::invalid("no workload: call .workload(...)"))?;
        let artifact_dir = self
            .artifact_dir
            .ok_or_else(|| Error::invalid("no artifact folder: call .artifacts(dir)"))?;
        let replaying = self
            .settings
            .open_loop
            .as_ref()
            .is_some_and(|o| o.replay_speedup.is_some());
        let replay = match (replaying, self.trace) {
            (true, Some(t)) if !t.is_empty() => Some((t, 0)),
            (true, _) => {
                return Err(Error::invalid(
                    "a trace replay needs the trace's send times (a trace dataset)",
                ))
            }
            (false, _) => None,
        };
        let scraper = self
            .server_metrics
            .filter(|s| !s.endpoints.is_empty())
            .map(kneepoint_scrape::Scraper::new)
            .transpose()?;
        let counter = self
            .counter
            .or_else(|| workload.token_counter())
            .unwrap_or_else(|| Arc::new(ApproxTokenCounter));
        fresh_folder(&artifact_dir, self.overwrite)?;
        let log = crate::RunLog::create(&artifact_dir)?;
        log.info(&format!("run in {}", artifact_dir.display()));
        log.settings("settings", &self.description);
        Ok(Bench {
            transport: self.transport,
            workload: Arc::new(Mutex::new(workload)),
            pending: Default::default(),
            counter,
            settings: self.settings,
            description: self.description,
            observer: crate::Logged::wrap(self.observer, log.clone()),
            log,
            artifact_dir,
            rate: None,
            levels_run: 0,
            replay,
            server: crate::server::ServerView::new(scraper),
            prefix_reset: self.prefix_reset,
            prefix_resets: 0,
            reset_outcome: None,
            _keep: self.keep,
        })
    }
}

impl Bench {
    /// Starts a bench over `transport`.
    pub fn builder(transport: Arc<dyn Transport>) -> BenchBuilder {
        BenchBuilder {
            transport,
            workload: None,
            counter: None,
            settings: LevelSettings::default(),
            settings_given: false,
            request_count: None,
            description: Value::Object(Default::default()),
            observer: Arc::new(Silent),
            artifact_dir: None,
            trace: None,
            keep: Vec::new(),
            overwrite: false,
            server_metrics: None,
            prefix_reset: None,
        }
    }

    /// The level settings.
    pub fn settings(&self) -> &LevelSettings {
        &self.settings
    }

    /// The run's description, as recorded in exports.
    pub fn description(&self) -> &Value {
        &self.description
    }

    /// The artifact folder.
    pub fn artifact_dir(&self) -> &Path {
        &self.artifact_dir
    }

    /// The transport.
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    /// Open loop: run the next levels at `rate` requests/s (`None`: closed loop).
    pub(crate) fn set_rate(&mut self, rate: Option<f64>) {
        self.rate = rate;
    }

    /// The record observer handed to the runner: forwards each record to the observer.
    pub(crate) fn record_observer(&self) -> RecordObserver {
        let observer = self.observer.clone();
        Arc::new(move |r: &RequestRecord| observer.request_finished(r))
    }

    /// The runner's settings for one level.
    /// Whether closed-loop levels are kept loaded (a lead-in and fillers).
    pub(crate) fn keeps_loaded(&self) -> bool {
        let s = &self.settings;
        s.lead_in.is_some() && s.open_loop.is_none() && s.duration.is_none()
    }

    pub(crate) fn level_config(&self, concurrency: u32, cancel: &CancelToken) -> LevelConfig {
        let s = &self.settings;
        let mut config = LevelConfig::new(concurrency);
        config.deadlines = s.deadlines;
        config.require_finish_reason = s.require_finish_reason;
        config.retry = s.retry;
        config.trust_server_usage = s.trust_server_usage;
        config.cancel = cancel.clone();
        config.token_counter = self.counter.clone();
        config.ramp_up = s.ramp_up;
        config.keep_loaded = self.keeps_loaded();
        config.keep_outputs = s.export_outputs;
        // outputs.json lists every answer: a level that exports them keeps its records.
        config.keep_records = (!s.export_outputs).then_some(s.records_in_memory);
        // One batch per wave of a closed loop; an open loop has no waves.
        config.early_stop = s.early_stop.map(|e| EarlyStop {
            batch: if concurrency > 0 {
                concurrency as usize
            } else {
                16
            },
            ..e
        });
        config
    }
}
