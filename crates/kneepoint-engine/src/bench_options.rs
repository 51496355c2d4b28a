//! [`BenchOptions`]: the options of the bench a builder holds (workload, settings, folder,
//! observer...), written once. [`BenchBuilder`] takes them itself; the sweep, search and
//! length-sweep builders hold a `BenchBuilder` and hand it over by [`BenchOptions::bench_mut`],
//! so every option reads the same on each of them.

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

use kneepoint_core::TokenCounter;
use kneepoint_workload::Workload;
use serde_json::Value;

use crate::{BenchBuilder, LevelSettings, Observer};

/// The options of a bench: implemented by [`BenchBuilder`] and by every builder that holds
/// one ([`crate::SweepBuilder`], [`crate::SearchBuilder`], [`crate::LengthSweepBuilder`]).
/// In the prelude of the `kneepoint` facade; elsewhere `use kneepoint_engine::BenchOptions`.
pub trait BenchOptions: Sized {
    /// The bench being built.
    fn bench_mut(&mut self) -> &mut BenchBuilder;

    /// The prompts (required).
    fn workload(mut self, workload: impl Workload + 'static) -> Self {
        self.bench_mut().workload = Some(Box::new(workload));
        self
    }

    /// The prompts, already boxed.
    fn boxed_workload(mut self, workload: Box<dyn Workload>) -> Self {
        self.bench_mut().workload = Some(workload);
        self
    }

    /// Counts output tokens when the server reports no usage (default: the workload's own
    /// tokenizer, see [`Workload::token_counter`]; a workload without one falls back to a
    /// whitespace-word estimate).
    fn token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.bench_mut().counter = Some(counter);
        self
    }

    /// How every level runs (a request count set by the builder's `request_count` wins over
    /// theirs, whatever the order of the calls).
    fn settings(mut self, settings: LevelSettings) -> Self {
        let b = self.bench_mut();
        b.settings = settings;
        b.settings_given = true;
        self
    }

    /// The run's settings as recorded in every export's `input_config` (no secrets).
    fn description(mut self, description: Value) -> Self {
        self.bench_mut().description = description;
        self
    }

    /// Receives progress (default: [`crate::Silent`]).
    fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.bench_mut().observer = observer;
        self
    }

    /// The artifact folder (required; created if missing).
    fn artifacts(mut self, dir: impl Into<PathBuf>) -> Self {
        self.bench_mut().artifact_dir = Some(dir.into());
        self
    }

    /// A trace replay's recorded send times (ms, in record order), for
    /// [`crate::OpenLoopSettings::replay`].
    fn trace(mut self, send_times_ms: Vec<u64>) -> Self {
        self.bench_mut().trace = Some(send_times_ms);
        self
    }

    /// Replace a previous run in the artifact folder (by default such a folder is refused).
    fn overwrite(mut self, yes: bool) -> Self {
        self.bench_mut().overwrite = yes;
        self
    }

    /// Scrape these Prometheus endpoints (the server's `/metrics`, a DCGM exporter) around
    /// every level: `server_metrics_export.*` per level, and the server's view in each
    /// level's summary (`None`, the default: no scraping).
    fn server_metrics(mut self, settings: Option<kneepoint_scrape::ScrapeSettings>) -> Self {
        self.bench_mut().server_metrics = settings;
        self
    }

    /// Keeps `value` alive as long as the bench (an in-process server, say).
    fn keep_alive(mut self, value: impl Any + Send + Sync) -> Self {
        self.bench_mut().keep.push(Box::new(value));
        self
    }

    /// Empty the server's prefix cache before every level (and every run of one), so that one
    /// level's prompts do not warm the next (`None`, the default: never). A failed first reset
    /// stops the run; a later one is a warning.
    fn reset_prefix_cache(mut self, reset: Option<crate::PrefixCacheReset>) -> Self {
        self.bench_mut().prefix_reset = reset;
        self
    }
}

impl BenchOptions for BenchBuilder {
    fn bench_mut(&mut self) -> &mut BenchBuilder {
        self
    }
}
