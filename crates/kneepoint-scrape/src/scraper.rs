//! The scraping task: every endpoint polled on its own task at the interval, a baseline
//! before the level's requests and a final scrape after them, never on the request path.
//!
//! A missing, slow or malformed endpoint costs one warning: an endpoint that has never
//! answered is dropped for the rest of the run at its first failure (each scrape is bounded
//! by the timeout, so the baseline waits at most that long); one that answered before and then
//! fails is kept, its failures counted, with a warning the first time.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kneepoint_core::{redact_url, Fetch, Fetched};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::summary::LiveSample;
use crate::text::{le_label, parse, Exposition, Value as SeriesValue};
use crate::timeline::Timeline;
use crate::Error;

/// What to scrape, and how often.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ScrapeSettings {
    /// Prometheus endpoints (a server's `/metrics`, a DCGM exporter's).
    pub endpoints: Vec<String>,
    /// Time between scrapes (default 1 s).
    pub interval: Duration,
    /// The longest one scrape may take (default 2 s).
    pub timeout: Duration,
    /// What fetches the pages: `kneepoint_transport::Fetcher` reaches them with the
    /// transports' client, TLS options and proxies.
    pub fetcher: Arc<dyn Fetch>,
}

impl ScrapeSettings {
    /// `endpoints` every second, their pages brought by `fetcher`.
    pub fn new(endpoints: Vec<String>, fetcher: Arc<dyn Fetch>) -> Self {
        ScrapeSettings {
            endpoints,
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(2),
            fetcher,
        }
    }

    /// Sets the interval (builder style).
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Sets the per-scrape timeout (builder style).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// The wait before the final scrape.
const SETTLE: Duration = Duration::from_millis(200);

/// The largest metrics page read (vLLM's is ~60 kB; a runaway page is cut off and fails).
const MAX_PAGE_BYTES: usize = 8 << 20;

#[derive(Debug, Clone)]
struct Endpoint {
    /// What is shown and exported: the URL without credentials or query.
    url: String,
    uri: http::Uri,
    /// Answered at least once.
    worked: bool,
    /// Dropped for the rest of the run.
    dropped: bool,
    /// A failure after success was reported.
    warned: bool,
}

/// Scrapes the endpoints of a run, level by level.
#[derive(Debug)]
pub struct Scraper {
    settings: ScrapeSettings,
    fetcher: Arc<dyn Fetch>,
    endpoints: Vec<Endpoint>,
}

/// One level's scraping, running. Dropping it stops the task (no final scrape).
#[derive(Debug)]
pub struct Session {
    stop: Option<oneshot::Sender<()>>,
    marks: mpsc::UnboundedSender<oneshot::Sender<()>>,
    task: Option<JoinHandle<State>>,
    timeout: Duration,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Asks a running session for a scrape now (see [`Session::marker`]).
#[derive(Debug, Clone)]
pub struct Marker {
    marks: mpsc::UnboundedSender<oneshot::Sender<()>>,
    timeout: Duration,
}

impl Marker {
    /// Takes a scrape now and waits for it (at most the scrape timeout, and a little more
    /// for a round already under way).
    pub async fn mark(&self) {
        let (tx, rx) = oneshot::channel();
        if self.marks.send(tx).is_ok() {
            let _ = tokio::time::timeout(2 * self.timeout + Duration::from_millis(100), rx).await;
        }
    }
}

impl Session {
    /// A handle that takes a scrape on demand: given to the runner as its after-warm-up hook,
    /// it separates the warm-up from the measured phase in every counter and histogram.
    pub fn marker(&self) -> Marker {
        Marker {
            marks: self.marks.clone(),
            timeout: self.timeout,
        }
    }
}

/// What a finished session gathered.
#[derive(Debug)]
#[non_exhaustive]
pub struct Gathered {
    /// One timeline per endpoint still scraped.
    pub timelines: Vec<Timeline>,
    /// Problems to show the user (each at most once a run).
    pub warnings: Vec<String>,
}

impl Scraper {
    /// Checks the URLs and makes the client. `http://host:port` alone means its `/metrics`;
    /// the same endpoint given twice is scraped once.
    pub fn new(settings: ScrapeSettings) -> Result<Scraper, Error> {
        if settings.interval < Duration::from_millis(10) {
            return Err(Error::Invalid {
                reason: format!(
                    "the scrape interval must be at least 10 ms, not {:?}",
                    settings.interval
                ),
            });
        }
        let mut endpoints: Vec<Endpoint> = Vec::new();
        for url in &settings.endpoints {
            let full = metrics_url(url);
            let shown = redact_url(&full);
            let invalid = |reason: String| Error::InvalidUrl {
                url: shown.clone(),
                reason,
            };
            let uri: http::Uri = full.parse().map_err(|e| invalid(format!("{e}")))?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(invalid("expected http(s)://host[:port][/path]".into()));
            }
            if endpoints.iter().any(|e| e.uri == uri) {
                continue;
            }
            endpoints.push(Endpoint {
                url: shown,
                uri,
                worked: false,
                dropped: false,
                warned: false,
            });
        }
        let fetcher = settings.fetcher.clone();
        Ok(Scraper {
            settings,
            fetcher,
            endpoints,
        })
    }

