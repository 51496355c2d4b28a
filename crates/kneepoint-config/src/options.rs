//! Settings groups in one shape for the flags and the file: each group is one struct that is
//! both a clap [`Args`] (flattened into the command line, its doc comments the help) and a
//! file section (`serde`, unknown keys refused), every field an `Option` (or a flag that is
//! off unless given). Flags and file meet by one rule, [`flags_over`]: a flag given wins, field
//! by field; the resolved group is then checked and turned into its engine type beside the
//! code that uses it (`load.rs`).
//!
//! The merge is the `merge` crate's derive with its `overwrite_none` strategy, not a
//! hand-written fallback per field.

use std::path::PathBuf;

use clap::Args;
use merge::Merge;
use serde::Deserialize;

/// The flags over the file's section: every field the flags set, else the file's.
pub fn flags_over<T: Merge + Clone>(flags: &T, file: &T) -> T {
    let mut out = flags.clone();
    out.merge(file.clone());
    out
}

/// The merge of a collection the flags never fill (`#[arg(skip)]`): the file's.
pub(crate) fn fill_empty<T: Default + PartialEq>(left: &mut T, right: T) {
    if *left == T::default() {
        *left = right;
    }
}

/// The merge of a list both fill: the flags' entries, then the file's.
pub(crate) fn append<T>(left: &mut Vec<T>, right: Vec<T>) {
    left.extend(right);
}

/// `[load]` and its flags: open-loop arrivals, timed levels, the first wave's ramp, early stop,
/// time slices and goodput.
#[derive(Debug, Clone, Default, PartialEq, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct LoadOptions {
    /// Open loop: send requests at these rates (requests/s; one level per rate, comma-separated)
    /// on an arrival schedule instead of keeping a number in flight. Latency is reported from
    /// the actual and from the intended start, and the schedule lag is measured.
    #[arg(long, value_delimiter = ',', value_name = "RPS")]
    pub request_rate: Option<Vec<f64>>,
    /// Open loop: `poisson` (default), `constant` or `gamma`.
    #[arg(long, value_name = "PROCESS", value_parser = ["poisson", "constant", "gamma"])]
    pub arrival: Option<String>,
    /// Open loop, gamma arrivals: the shape (1 = Poisson, < 1 burstier, > 1 smoother).
    #[arg(long, value_name = "B")]
    pub burstiness: Option<f64>,
    /// Run each level for this many seconds instead of a request count (closed loop: requests
    /// are drawn while the time lasts; open loop: the schedule covers this time).
    #[arg(long, value_name = "SECONDS")]
    pub duration_s: Option<f64>,
    /// With --duration-s: how long requests in flight at the end may finish before they are
    /// cancelled and recorded as cancelled (default 30).
    #[arg(long, value_name = "SECONDS")]
    pub grace_s: Option<f64>,
    /// With --duration-s: warm-up time at the level's own load before measuring (default 0;
    /// --warmup-requests is the count-based warm-up).
    #[arg(long, value_name = "SECONDS")]
    pub warmup_duration_s: Option<f64>,
    /// Closed loop: spread each level's first wave of requests over this many seconds (slot k
    /// of n starts k/n of the way through), instead of sending them all at the same instant.
    /// Requests are timed from when they are sent.
    #[arg(long, value_name = "SECONDS")]
    pub ramp_up_s: Option<f64>,
    /// Stop a level before its request count (or duration) once the confidence intervals of
    /// its mean request latency and mean TTFT are narrower than this fraction of the means
    /// (e.g. 0.05); requests in flight finish. Batch means of one wave of requests each.
    #[arg(long, value_name = "FRACTION")]
    pub early_stop_width: Option<f64>,
    /// With --early-stop-width or --target-precision: requests recorded before stopping early
    /// is considered (default 200).
    #[arg(long, value_name = "N")]
    pub early_stop_min_requests: Option<u32>,
    /// End a level as soon as the 90 % interval of one statistic (--precision-statistic) is
    /// within ± this fraction of it (0.02 = ±2 %), the request count being the cap; requests in
    /// flight finish. The cheap way to get every answer's error bars to a set width. A
    /// percentile is judged over ten sections with two values beyond it each (p99 needs 2,000
    /// requests, p90 200): a smaller cap runs in full.
    #[arg(long, value_name = "FRACTION", conflicts_with = "early_stop_width")]
    pub target_precision: Option<f64>,
    /// The statistic --target-precision watches: request_latency, time_to_first_token or
    /// inter_token_latency, with avg or a percentile (default request_latency:p99).
    #[arg(long, value_name = "METRIC:STAT", requires = "target_precision")]
    pub precision_statistic: Option<String>,
    /// Cut each level into slices of this many seconds: per-slice aggregates in
    /// profile_export_aiperf_timeslices.json/.csv (AIPerf's shapes), throughput and latency per
    /// slice in report.html, and a level whose first and last slices differ beyond noise
    /// flagged not_steady.
    #[arg(long, value_name = "SECONDS")]
    pub slice_s: Option<f64>,
    /// Per-request SLOs, AIPerf's form: `metric:limit_ms` pairs, e.g.
    /// "time_to_first_token:500 inter_token_latency:50" (time_to_first_token,
    /// inter_token_latency, request_latency). Each level reports goodput (requests/s meeting
    /// them all) and slo_miss_rate (the share, failures included, that did not).
    #[arg(long, value_name = "SLOS")]
    pub goodput: Option<String>,
    /// Open loop: replay a trace dataset (`--dataset`, trace format) at its recorded send
    /// times, sped up by this factor (2 = twice as fast). Sends up to `--request-count` records.
    #[arg(long, value_name = "FACTOR")]
    pub replay_speedup: Option<f64>,
    /// Open loop: cap on requests in flight (default: none). Requests waiting for a slot are
    /// sent late and the lag counts against the server.
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<u32>,
}

