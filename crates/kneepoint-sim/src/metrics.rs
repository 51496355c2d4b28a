//! The simulator's Prometheus page: its engine state under vLLM's v1 names (`GET /metrics`),
//! and the log of that state over time, the truth a scrape is checked against.

use std::collections::VecDeque;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The engine's load at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadSample {
    /// When the state began, Unix ns.
    pub unix_ns: u64,
    /// Sequences running.
    pub running: u32,
    /// Sequences waiting.
    pub waiting: u32,
    /// KV-cache tokens reserved / capacity.
    pub kv_usage: f64,
}

const TTFT_BUCKETS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const ITL_BUCKETS: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
const LATENCY_BUCKETS: [f64; 21] = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

#[derive(Debug, Clone)]
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, seconds: f64) {
        if let Some(i) = self.bounds.iter().position(|b| seconds <= *b) {
            self.counts[i] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cumulative += c;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b:?}\"}} {cumulative}.0");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels},le=\"+Inf\"}} {}.0",
            self.count
        );
        let _ = writeln!(out, "{name}_count{{{labels}}} {}.0", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
    }
}

/// What `/metrics` shows, updated by the engine thread.
#[derive(Debug)]
pub(crate) struct EngineMetrics {
    now: LoadSample,
    /// Each engine's own (running, waiting, KV usage): the page and the history show their
    /// sums (KV usage: their mean), as one server of several data-parallel engines.
    engines: Vec<(usize, usize, f64)>,
    history: VecDeque<LoadSample>,
    prompt_tokens: u64,
    generation_tokens: u64,
    finished: u64,
    prefix_cache_resets: u64,
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    queue: Histogram,
}

/// States kept in the history (about 45 min of 5 ms steps).
const HISTORY: usize = 1 << 19;

impl EngineMetrics {
    pub(crate) fn new(engines: usize) -> Self {
        EngineMetrics {
            engines: vec![(0, 0, 0.0); engines.max(1)],
            now: LoadSample {
                unix_ns: 0,
                running: 0,
                waiting: 0,
                kv_usage: 0.0,
            },
            history: VecDeque::new(),
            prompt_tokens: 0,
            generation_tokens: 0,
            finished: 0,
            prefix_cache_resets: 0,
            ttft: Histogram::new(&TTFT_BUCKETS),
            itl: Histogram::new(&ITL_BUCKETS),
            e2e: Histogram::new(&LATENCY_BUCKETS),
            queue: Histogram::new(&LATENCY_BUCKETS),
        }
    }

    /// Records engine `engine`'s load from `unix_ns` on (a change of the server's only).
    pub(crate) fn load(
        &mut self,
        engine: usize,
        unix_ns: u64,
        running: usize,
        waiting: usize,
        kv_usage: f64,
    ) {
        if let Some(e) = self.engines.get_mut(engine) {
            *e = (running, waiting, kv_usage);
        }
        let n = self.engines.len().max(1);
        let s = LoadSample {
            unix_ns,
            running: self.engines.iter().map(|e| e.0).sum::<usize>() as u32,
            waiting: self.engines.iter().map(|e| e.1).sum::<usize>() as u32,
            kv_usage: self.engines.iter().map(|e| e.2).sum::<f64>() / n as f64,
        };
        if (s.running, s.waiting, s.kv_usage)
            == (self.now.running, self.now.waiting, self.now.kv_usage)
        {
            return;
        }
        self.now = s;
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(s);
    }

    pub(crate) fn admitted(&mut self, queued_s: f64) {
        self.queue.observe(queued_s);
    }

    pub(crate) fn first_token(&mut self, prompt_tokens: u32, ttft_s: f64) {
        self.prompt_tokens += u64::from(prompt_tokens);
        self.ttft.observe(ttft_s);
    }

    pub(crate) fn token(&mut self, gap_s: Option<f64>) {
        self.generation_tokens += 1;
        if let Some(g) = gap_s {
            self.itl.observe(g);
        }
    }

    pub(crate) fn finished(&mut self, e2e_s: f64) {
        self.finished += 1;
        self.e2e.observe(e2e_s);
    }

    pub(crate) fn history(&self) -> Vec<LoadSample> {
        self.history.iter().copied().collect()
    }

    /// Counts a `POST /reset_prefix_cache`.
    pub(crate) fn prefix_cache_reset(&mut self) {
        self.prefix_cache_resets += 1;
    }

    /// The page, in the Prometheus text format vLLM's server writes.
    pub(crate) fn render(&self, model: &str) -> String {
        let model = model.replace('\\', "\\\\").replace('"', "\\\"");
        let labels = format!("engine=\"0\",model_name=\"{model}\"");
        let mut out = String::with_capacity(8192);
        let gauge = |out: &mut String, name: &str, help: &str, v: f64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{labels}}} {v:?}"
            );
        };
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name}_total {help}\n# TYPE {name}_total counter\n{name}_total{{{labels}}} {v}.0"
            );
        };
        let s = &self.now;
        gauge(
            &mut out,
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            f64::from(s.running),
        );
        gauge(
            &mut out,
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            f64::from(s.waiting),
        );
        gauge(
            &mut out,
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            s.kv_usage,
        );
        counter(
            &mut out,
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            0,
        );
        counter(
            &mut out,
            "vllm:prompt_tokens",
            "Number of prefill tokens processed.",
            self.prompt_tokens,
        );
        counter(
            &mut out,
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            self.generation_tokens,
        );
        counter(
            &mut out,
            "vllm:request_success",
            "Count of successfully processed requests.",
            self.finished,
        );
        counter(
            &mut out,
            "kneepoint_sim:prefix_cache_resets",
            "POST /reset_prefix_cache calls (the simulator has no prefix cache to empty).",
            self.prefix_cache_resets,
        );
        self.ttft.render(
            &mut out,
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            &labels,
        );
        self.itl.render(
            &mut out,
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            &labels,
        );
        self.e2e.render(
            &mut out,
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            &labels,
        );
        self.queue.render(
            &mut out,
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            &labels,
        );
        out
    }
}
