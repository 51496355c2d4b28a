//! The run log: `logs/kneepoint.log` in every artifact folder — the settings, every note,
//! warning, level start and end, probe verdict and per-level summary line, timestamped in UTC,
//! written as they happen (so a crashed or killed run keeps its log). Settings are the
//! redacted description the exports carry, so no secret reaches the log.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kneepoint_core::RequestRecord;
use kneepoint_metrics::LevelSummary;
use kneepoint_planner::ProbeRecord;
use kneepoint_scrape::LiveSample;

use crate::{Error, Observer};

/// The log's path under an artifact folder.
pub const LOG_FILE: &str = kneepoint_core::folder::LOG_FILE;

/// An open run log.
#[derive(Debug)]
pub struct RunLog {
    file: Mutex<BufWriter<File>>,
    path: PathBuf,
}

/// `error` and every cause in its chain, joined by ": ", each cause said once
/// ([`kneepoint_core::with_causes`]).
pub(crate) fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    kneepoint_core::with_causes(error)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl RunLog {
    /// Creates (or truncates) `dir/logs/kneepoint.log`.
    pub fn create(dir: &Path) -> Result<Arc<Self>, Error> {
        let path = dir.join(LOG_FILE);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, e))?;
        }
        let file = File::create(&path).map_err(|e| Error::io("create", &path, e))?;
        let log = Arc::new(RunLog {
            file: Mutex::new(BufWriter::new(file)),
            path,
        });
        log.info(&format!("kneepoint {}", env!("CARGO_PKG_VERSION")));
        Ok(log)
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, level: &str, message: &str) {
        // A message can quote a server's log or its command line.
        let message = kneepoint_core::secrets::scrub(message);
        let stamp = kneepoint_metrics::export::rfc3339(now_ns());
        let mut lines = message.trim_matches('\n').lines();
        let first = lines.next().unwrap_or("");
        let mut text = format!("{stamp} {level:<5} {first}\n");
        for l in lines {
            text.push_str("    ");
            text.push_str(l);
            text.push('\n');
        }
        // A log that cannot be written must not stop the run.
        if let Ok(mut f) = self.file.lock() {
            let _ = f.write_all(text.as_bytes());
            let _ = f.flush();
        }
    }

    /// An info line.
    pub fn info(&self, message: &str) {
        self.write("INFO", message);
    }

    /// A warning line.
    pub fn warn(&self, message: &str) {
        self.write("WARN", message);
    }

    /// The error that ended the run, with every cause in its chain (the same text the command
    /// line prints), so that the log says why the run stopped.
    pub fn failed(&self, error: &(dyn std::error::Error + 'static)) {
        self.write("ERROR", &with_causes(error));
    }

    /// The settings of the run (compact JSON).
    pub fn settings(&self, what: &str, settings: &serde_json::Value) {
        self.info(&format!("{what}: {settings}"));
    }

    /// One line for a finished level.
    pub fn level(&self, dir: &Path, s: &LevelSummary, partial: bool) {
        use kneepoint_core::{Metric, Stat};
        let ms = |m: Metric, q: Stat| s.value(m, q).map_or("-".into(), |v| format!("{v:.1}"));
        self.info(&format!(
            "level {} done{}: {} requests ({} failed, error rate {:.2} %), {:.1} output tok/s, {:.2} req/s, TTFT p50/p99 {}/{} ms, ITL p50 {} ms, e2e p50/p99 {}/{} ms -> {}",
            s.concurrency,
            if partial { " (partial)" } else { "" },
            s.request_count,
            s.error_count,
            s.error_rate * 100.0,
            s.output_token_throughput,
            s.request_throughput,
            ms(Metric::TimeToFirstToken, Stat::P50),
            ms(Metric::TimeToFirstToken, Stat::P99),
            ms(Metric::InterTokenLatency, Stat::P50),
            ms(Metric::RequestLatency, Stat::P50),
            ms(Metric::RequestLatency, Stat::P99),
            dir.display()
        ));
    }
}

/// An observer that writes what it sees to a [`RunLog`] and passes everything on.
pub struct Logged {
    inner: Arc<dyn Observer>,
    log: Arc<RunLog>,
}

impl Logged {
    /// Wraps `inner`.
    pub fn wrap(inner: Arc<dyn Observer>, log: Arc<RunLog>) -> Arc<dyn Observer> {
        Arc::new(Logged { inner, log })
    }
}

impl Observer for Logged {
    fn level_started(&self, label: &str, total: u64) {
        self.log.info(&if total > 0 {
            format!("{label}: started, {total} measured requests")
        } else {
            format!("{label}: started")
        });
        self.inner.level_started(label, total);
    }
    fn requests_in_flight(&self, in_flight: Arc<std::sync::atomic::AtomicU64>) {
        self.inner.requests_in_flight(in_flight);
    }
    fn server_sample(&self, sample: &LiveSample) {
        self.inner.server_sample(sample);
    }
    fn request_finished(&self, record: &RequestRecord) {
        self.inner.request_finished(record);
    }
    fn level_finished(&self, label: &str) {
        self.log.info(&format!("{label}: finished"));
        self.inner.level_finished(label);
    }
    fn probe_decided(&self, probe: &ProbeRecord) {
        self.log.info(&format!(
            "probe {} at concurrency {}: {} ({:.1} output tok/s){}",
            probe.probe.iteration,
            probe.probe.concurrency,
            if probe.pass { "pass" } else { "FAIL" },
            probe.throughput,
            probe
                .checks
                .iter()
                .filter(|c| !c.holds)
                .map(|c| format!("; {} broken", c.sla))
                .collect::<String>()
        ));
        self.inner.probe_decided(probe);
    }
    fn note(&self, message: &str) {
        self.log.info(message);
        self.inner.note(message);
    }
    fn warning(&self, message: &str) {
        self.log.warn(message);
        self.inner.warning(message);
    }
}