/// `[runs]` and its flags: repeated runs of each level, and when to stop repeating.
#[derive(Debug, Clone, Default, PartialEq, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct RunsOptions {
    /// Runs of each level (default 1). With more than one, each run is kept in
    /// `profile_runs/run_NNNN/` and `aggregate/` gets mean, std, CV, standard error and a
    /// Student-t confidence interval of every statistic; the level's own files pool the runs.
    #[arg(long, value_name = "N")]
    pub num_runs: Option<u32>,
    /// Confidence level of the multi-run intervals (default 0.95).
    #[arg(long, value_name = "P")]
    pub confidence_level: Option<f64>,
    /// Stop repeating a level once this statistic converges, e.g. `time_to_first_token_p99`
    /// (`<metric>_<stat>`; `--num-runs` is then the cap).
    #[arg(long, value_name = "STAT")]
    pub converge_on: Option<String>,
    /// `ci-width` (interval width / mean, default) or `cv` (coefficient of variation).
    #[arg(long, value_name = "TEST", value_parser = ["ci-width", "ci_width", "cv"])]
    pub converge_criterion: Option<String>,
    /// Threshold of the convergence test (default 0.05).
    #[arg(long, value_name = "X")]
    pub converge_threshold: Option<f64>,
    /// Runs before convergence may stop the repetition (default 3, at least 2).
    #[arg(long, value_name = "N")]
    pub min_runs: Option<u32>,
}

/// `[sweep_params]` (SageMaker's names) and the Load group's count flags: requests per level,
/// warm-up and lead-in. The levels (`concurrency`) are a file key here; their flag is the
/// sweep's own `--concurrency`.
#[derive(Debug, Clone, Default, PartialEq, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct CountOptions {
    /// Measured requests per level: one count for all, or one per level in the levels' order
    /// (`--concurrency 64,256,1024 --request-count 256,512,2048`; a search takes one).
    #[arg(long, value_name = "N[,N...]")]
    pub request_count: Option<crate::RequestCounts>,
    /// Warm-up requests per level, excluded from metrics.
    #[arg(long, value_name = "N")]
    #[serde(rename = "warmup_request_count")]
    pub warmup_requests: Option<u32>,
    /// Keep each closed-loop level loaded from its first measured request to its last: a
    /// lead-in of at least N requests (and one per slot) sent with no pause before the
    /// measured ones, and fillers after them until the last one ends; rates are counted from
    /// the measured starts. A sweep given no request count does this by default (N = 256,
    /// two waves measured); 0 turns it off.
    #[arg(long, value_name = "N")]
    #[serde(rename = "lead_in_request_count")]
    pub lead_in: Option<u32>,
    /// File only: the levels (`--concurrency` on the command line).
    #[arg(skip)]
    pub concurrency: Option<Vec<u32>>,
}

