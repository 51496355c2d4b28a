//! The flags of `kneepoint sweep`, `search` and `recommend` as clap [`Args`]: flatten them
//! into another command line to offer kneepoint's options, then resolve them with
//! [`crate::SweepSettings::resolve`] and friends.

use std::path::PathBuf;

use clap::Args;

pub use crate::endpoint_options::EndpointArgs;
pub use crate::simulator_options::SimulatorArgs;
pub use crate::sla_flags::SlaArgs;
pub use crate::workload_flags::WorkloadArgs;

/// `kneepoint sweep`.
#[derive(Debug, Clone, Default, Args)]
pub struct SweepArgs {
    /// Target, workload and output options.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Optional SLAs: levels are marked pass/fail and the SLA breaking point is reported.
    #[command(flatten, next_help_heading = "SLAs")]
    pub sla: SlaArgs,
    /// Concurrency levels, run one after another (default 64,256,1024).
    #[arg(
        long,
        help_heading = "Sweep",
        value_delimiter = ',',
        value_name = "N,N,..."
    )]
    pub concurrency: Vec<u32>,
    /// Peak traffic to size a fleet for, and the headroom (`[fleet]` in the file).
    #[command(flatten)]
    pub fleet: crate::FleetOptions,
}

/// `kneepoint search`.
#[derive(Debug, Clone, Default, Args)]
pub struct SearchArgs {
    /// Target, workload and output options.
    #[command(flatten)]
    pub common: CommonArgs,
    /// The SLAs the answer must meet (at least one).
    #[command(flatten, next_help_heading = "SLAs")]
    pub sla: SlaArgs,
    /// How the search probes and what it maximises (`[search_params]` in the file).
    #[command(flatten)]
    pub search: crate::SearchOptions,
}

/// Options shared by every command that sends load, grouped by concern (each group is its own
/// clap [`Args`], under its own heading in `--help`).
#[derive(Debug, Clone, Default, Args)]
pub struct CommonArgs {
    /// A TOML or JSON config file (SageMaker-style `sweep_params` and workload names accepted).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The endpoint and the client that reaches it: an OpenAI-compatible URL (API, model,
    /// headers, TLS, proxy, deadlines) or a SageMaker endpoint.
    #[command(flatten, next_help_heading = "Endpoint")]
    pub endpoint: EndpointArgs,
    /// The built-in simulator, started when no endpoint is given.
    #[command(flatten, next_help_heading = "Built-in simulator")]
    pub simulator: SimulatorArgs,
    /// What is sent: synthetic lengths, shared prefixes, conversations, images, pooling batches, or a dataset.
    #[command(flatten, next_help_heading = "Workload")]
    pub workload: WorkloadArgs,
    /// How each level runs: request counts, warm-up, open loop, timed levels, early stop, repeated runs, retries, shards.
    #[command(flatten, next_help_heading = "Load")]
    pub load: LoadArgs,
    /// The server's Prometheus metrics scraped during every level.
    #[command(flatten, next_help_heading = "Server metrics")]
    pub scrape: ScrapeArgs,
    /// Where results go and what is written.
    #[command(flatten, next_help_heading = "Output")]
    pub output: OutputArgs,
}

/// How each level runs: request counts, warm-up, open loop, timed levels, early stop, repeated runs, retries, shards.
#[derive(Debug, Clone, Default, Args)]
pub struct LoadArgs {
    /// Request counts per level, warm-up and lead-in (`[sweep_params]` in the file).
    #[command(flatten)]
    pub counts: crate::CountOptions,
    /// The `[load]` section's settings: open loop, timed levels, ramp, early stop, slices,
    /// goodput.
    #[command(flatten)]
    pub section: crate::LoadOptions,
    /// Empty the server's prefix cache before every level (and every run of one) so that one
    /// level does not warm the next: `POST <server>/reset_prefix_cache` (vLLM started with
    /// VLLM_SERVER_DEV_MODE=1), or the URL given (SGLang: http://host:port/flush_cache).
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "auto")]
    pub reset_prefix_cache: Option<String>,
    /// The `[runs]` section's settings: repeated runs and convergence.
    #[command(flatten)]
    pub runs: crate::RunsOptions,
    /// Run shard K of N of this sweep (0-based, as Kubernetes' completion index): each
    /// level's concurrency and request count (or request rate) are shared out, and the shard
    /// draws prompts of its own. Merge the shards' folders with `kneepoint merge`.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Start the first level at this wall-clock time (UTC, 2026-12-01T19:30:00Z, or Unix
    /// seconds), so that shards on several machines start together.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Retry requests that fail before their first token with a transient error (connect,
    /// connection lost, 429/502/503/504) up to N times; off by default (a benchmark must see
    /// errors). Retried requests keep their full latency and an `attempts` count.
    #[arg(long, value_name = "N")]
    pub retries: Option<u32>,
    /// Wait before the first retry, ms (doubled for each further one; default 500).
    #[arg(long, value_name = "MS")]
    pub retry_backoff_ms: Option<u64>,
    /// Count a response without a finish_reason as a success (for servers that never send
    /// one); by default it is an `incomplete` failure (generation cut short).
    #[arg(long)]
    pub allow_missing_finish_reason: bool,
    /// Keep the server's completion_tokens even when implausible (zero for generated text, or
    /// more than the chunks and text could hold); by default the client's count replaces it.
    #[arg(long)]
    pub trust_server_usage: bool,
}