    /// True when some endpoint is still scraped.
    pub fn active(&self) -> bool {
        self.endpoints.iter().any(|e| !e.dropped)
    }

    /// Takes the baseline scrape (bounded by the timeout), then scrapes at the interval on
    /// its own task until [`Scraper::finish`]; every scrape is appended to `jsonl`, and
    /// `on_sample` (if any) sees the server's state after each round.
    pub async fn start(&mut self, jsonl: &Path, on_sample: Option<OnSample>) -> Session {
        let (stop_tx, stop_rx) = oneshot::channel();
        let (ready_tx, ready_rx) = oneshot::channel();
        let (marks_tx, marks_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(scrape_loop(
            self.fetcher.clone(),
            self.settings.clone(),
            self.endpoints.clone(),
            (jsonl.to_path_buf(), on_sample),
            ready_tx,
            (stop_rx, marks_rx),
        ));
        // The baseline round ends within the timeout; a little more for the task to start.
        let _ = tokio::time::timeout(self.settings.timeout + Duration::from_millis(500), ready_rx)
            .await;
        Session {
            stop: Some(stop_tx),
            marks: marks_tx,
            task: Some(task),
            timeout: self.settings.timeout,
        }
    }

    /// Takes the final scrape and stops the session.
    pub async fn finish(&mut self, mut session: Session) -> Gathered {
        if let Some(stop) = session.stop.take() {
            let _ = stop.send(());
        }
        let Some(task) = session.task.take() else {
            return Gathered {
                timelines: Vec::new(),
                warnings: Vec::new(),
            };
        };
        match task.await {
            Ok(state) => {
                // Endpoints that gave nothing this level (dropped before or at its first
                // scrape) have no timeline to summarise.
                let timelines = state
                    .timelines
                    .into_iter()
                    .filter(|t| t.fetches > 0 || t.failures > 0)
                    .collect();
                self.endpoints = state.endpoints;
                Gathered {
                    timelines,
                    warnings: state.warnings,
                }
            }
            Err(e) => Gathered {
                timelines: Vec::new(),
                warnings: vec![format!("server metrics: the scraping task failed: {e}")],
            },
        }
    }
}

/// `http://host:port[?query]` → `http://host:port/metrics[?query]`; a URL with a path is kept.
fn metrics_url(url: &str) -> String {
    let trimmed = url.trim();
    let (base, query) = trimmed.split_at(trimmed.find('?').unwrap_or(trimmed.len()));
    let after_scheme = base.split_once("://").map_or(base, |(_, r)| r);
    if after_scheme.contains('/') {
        trimmed.to_owned()
    } else {
        format!("{base}/metrics{query}")
    }
}

/// The outcome of one scrape of one endpoint.
fn read(fetched: Result<Fetched, String>) -> Result<(Fetched, Exposition), String> {
    let f = fetched?;
    if f.status != 200 {
        return Err(format!("HTTP {}", f.status));
    }
    let text = String::from_utf8_lossy(&f.body);
    let e = parse(&text);
    if e.families.is_empty() {
        return Err(match &e.first_problem {
            Some(p) => format!("not Prometheus text ({p})"),
            None => "no metrics in the answer".to_owned(),
        });
    }
    Ok((f, e))
}

/// Receives the server's state after every scrape round (quickly: it runs on the scraper's
/// blocking thread).
pub type OnSample = Arc<dyn Fn(&LiveSample) + Send + Sync>;

/// What the scraping task keeps between rounds.
struct State {
    endpoints: Vec<Endpoint>,
    timelines: Vec<Timeline>,
    warnings: Vec<String>,
    jsonl: Option<(PathBuf, std::io::BufWriter<std::fs::File>)>,
    round: u32,
    on_sample: Option<OnSample>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("endpoints", &self.endpoints)
            .field("round", &self.round)
            .finish_non_exhaustive()
    }
}

impl State {
    /// Takes in one round's answers: parsing, the timelines and the jsonl file (blocking
    /// work, run off the runtime's workers that drive the load).
    fn absorb(&mut self, answers: Vec<(usize, Result<Fetched, String>)>) {
        for (i, r) in answers {
            let Some(ep) = self.endpoints.get_mut(i) else {
                continue;
            };
            // One timeline per endpoint, by position (two endpoints may look alike once
            // their URLs are redacted).
            let Some(tl) = self.timelines.get_mut(i) else {
                continue;
            };
            match read(r) {
                Ok((f, e)) => {
                    ep.worked = true;
                    let latency = f.done_unix_ns.saturating_sub(f.sent_unix_ns);
                    tl.add(f.first_byte_unix_ns, self.round, latency, &e);
                    if let Some((path, w)) = &mut self.jsonl {
                        let line = jsonl_line(&ep.url, &f, &e);
                        let written = serde_json::to_writer(&mut *w, &line)
                            .map_err(std::io::Error::from)
                            .and_then(|()| w.write_all(b"\n"));
                        if let Err(e) = written {
                            self.warnings.push(format!(
                                "server metrics: cannot write {}: {e}; the scrapes are still summarised",
                                path.display()
                            ));
                            self.jsonl = None;
                        }
                    }
                }
                Err(why) if !ep.worked => {
                    ep.dropped = true;
                    self.warnings.push(format!(
                        "server metrics: {}: {why}; not scraped for the rest of the run",
                        ep.url
                    ));
                }
                Err(why) => {
                    tl.failed();
                    if !ep.warned {
                        ep.warned = true;
                        self.warnings.push(format!(
                            "server metrics: a scrape of {} failed ({why}); the server view may have gaps (failures are counted per level)",
                            ep.url
                        ));
                    }
                }
            }
        }
        self.round += 1;
        if let Some(f) = &self.on_sample {
            f(&LiveSample::of(&self.timelines));
        }
    }
}

/// One round: every live endpoint fetched at once on the runtime (I/O only), the answers
/// absorbed on the blocking pool. `None` if that work panicked (the state is then lost).
async fn round(fetcher: &dyn Fetch, timeout: Duration, mut state: State) -> Option<State> {
    let live: Vec<(usize, String)> = state
        .endpoints
        .iter()
        .enumerate()
        .filter(|(_, e)| !e.dropped)
        .map(|(i, e)| (i, e.uri.to_string()))
        .collect();
    let fetches = live
        .iter()
        .map(|(i, uri)| async move { (*i, fetcher.get(uri, timeout, MAX_PAGE_BYTES).await) });
    let answers = futures_util::future::join_all(fetches).await;
    tokio::task::spawn_blocking(move || {
        state.absorb(answers);
        state
    })
    .await
    .ok()
}

async fn scrape_loop(
    fetcher: Arc<dyn Fetch>,
    settings: ScrapeSettings,
    endpoints: Vec<Endpoint>,
    (jsonl, on_sample): (PathBuf, Option<OnSample>),
    ready: oneshot::Sender<()>,
    (mut stop, mut marks): (
        oneshot::Receiver<()>,
        mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    ),
) -> State {
    let mut warnings = Vec::new();
    let writer = match std::fs::File::create(&jsonl) {
        Ok(f) => Some((jsonl, std::io::BufWriter::new(f))),
        Err(e) => {
            warnings.push(format!(
                "server metrics: cannot create {} ({e}); the scrapes are still summarised",
                jsonl.display()
            ));
            None
        }
    };
    let timelines = endpoints.iter().map(|e| Timeline::new(&e.url)).collect();
    let lost = |endpoints: Vec<Endpoint>| State {
        endpoints,
        timelines: Vec::new(),
        warnings: vec![
            "server metrics: the scraping task failed; this level has no server view".into(),
        ],
        jsonl: None,
        round: 0,
        on_sample: None,
    };
    let first = State {
        endpoints: endpoints.clone(),
        timelines,
        warnings,
        jsonl: writer,
        round: 0,
        on_sample,
    };
    let t = settings.timeout;
    let Some(mut state) = round(fetcher.as_ref(), t, first).await else {
        return lost(endpoints);
    };
    let _ = ready.send(());
    let mut ticks = tokio::time::interval(settings.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await; // the first tick is immediate: the baseline was it
    loop {
        let mut reply = None;
        tokio::select! {
            _ = ticks.tick() => {}
            Some(r) = marks.recv() => reply = Some(r),
            _ = &mut stop => break,
        }
        let Some(next) = round(fetcher.as_ref(), t, state).await else {
            return lost(endpoints);
        };
        state = next;
        if let Some(r) = reply {
            let _ = r.send(());
        }
    }
    // The final scrape, after the level's last request, once the server has had time to
    // publish its last requests' counters (vLLM: ~15 ms after the response ends).
    tokio::time::sleep(SETTLE).await;
    let Some(mut state) = round(fetcher.as_ref(), t, state).await else {
        return lost(endpoints);
    };
    if let Some((path, mut w)) = state.jsonl.take() {
        if w.flush().is_err() {
            state
                .warnings
                .push(format!("server metrics: cannot write {}", path.display()));
        }
    }
    state
}

/// One line of `server_metrics_export.jsonl`, AIPerf's record shape: the raw values of one
/// scrape by family (a counter's name without `_total`).
fn jsonl_line(url: &str, f: &Fetched, e: &Exposition) -> Value {
    let mut metrics = Map::new();
    for fam in &e.families {
        let samples: Vec<Value> = fam
            .series
            .iter()
            .map(|s| {
                let mut v = Map::new();
                if !s.labels.is_empty() {
                    let labels: Map<String, Value> = s
                        .labels
                        .iter()
                        .map(|(k, x)| (k.clone(), Value::String(x.clone())))
                        .collect();
                    v.insert("labels".into(), Value::Object(labels));
                }
                match &s.value {
                    SeriesValue::Number(x) => {
                        v.insert("value".into(), json!(x));
                    }
                    SeriesValue::Histogram {
                        buckets,
                        sum,
                        count,
                    } => {
                        let b: Map<String, Value> = buckets
                            .iter()
                            .map(|(le, c)| (le_label(*le), json!(c)))
                            .collect();
                        v.insert("buckets".into(), Value::Object(b));
                        v.insert("sum".into(), json!(sum));
                        v.insert("count".into(), json!(count));
                    }
                    SeriesValue::Summary {
                        quantiles,
                        sum,
                        count,
                    } => {
                        let q: Map<String, Value> = quantiles
                            .iter()
                            .map(|(q, x)| (format!("{q}"), json!(x)))
                            .collect();
                        v.insert("quantiles".into(), Value::Object(q));
                        v.insert("sum".into(), json!(sum));
                        v.insert("count".into(), json!(count));
                    }
                }
                Value::Object(v)
            })
            .collect();
        metrics.insert(fam.name.clone(), Value::Array(samples));
    }
    json!({
        "endpoint_url": url,
        "timestamp_ns": f.first_byte_unix_ns,
        "endpoint_latency_ns": f.done_unix_ns.saturating_sub(f.sent_unix_ns),
        "metrics": metrics,
        "request_sent_ns": f.sent_unix_ns,
        "first_byte_ns": f.first_byte_unix_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fetcher whose every page is refused.
    #[derive(Debug)]
    struct Refused;

    #[kneepoint_core::async_trait]
    impl Fetch for Refused {
        async fn get(&self, _: &str, _: Duration, _: usize) -> Result<Fetched, String> {
            Err("refused".into())
        }
    }

    fn refused() -> Arc<dyn Fetch> {
        Arc::new(Refused)
    }

    #[test]
    fn bare_hosts_get_metrics_paths() {
        assert_eq!(metrics_url("http://h:8000"), "http://h:8000/metrics");
        assert_eq!(
            metrics_url("http://h:8000?t=1"),
            "http://h:8000/metrics?t=1"
        );
        assert_eq!(
            metrics_url("http://h:9400/metrics"),
            "http://h:9400/metrics"
        );
        assert_eq!(
            metrics_url("https://h/prometheus/metrics"),
            "https://h/prometheus/metrics"
        );
        assert!(Scraper::new(ScrapeSettings::new(vec!["ftp://x".into()], refused())).is_err());
        assert!(Scraper::new(ScrapeSettings::new(vec!["not a url".into()], refused())).is_err());
        let fast = ScrapeSettings::new(vec![], refused()).with_interval(Duration::from_millis(1));
        assert!(Scraper::new(fast).is_err());
        // One endpoint however it is written; credentials never shown.
        let settings = ScrapeSettings::new(
            vec![
                "http://u:secret@h:8000?token=abc".into(),
                "http://h:8000/metrics".into(),
                "http://h:8000".into(),
            ],
            refused(),
        );
        let s = Scraper::new(settings).unwrap();
        assert_eq!(s.endpoints.len(), 2);
        assert!(s
            .endpoints
            .iter()
            .all(|e| !e.url.contains("secret") && !e.url.contains("abc")));
        assert_eq!(s.endpoints[1].url, "http://h:8000/metrics");
        let e = Scraper::new(ScrapeSettings::new(
            vec!["ftp://u:secret@h".into()],
            refused(),
        ))
        .unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
    }
}
