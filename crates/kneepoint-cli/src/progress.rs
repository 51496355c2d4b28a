//! The engine's progress on stderr: on a terminal, a live panel per level (a bar, then requests
//! done and in flight, throughput, TTFT and ITL percentiles so far, errors, and the server's
//! running / waiting / KV usage from the scrape); elsewhere the same figures as plain lines
//! (every 10 s and at the end of each level). A line per probe and note, and every warning
//! (shown even with `--quiet`).
//!
//! Percentiles so far come from an HDR histogram (microseconds, 3 significant figures), so
//! each update is constant time whatever the level's length.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use kneepoint_core::RequestRecord;
use kneepoint_engine::{LiveSample, Observer};
use kneepoint_metrics::RequestMetrics;
use kneepoint_planner::ProbeRecord;

use crate::lines::probe_line;

/// How often the panel is redrawn, and a plain line printed.
const REDRAW: Duration = Duration::from_millis(100);
const PLAIN_EVERY: Duration = Duration::from_secs(10);

/// Draws progress when `show`; prints warnings always.
pub(crate) struct Progress {
    show: bool,
    terminal: bool,
    level: Mutex<Option<Live>>,
}

/// The level running now.
struct Live {
    label: String,
    total: u64,
    /// The latest end of a measured request, ns from the measured phase's start (so that a
    /// warm-up does not dilute throughput).
    measured_ns: u64,
    /// On a terminal: the bar and the panel line under it.
    bars: Option<(ProgressBar, ProgressBar)>,
    in_flight: Option<Arc<AtomicU64>>,
    done: u64,
    errors: u64,
    output_tokens: u64,
    ttft_us: Option<Histogram<u64>>,
    itl_us: Option<Histogram<u64>>,
    server: Option<LiveSample>,
    drawn: Instant,
}

fn histogram() -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).ok()
}

fn record(h: &mut Option<Histogram<u64>>, ms: Option<f64>) {
    if let (Some(h), Some(ms)) = (h.as_mut(), ms) {
        let _ = h.record(((ms * 1000.0).round() as u64).clamp(1, 3_600_000_000));
    }
}

fn quantile_ms(h: &Option<Histogram<u64>>, q: f64) -> String {
    match h {
        Some(h) if !h.is_empty() => format!("{:.1}", h.value_at_quantile(q) as f64 / 1000.0),
        _ => "-".to_owned(),
    }
}

impl Live {
    fn new(label: &str, total: u64, terminal: bool) -> Self {
        let bars = terminal.then(|| {
            let multi = MultiProgress::new();
            let bar = multi.add(bar(label, total));
            let panel = multi.add(ProgressBar::hidden());
            let style = ProgressStyle::with_template("{prefix:>22} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            panel.set_style(style);
            (bar, panel)
        });
        Live {
            label: label.to_owned(),
            total,
            measured_ns: 0,
            bars,
            in_flight: None,
            done: 0,
            errors: 0,
            output_tokens: 0,
            ttft_us: histogram(),
            itl_us: histogram(),
            server: None,
            drawn: Instant::now(),
        }
    }

    /// The figures so far, on one line.
    fn text(&self) -> String {
        let secs = (self.measured_ns as f64 / 1e9).max(1e-3);
        let total = if self.total > 0 {
            format!("/{}", self.total)
        } else {
            String::new()
        };
        let in_flight = self
            .in_flight
            .as_ref()
            .map_or("-".to_owned(), |n| n.load(Ordering::Relaxed).to_string());
        let mut t = format!(
            "done {}{total}  in flight {in_flight}  {:.0} tok/s  TTFT p50 {} p95 {} ms  ITL p95 {} ms  errors {}",
            self.done,
            self.output_tokens as f64 / secs,
            quantile_ms(&self.ttft_us, 0.5),
            quantile_ms(&self.ttft_us, 0.95),
            quantile_ms(&self.itl_us, 0.95),
            self.errors,
        );
        if let Some(s) = &self.server {
            let n = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
            let kv = s
                .kv_usage
                .map_or("-".to_owned(), |v| format!("{:.0}%", v * 100.0));
            t += &format!(
                "  | server running {} waiting {} KV {kv}",
                n(s.running),
                n(s.waiting)
            );
        }
        t
    }

    /// Redraws the panel, or prints a plain line every [`PLAIN_EVERY`].
    fn draw(&mut self, force: bool) {
        let every = if self.bars.is_some() {
            REDRAW
        } else {
            PLAIN_EVERY
        };
        if !force && self.drawn.elapsed() < every {
            return;
        }
        self.drawn = Instant::now();
        match &self.bars {
            Some((_, panel)) => panel.set_message(self.text()),
            None => say(format_args!("{}: {}", self.label, self.text())),
        }
    }
}

impl Progress {
    pub(crate) fn new(show: bool) -> Self {
        Progress {
            show,
            terminal: std::io::stderr().is_terminal(),
            level: Mutex::new(None),
        }
    }

