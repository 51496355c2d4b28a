//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
pub use kneepoint_config::{CommonArgs, RecommendArgs, SearchArgs, SlaArgs, SweepArgs};

/// Right-size LLM inference endpoints by measuring them.
#[derive(Debug, Parser)]
#[command(name = "kneepoint", version, about)]
pub struct Cli {
    /// More log output (-v info, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a concurrency sweep (against the built-in simulator unless --url is given).
    Sweep(Box<SweepArgs>),
    /// Find the highest concurrency that meets every SLA (max-concurrency-under-sla).
    Search(Box<SearchArgs>),
    /// Before measuring: which instance types and tensor-parallel degrees hold a model, how
    /// many sequences their KV cache holds, and the predicted knee and cost.
    Plan(Box<crate::PlanArgs>),
    /// Measure candidate deployments and rank them by cost, latency or throughput.
    Recommend(RecommendArgs),
    /// Kubernetes: print an Indexed Job that runs a sweep as N shards (see docs/scale-out.md).
    K8s(K8sArgs),
    /// Merge the folders of a sharded sweep (--shard K/N) into one, as one process would have
    /// written it.
    Merge(MergeArgs),
    /// Archive a saved artifact folder as DIR.tar.gz, and upload it with --output-s3.
    Archive(ArchiveArgs),
    /// Re-render summaries, plots and report.html of a saved artifact folder (no requests sent).
    Report(ReportArgs),
    /// Compare two runs level by level; exits 1 on a regression beyond the tolerance.
    Compare(CompareArgs),
    /// The built-in simulated inference server.
    Sim(SimArgs),
    /// Add saved artifact folders to the results store (a run records itself as it ends;
    /// this is for folders written before, or with --no-store).
    Import(crate::store_cmd::ImportArgs),
    /// The runs in the results store, newest first, with their key figures.
    History(crate::store_cmd::HistoryArgs),
    /// A regression gate for CI pipelines: a run against a baseline (folders or stored
    /// runs); exits 1 when a figure is worse beyond --max-regression and the intervals say
    /// it is real, 2 when there is no verdict (the runs measured different things, a worse
    /// figure has no interval to judge it by, or a run could not be read).
    Check(crate::check_cmd::CheckArgs),
    /// The results store as a web page: the runs, filtered, trend plots of their key figures
    /// with intervals, and each run's report.
    Dashboard(crate::dashboard_cmd::DashboardArgs),
    /// Stop the servers an earlier kneepoint run launched and left running (it crashed or was
    /// killed): every process tagged by a kneepoint that is no longer running.
    Cleanup(CleanupArgs),
    /// Print a shell's completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Write the man pages (kneepoint.1 and one per subcommand) into a folder, or print
    /// kneepoint.1.
    Man(ManArgs),
}

/// `kneepoint completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `kneepoint man`.
#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// Write every page here (created) instead of printing kneepoint.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `kneepoint cleanup`.
#[derive(Debug, Clone, Args)]
pub struct CleanupArgs {
    /// Only list what would be stopped.
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds between SIGTERM and SIGKILL.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub grace_s: f64,
    /// Also delete the SageMaker endpoints, endpoint configurations and models kneepoint
    /// created in this region and left (tagged by a launcher of this host that is gone).
    #[arg(long, value_name = "REGION")]
    pub sagemaker_region: Option<String>,
    /// The SageMaker control plane's URL (default: AWS's for the region).
    #[arg(long, value_name = "URL", requires = "sagemaker_region")]
    pub sagemaker_api_url: Option<String>,
    /// With --sagemaker-region: whatever host launched them (every kneepoint-tagged
    /// resource whose launcher is not a live process here).
    #[arg(long, requires = "sagemaker_region")]
    pub all_hosts: bool,
}

/// `kneepoint report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The artifact folder of a sweep, a search or a recommendation.
    pub dir: PathBuf,
    /// Rebuild the summaries of a level whose records file lost records (cut short), from the
    /// records left, and mark it partial; without it such a folder is refused and left as
    /// saved.
    #[arg(long)]
    pub recompute: bool,
}

/// `kneepoint k8s`.
#[derive(Debug, Args)]
pub struct K8sArgs {
    /// What to print.
    #[command(subcommand)]
    pub command: K8sCommand,
}

