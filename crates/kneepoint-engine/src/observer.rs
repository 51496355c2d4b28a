//! How the engine tells its caller what is happening: the engine prints nothing; the CLI draws
//! progress bars and lines from these calls, a service may log them or do nothing.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use kneepoint_core::RequestRecord;
use kneepoint_planner::ProbeRecord;
use kneepoint_scrape::LiveSample;

/// Receives the engine's progress. Every method has an empty default; calls come from the
/// engine's tasks (one level at a time, records from any worker), so they must be quick.
pub trait Observer: Send + Sync {
    /// A level (or one run of it) starts: `label` names it ("concurrency 64", "probe 3 @ 48",
    /// "concurrency 64 run 2/5"); `total` is its measured request count (0: timed, unknown).
    fn level_started(&self, label: &str, total: u64) {
        let _ = (label, total);
    }
    /// Right after [`Observer::level_started`]: the level's count of measured requests in
    /// flight (read it with `load(Relaxed)`), for a live view.
    fn requests_in_flight(&self, in_flight: Arc<AtomicU64>) {
        let _ = in_flight;
    }
    /// The server's state after a scrape during the level (when its metrics are scraped).
    fn server_sample(&self, sample: &LiveSample) {
        let _ = sample;
    }
    /// A measured request finished (success or failure).
    fn request_finished(&self, record: &RequestRecord) {
        let _ = record;
    }
    /// The level that started last is done.
    fn level_finished(&self, label: &str) {
        let _ = label;
    }
    /// The search judged a probe.
    fn probe_decided(&self, probe: &ProbeRecord) {
        let _ = probe;
    }
    /// A step worth a line: the target came up, a level stopped early, runs converged, a
    /// recommendation candidate starts.
    fn note(&self, message: &str) {
        let _ = message;
    }
    /// Something went wrong that did not stop the run (a sink failed, the report was not drawn).
    fn warning(&self, message: &str) {
        let _ = message;
    }
}

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Observer for Silent {}