    fn with_level(&self, f: impl FnOnce(&mut Live)) {
        if let Ok(mut level) = self.level.lock() {
            if let Some(l) = level.as_mut() {
                f(l);
            }
        }
    }
}

/// A bar, hidden until a [`MultiProgress`] takes it (drawn before, it would leave a stale
/// first frame above the panel).
fn bar(label: &str, total: u64) -> ProgressBar {
    let bar = ProgressBar::hidden();
    bar.set_length(total);
    // A timed level has no known total: count requests and show the time.
    let template = if total == 0 {
        "{prefix:>22} {pos} requests  {elapsed_precise}"
    } else {
        "{prefix:>22} [{bar:32}] {pos}/{len} requests  {elapsed_precise} (eta {eta})"
    };
    let style = ProgressStyle::with_template(template)
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(label.to_owned());
    bar
}

impl Observer for Progress {
    fn level_started(&self, label: &str, total: u64) {
        if !self.show {
            return;
        }
        if let Ok(mut level) = self.level.lock() {
            *level = Some(Live::new(label, total, self.terminal));
        }
    }

    fn requests_in_flight(&self, in_flight: Arc<AtomicU64>) {
        self.with_level(|l| l.in_flight = Some(in_flight));
    }

    fn server_sample(&self, sample: &LiveSample) {
        // Redrawn here too: when nothing finishes (a stalled server), the server's state and
        // the requests in flight still move.
        self.with_level(|l| {
            l.server = Some(*sample);
            l.draw(false);
        });
    }

    fn request_finished(&self, r: &RequestRecord) {
        self.with_level(|l| {
            l.done += 1;
            l.measured_ns = l.measured_ns.max(r.end_ns);
            if r.is_ok() {
                let m = RequestMetrics::of(r);
                record(&mut l.ttft_us, m.ttft_ms);
                record(&mut l.itl_us, m.itl_ms);
                l.output_tokens += u64::from(r.output_tokens.unwrap_or(0));
            } else {
                l.errors += 1;
            }
            if let Some((bar, _)) = &l.bars {
                bar.inc(1);
            }
            l.draw(false);
        });
    }

    fn level_finished(&self, _label: &str) {
        if let Ok(mut level) = self.level.lock() {
            if let Some(mut l) = level.take() {
                match l.bars.take() {
                    Some((bar, panel)) => {
                        bar.finish_and_clear();
                        panel.finish_and_clear();
                    }
                    None => l.draw(true),
                }
            }
        }
    }

    fn probe_decided(&self, probe: &ProbeRecord) {
        if self.show {
            say(format_args!("{}", probe_line(probe)));
        }
    }

    fn note(&self, message: &str) {
        if self.show {
            say(format_args!("{}", kneepoint_core::secrets::scrub(message)));
        }
    }

    fn warning(&self, message: &str) {
        say(format_args!(
            "warning: {}",
            kneepoint_core::secrets::scrub(message)
        ));
    }
}

/// A line on stderr. A terminal closed under a running command (SIGHUP) fails every write:
/// that must not end the run with a panic, as `eprintln!` would, while it takes its servers
/// down.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}
