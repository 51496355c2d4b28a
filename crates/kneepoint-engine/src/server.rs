//! Scraping the server's metrics around each level run: a baseline before the level's
//! requests, scrapes at the interval on their own task, a final one after; the level's
//! `server_metrics_export.{json,csv,jsonl}` and its [`ServerSummary`].

use kneepoint_core::folder;
use std::path::Path;
use std::sync::Arc;

use kneepoint_core::ServerSummary;
use kneepoint_metrics::LevelSummary;
use kneepoint_runner::{LevelConfig, LevelRun};
use kneepoint_scrape::{summarise, write_exports, Part, Scraper, Session, Window};

use crate::Observer;

/// The server's side of a bench: the scraper (when asked for) and the scrapes of the current
/// level's runs so far (pooled into the level's summary after several runs).
#[derive(Debug, Default)]
pub(crate) struct ServerView {
    scraper: Option<Scraper>,
    parts: Vec<Part>,
}

impl ServerView {
    /// Scrapes with `scraper` (none: the server's view stays empty).
    pub(crate) fn new(scraper: Option<Scraper>) -> Self {
        ServerView {
            scraper,
            parts: Vec::new(),
        }
    }

    /// Forgets the scrapes of earlier runs (a new level starts).
    pub(crate) fn clear(&mut self) {
        self.parts.clear();
    }

    /// Starts a level run: scraping into `dir` (a baseline now, and a scrape between the
    /// warm-up and the measured phase, so that neither counts the other; each round's state
    /// to the observer), then the observer with the level's count of requests in flight.
    pub(crate) async fn begin(
        &mut self,
        observer: &Arc<dyn Observer>,
        dir: &Path,
        label: &str,
        total: u64,
        config: &mut LevelConfig,
    ) -> Option<Session> {
        let sampled = observer.clone();
        let on_sample: kneepoint_scrape::OnSample = Arc::new(move |s| sampled.server_sample(s));
        let session = match self.scraper.as_mut().filter(|s| s.active()) {
            Some(scraper) => {
                let jsonl = dir.join(folder::SERVER_METRICS_JSONL);
                Some(scraper.start(&jsonl, Some(on_sample)).await)
            }
            None => None,
        };
        if let Some(s) = &session {
            let marker = s.marker();
            config.after_warmup = Some(Arc::new(move || {
                let marker = marker.clone();
                Box::pin(async move { marker.mark().await })
            }));
        }
        let in_flight = Arc::new(std::sync::atomic::AtomicU64::new(0));
        config.in_flight = Some(in_flight.clone());
        observer.level_started(label, total);
        observer.requests_in_flight(in_flight);
        session
    }

    /// Ends a level run: the observer, then the scraping: its summary over the run's
    /// measured window and its exports in `dir`. A failure to write them is a warning: the
    /// run's records matter more.
    pub(crate) async fn end(
        &mut self,
        observer: &dyn Observer,
        label: &str,
        session: Option<Session>,
        dir: &Path,
        run: Option<&LevelRun>,
    ) -> Option<ServerSummary> {
        observer.level_finished(label);
        let scraper = self.scraper.as_mut()?;
        let gathered = scraper.finish(session?).await;
        for w in &gathered.warnings {
            observer.warning(w);
        }
        let run = run?;
        let part = Part {
            window: Window {
                start_ns: run.start_unix_ns,
                end_ns: run.end_unix_ns,
            },
            timelines: gathered.timelines,
        };
        let parts = [part];
        let summary = summarise(&parts);
        if let Err(e) = write_exports(dir, &parts, &summary) {
            observer.warning(&format!(
                "server metrics: {}",
                crate::runlog::with_causes(&e)
            ));
        }
        let [part] = parts;
        self.parts.push(part);
        Some(summary)
    }

    /// The server summary pooled over the level's runs (their exports in `dir`).
    pub(crate) fn pooled(&mut self, observer: &dyn Observer, dir: &Path) -> Option<ServerSummary> {
        if self.parts.is_empty() {
            return None;
        }
        let parts = std::mem::take(&mut self.parts);
        let summary = summarise(&parts);
        if let Err(e) = write_exports(dir, &parts, &summary) {
            observer.warning(&format!(
                "server metrics: {}",
                crate::runlog::with_causes(&e)
            ));
        }
        Some(summary)
    }
}

/// Adds what needs the client's side too (output tokens per joule of GPU energy) and attaches
/// the server summary to the level's.
pub(crate) fn attach(summary: &mut LevelSummary, server: Option<ServerSummary>) {
    let Some(mut server) = server else {
        return;
    };
    let tokens = summary.total_output_tokens as f64;
    let joules = server.get("gpu_energy", "total").or_else(|| {
        server
            .get("gpu_power", "avg")
            .map(|w| w * summary.benchmark_duration_s)
    });
    if let Some(j) = joules.filter(|j| *j > 0.0) {
        server.set("gpu_output_tokens_per_joule", "avg", tokens / j);
    }
    summary.server = Some(server);
}