/// The recommendation's own settings: its flags, and the file's top-level keys of the same
/// names (`search_strategy` for `--strategy`) taken by [`crate::FileConfig::recommend_options`]
/// (the file's top level holds `[[candidates]]` and every section beside them, so these keys
/// are read there and projected, not deserialized into this struct).
#[derive(Debug, Clone, Default, PartialEq, Args, Merge)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct RecommendOptions {
    /// `cost`, `latency`, `throughput` or `pareto` (overrides the file).
    #[arg(long, value_parser = crate::choices::choice::<kneepoint_planner::Objective>(&["cost", "latency", "throughput", "pareto"]))]
    pub objective: Option<kneepoint_planner::Objective>,
    /// How launches are spent: grid (every combination) or adaptive (skip what cannot fit
    /// or win, screen, search fully what could win; overrides the file's `search_strategy`).
    #[arg(long, value_parser = crate::choices::choice::<crate::SearchStrategy>(&["grid", "adaptive"]))]
    pub strategy: Option<crate::SearchStrategy>,
    /// A dated price table (TOML or JSON) for candidates without `price_per_hour`.
    #[arg(long, value_name = "FILE")]
    pub price_table: Option<PathBuf>,
    /// Where results go (one sub-folder per candidate).
    #[arg(long, value_name = "DIR")]
    pub artifact_dir: Option<PathBuf>,
}

/// `[fleet]` and the sweep's fleet flags: the peak traffic to size a fleet for.
#[derive(Debug, Clone, Default, PartialEq, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct FleetOptions {
    /// Peak concurrent requests to serve: prints the fleet size.
    #[arg(long, help_heading = "Sweep", value_name = "N")]
    pub peak_concurrency: Option<f64>,
    /// Peak requests per second to serve: prints the fleet size.
    #[arg(long, help_heading = "Sweep", value_name = "RPS")]
    pub peak_rps: Option<f64>,
    /// Peak output tokens per second to serve: prints the fleet size.
    #[arg(long, help_heading = "Sweep", value_name = "TOKENS")]
    pub peak_output_tokens_per_s: Option<f64>,
    /// Capacity held in reserve on each instance when sizing the fleet (0.2 = plan at 80 %).
    #[arg(long, help_heading = "Sweep", value_name = "FRACTION")]
    pub headroom: Option<f64>,
}

impl FleetOptions {
    /// The peak given (one of the three; two are refused).
    pub fn peak(&self) -> crate::Result<Option<kneepoint_planner::PeakTraffic>> {
        use kneepoint_planner::PeakTraffic;
        let given: Vec<PeakTraffic> = [
            self.peak_concurrency.map(PeakTraffic::Concurrency),
            self.peak_rps.map(PeakTraffic::RequestsPerSecond),
            self.peak_output_tokens_per_s
                .map(PeakTraffic::OutputTokensPerSecond),
        ]
        .into_iter()
        .flatten()
        .collect();
        if given.len() > 1 {
            crate::error::bail!(
                "give one of --peak-concurrency, --peak-rps, --peak-output-tokens-per-s"
            );
        }
        Ok(given.first().copied())
    }

    /// The capacity held in reserve (default 0.2), at least 0 and below 1.
    pub fn headroom(&self) -> crate::Result<f64> {
        let headroom = self.headroom.unwrap_or(0.2);
        if !(0.0..1.0).contains(&headroom) {
            crate::error::bail!("--headroom must be at least 0 and below 1");
        }
        Ok(headroom)
    }
}