/// The server's Prometheus metrics scraped during every level.
#[derive(Debug, Clone, Default, Args)]
pub struct ScrapeArgs {
    /// Scrape this Prometheus endpoint during every level (repeatable, e.g. one per replica).
    /// By default the target's own `/metrics` is scraped (an OpenAI-compatible URL, or the
    /// built-in simulator); a bare `http://host:port` means its `/metrics`.
    #[arg(long, value_name = "URL")]
    pub server_metrics: Vec<String>,
    /// Scrape a GPU exporter the same way (repeatable): NVIDIA's DCGM exporter, e.g.
    /// http://127.0.0.1:9400/metrics. GPU utilisation, memory, power and output tokens per
    /// joule are then reported per level.
    #[arg(long, value_name = "URL")]
    pub gpu_metrics: Vec<String>,
    /// Seconds between scrapes (default 1).
    #[arg(long, value_name = "SECONDS")]
    pub server_metrics_interval: Option<f64>,
    /// Do not scrape the target's own `/metrics` (explicit --server-metrics URLs still are).
    #[arg(long)]
    pub no_server_metrics: bool,
}

/// Where results go and what is written.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    /// Where results go (default: artifacts/sweep-YYYYMMDDTHHMMSSZ for a sweep, artifacts/search-… for a search; UTC).
    #[arg(long, value_name = "DIR")]
    pub artifact_dir: Option<PathBuf>,
    /// Replace the run already in --artifact-dir (its level folders, summaries, plots and
    /// page; nothing else is touched). Without it such a folder is refused.
    #[arg(long)]
    pub overwrite: bool,
    /// The archive of the results, and its upload.
    #[command(flatten)]
    pub publish: crate::PublishArgs,
    /// Write each level's records compressed, as profile_export.jsonl.zst (zstd): about a
    /// tenth of the bytes, for long levels. `report`, `compare` and `merge` read either.
    #[arg(long)]
    pub records_zstd: bool,
    /// Measured records a level keeps in memory (default 200000). A longer level is
    /// summarised as its records finish, in bounded memory: counts, rates, means, minima and
    /// maxima exact, percentiles within 0.1 % (histograms of 3 significant digits) unless
    /// --exact-percentiles.
    #[arg(long, value_name = "N")]
    pub records_in_memory: Option<usize>,
    /// For levels longer than --records-in-memory: make every percentile exact with a second
    /// pass over the level's profile_export.jsonl.
    #[arg(long)]
    pub exact_percentiles: bool,
    /// Requests a level lists in full in inputs.json (default 100000): past it each is
    /// written as its id and lengths, and the workload's settings and seed regenerate them.
    #[arg(long, value_name = "N")]
    pub inputs_limit: Option<usize>,
    /// Write each level's generated text to `outputs.json` (answer and reasoning per request,
    /// AIPerf's shape), for spot checks of correctness; off by default.
    #[arg(long)]
    pub export_outputs_json: bool,
    /// No progress bars.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `kneepoint recommend`.
#[derive(Debug, Clone, Default, Args)]
pub struct RecommendArgs {
    /// The config file: `[[candidates]]`, `objective`, SLAs (`[search_params]`), the workload,
    /// the levels (`[sweep_params]`, when there are no SLAs) and the peak (`[fleet]`).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The objective, strategy, price table and folder (the file's top-level keys).
    #[command(flatten)]
    pub options: crate::RecommendOptions,
    /// Replace the recommendation already in --artifact-dir. Without it such a folder is
    /// refused.
    #[arg(long)]
    pub overwrite: bool,
    /// The archive of the results, and its upload.
    #[command(flatten)]
    pub publish: crate::PublishArgs,
    /// No progress output.
    #[arg(long, short)]
    pub quiet: bool,
}