/// `kneepoint k8s ...`.
#[derive(Debug, Subcommand)]
pub enum K8sCommand {
    /// An Indexed Job: one pod per shard, a shared start, results to a volume or S3.
    Job(K8sJobArgs),
}

/// `kneepoint merge`.
#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// The shards' artifact folders (one per shard, any order).
    #[arg(required = true)]
    pub shards: Vec<PathBuf>,
    /// Where the merged run goes.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Replace a run already in --out.
    #[arg(long)]
    pub overwrite: bool,
}

/// `kneepoint archive`.
#[derive(Debug, Clone, Args)]
pub struct ArchiveArgs {
    /// The artifact folder.
    pub dir: PathBuf,
    /// Where to upload the archive.
    #[command(flatten)]
    pub publish: kneepoint_config::PublishArgs,
    /// AWS profile for the upload's credentials (else AWS_PROFILE / default).
    #[arg(long, value_name = "PROFILE")]
    pub aws_profile: Option<String>,
}

/// `kneepoint compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The baseline run's artifact folder.
    pub run_a: PathBuf,
    /// The run to check against it.
    pub run_b: PathBuf,
    /// Relative changes within this fraction are not regressions.
    #[arg(long, default_value_t = 0.05, value_name = "FRACTION")]
    pub tolerance: f64,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95, value_name = "LEVEL")]
    pub confidence: f64,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub resamples: usize,
    /// Write the comparison as JSON here too.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Compare runs that measured different workloads, targets, models or simulator time
    /// scales (refused otherwise, exit 2).
    #[arg(long)]
    pub force: bool,
}

/// `kneepoint sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// What to do with the simulator.
    #[command(subcommand)]
    pub command: SimCommand,
}

/// `kneepoint sim ...`.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Serve the simulator until interrupted.
    Serve {
        /// Port on 127.0.0.1 (0 picks a free one).
        #[arg(long, default_value_t = 8000)]
        port: u16,
        /// Profile: calibrated, fast, instant (zero latency, pre-rendered bodies) or fixed
        /// (fixed TTFT and ITL per request, whatever the load).
        #[arg(long, default_value = "calibrated")]
        profile: String,
        /// Wall seconds per modelled second.
        #[arg(long)]
        time_scale: Option<f64>,
        /// Fixed-latency mode: time to first token, ms (implies --profile fixed's timing).
        #[arg(long, value_name = "MS")]
        ttft_ms: Option<f64>,
        /// Fixed-latency mode: time between tokens, ms.
        #[arg(long, value_name = "MS")]
        itl_ms: Option<f64>,
        /// Seed for output lengths and jitter.
        #[arg(long)]
        seed: Option<u64>,
        /// Check SageMaker-protocol signatures against this access key id (with the secret
        /// from --sigv4-secret-env).
        #[arg(long, value_name = "AKID")]
        sigv4_access_key_id: Option<String>,
        /// Environment variable holding the test secret access key.
        #[arg(
            long,
            value_name = "VAR",
            default_value = "KNEEPOINT_SIM_SECRET_ACCESS_KEY"
        )]
        sigv4_secret_env: String,
        /// Answer only this SageMaker endpoint name.
        #[arg(long, value_name = "NAME")]
        endpoint_name: Option<String>,
        /// Fraction of requests that get an injected fault (0..1).
        #[arg(long, value_name = "FRACTION")]
        fault_rate: Option<f64>,
        /// Which faults (comma-separated; default: every HTTP/SSE fault), as for `sweep
        /// --sim-faults`.
        #[arg(long, value_delimiter = ',', value_name = "FAULTS")]
        faults: Vec<String>,
        /// How long a `stall` fault lasts, ms.
        #[arg(long, value_name = "MS")]
        stall_ms: Option<u64>,
        /// How the simulator counts a prompt's tokens when the client does not say: `words`
        /// (a whitespace estimate that costs the simulator nothing; a kneepoint client at its
        /// --url then flags the difference under its table) or `builtin` (o200k_base, as
        /// kneepoint's default tokenizer counts, about 0.4 ms of CPU per 1k-token prompt).
        #[arg(long, default_value = "words", value_parser = ["words", "builtin"])]
        prompt_tokens: String,
        /// Relative standard deviation of each engine step (the calibrated profile has 0.03).
        #[arg(long, value_name = "SD")]
        jitter: Option<f64>,
        /// A slowly wandering slowdown, as noisy neighbours cause (see `sweep --sim-drift`).
        #[arg(long, value_name = "SD")]
        drift: Option<f64>,
        /// Engines behind the one port (vLLM's --data-parallel-size): each a copy of the
        /// engine, each request sent to the one with the fewest in flight, /metrics their
        /// sums. With --model-config, tensor parallel × this must fit the instance's GPUs.
        #[arg(long, value_name = "N", default_value_t = 1)]
        data_parallel_size: usize,
        /// Serve the predicted engine of a model on an instance (replaces --profile).
        #[command(flatten)]
        engine: SimEngineArgs,
    },
}