/// `[search_params]` (SageMaker's names) and the search's flags. The section's SLAs and
/// request count are file keys only: their flags are the SLA group's and `--request-count`.
#[derive(Debug, Clone, Default, PartialEq, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct SearchOptions {
    /// Lowest concurrency probed (default 16).
    #[arg(long, help_heading = "Search", value_name = "N")]
    pub concurrency_min: Option<u32>,
    /// Highest concurrency probed (default 4096).
    #[arg(long, help_heading = "Search", value_name = "N")]
    pub concurrency_max: Option<u32>,
    /// Probes in all, confirmations included (default 10).
    #[arg(long, help_heading = "Search", value_name = "N")]
    pub search_max_iterations: Option<u32>,
    /// Probes beyond --search-max-iterations that a search may spend when the readings report
    /// noise and the 90 % interval on the boundary is still wider than twice the precision
    /// (default 4; 0 makes --search-max-iterations a hard cap).
    #[arg(long, help_heading = "Search", value_name = "N")]
    pub search_noise_iterations: Option<u32>,
    /// Above this level, bracketing without a prediction grows x4 instead of x2.
    #[arg(long, help_heading = "Search", value_name = "N")]
    pub search_initial_points: Option<u32>,
    /// Relative width of the final bracket (default 0.05).
    #[arg(long, help_heading = "Search", value_name = "FRACTION")]
    pub precision: Option<f64>,
    /// Re-measure an answer whose smallest SLA margin is below this, unless the search's noise
    /// estimate is well under it (default 0.05; 0 = never).
    #[arg(long, help_heading = "Search", value_name = "FRACTION")]
    pub confirm_margin: Option<f64>,
    /// With --num-runs of at least 2: a probe meets an SLA only if the SLA holds at the
    /// pessimistic end of its confidence interval across runs (the upper end for a limit, the
    /// lower end for a floor), not just at the pooled value.
    #[arg(long, help_heading = "Search")]
    #[serde(default)]
    #[merge(strategy = merge::bool::overwrite_false)]
    pub sla_by_confidence: bool,
    /// What the answer maximises under: `sla` (default: every SLA holds at its statistic) or
    /// `goodput` (AIPerf's max-goodput-under-slo: the share of requests meeting every
    /// per-request SLO of --goodput is at least --attainment; any SLAs given must hold too).
    #[arg(long, help_heading = "Search", value_name = "sla|goodput")]
    #[serde(default, deserialize_with = "crate::choices::parsed")]
    pub objective: Option<crate::SearchObjective>,
    /// With --objective goodput: the share of requests, failures included, that must meet
    /// every SLO of --goodput (default 0.99).
    #[arg(long, help_heading = "Search", value_name = "FRACTION")]
    pub attainment: Option<f64>,
    /// File only: `max-concurrency-under-sla` (default) or `max-goodput-under-slo` (the
    /// goodput objective).
    #[arg(skip)]
    pub search_recipe: Option<String>,
    /// File only: p95 TTFT limit, ms (`--ttft-sla-ms`).
    #[arg(skip)]
    pub ttft_sla_ms: Option<f64>,
    /// File only: p95 ITL limit, ms (`--tpot-sla-ms`).
    #[arg(skip)]
    pub tpot_sla_ms: Option<f64>,
    /// File only: p99 end-to-end limit, ms (`--e2e-sla-ms`).
    #[arg(skip)]
    pub e2e_sla_ms: Option<f64>,
    /// File only: mean error-rate limit, a fraction (`--error-rate-sla`).
    #[arg(skip)]
    pub error_rate_sla: Option<f64>,
    /// File only: general SLAs, `metric:stat:op:threshold` (`--sla`).
    #[arg(skip)]
    #[serde(default)]
    #[merge(strategy = fill_empty)]
    pub slas: Vec<String>,
    /// File only: requests per probe (`--request-count`).
    #[arg(skip)]
    pub request_count: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_given_wins_and_the_file_fills_the_rest() {
        let flags = LoadOptions {
            grace_s: Some(5.0),
            request_rate: Some(vec![2.0]),
            ..Default::default()
        };
        let file: LoadOptions =
            toml::from_str("grace_s = 9.0\nduration_s = 30.0\nrequest_rate = [1.0, 3.0]").unwrap();
        let both = flags_over(&flags, &file);
        assert_eq!(both.grace_s, Some(5.0));
        assert_eq!(both.duration_s, Some(30.0));
        assert_eq!(both.request_rate, Some(vec![2.0]));
        assert_eq!(flags_over(&LoadOptions::default(), &file), file);
    }

    #[test]
    fn a_file_only_list_survives_the_merge() {
        let file: SearchOptions = toml::from_str("slas = [\"error_rate:avg:lt:0.1\"]").unwrap();
        let both = flags_over(&SearchOptions::default(), &file);
        assert_eq!(both.slas, ["error_rate:avg:lt:0.1"]);
    }

    #[test]
    fn an_unknown_key_is_refused() {
        let e = toml::from_str::<RunsOptions>("num_run = 3").unwrap_err();
        assert!(e.to_string().contains("num_run"), "{e}");
    }
}