/// `sim serve --model-config FILE --instance TYPE ...`: one engine of that model on that
/// instance with vLLM's settings, as stage-1 sizing predicts it; refused, as vLLM refuses to
/// start, when the combination does not fit.
#[derive(Debug, Clone, Default, Args)]
pub struct SimEngineArgs {
    /// The model's Hugging Face config.json (shipped examples: crates/kneepoint-fit/configs/).
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<std::path::PathBuf>,
    /// The instance type (a name in the instance catalog).
    #[arg(long, value_name = "TYPE", requires = "model_config")]
    pub instance: Option<String>,
    /// An instance catalog (TOML or JSON) over the built-in table.
    #[arg(long, value_name = "FILE", requires = "model_config")]
    pub instance_catalog: Option<std::path::PathBuf>,
    /// The engine's settings, one group with `plan`'s and the matrix keys (all but
    /// --max-num-seqs need --model-config).
    #[command(flatten)]
    pub settings: kneepoint_config::EngineSettings,
}

/// `kneepoint k8s job`.
#[derive(Debug, Clone, Args)]
pub struct K8sJobArgs {
    /// Shards (pods), each running its share of every level.
    #[arg(long)]
    pub shards: u32,
    /// The Job's name.
    #[arg(long, default_value = "kneepoint-sweep")]
    pub name: String,
    /// Its namespace (default: kubectl's).
    #[arg(long)]
    pub namespace: Option<String>,
    /// The container image with the kneepoint binary on its PATH (`kneepoint:latest` is what
    /// packaging/container/Containerfile and scripts/image/image.py build: docs/container.md).
    #[arg(long, default_value = "kneepoint:latest")]
    pub image: String,
    /// A PersistentVolumeClaim (ReadWriteMany) for the results: shard K writes
    /// `/results/<name>/shard-K`. Give this or --output-s3.
    #[arg(long, value_name = "CLAIM")]
    pub pvc: Option<String>,
    /// The endpoint's API key, from a Kubernetes Secret (`NAME/KEY`): set in the pods as
    /// `OPENAI_API_KEY` and read with `--api-key-env`, never written in the manifest.
    #[arg(long, value_name = "NAME/KEY")]
    pub api_key_secret: Option<String>,
    /// Upload each shard's archive to `s3://bucket/prefix/<name>/shard-K` (credentials from the
    /// pod's AWS chain: IRSA or EKS Pod Identity).
    #[arg(long, value_name = "S3_URL")]
    pub output_s3: Option<String>,
    /// The shared start: a UTC time (2026-12-01T19:30:00Z) or Unix seconds. Default: the time
    /// the manifest is printed plus --start-in-s.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Seconds from now to the shared start when --start-at is not given (time to schedule
    /// the pods and pull the image).
    #[arg(long, default_value_t = 180)]
    pub start_in_s: u64,
    /// CPU per pod (a request and a limit, e.g. 2).
    #[arg(long, default_value = "2")]
    pub cpu: String,
    /// Memory per pod (e.g. 4Gi).
    #[arg(long, default_value = "4Gi")]
    pub memory: String,
    /// The sweep's own flags, after `--` (not --shard, --start-at or --artifact-dir, which the
    /// Job sets).
    #[arg(last = true, required = true)]
    pub sweep: Vec<String>,
}
