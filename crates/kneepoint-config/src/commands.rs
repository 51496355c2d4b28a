//! The settings of `kneepoint sweep` and `kneepoint search`: the common ones, the levels or
//! the search's parameters, and the SLAs.

use std::path::PathBuf;
use std::sync::Arc;

use kneepoint_engine::{LengthSweep, Observer, Search, Sweep, Workload};
use kneepoint_planner::{LengthPoint, PeakTraffic, SearchConfig, Sla, SweepLevel, SweepPlan};
use kneepoint_workload::LengthDist;

use crate::error::bail;
use crate::file::{FileConfig, SearchSection};
use crate::options::flags_over;
use crate::SearchObjective;
use crate::{CommonSettings, Result, SearchArgs, SlaArgs, SweepArgs, DEFAULT_CONCURRENCY};

fn load(path: &Option<PathBuf>) -> Result<FileConfig> {
    match path {
        Some(p) => {
            let file = FileConfig::load(p)?;
            if !file.candidates.is_empty() {
                bail!(
                    "{} lists candidates: run it with `kneepoint recommend --config {}`",
                    p.display(),
                    p.display()
                );
            }
            Ok(file)
        }
        None => Ok(FileConfig::default()),
    }
}

/// SLAs from the flags, else from the file's `search_params`.
pub(crate) fn slas(args: &SlaArgs, file: &SearchSection) -> Result<Vec<Sla>> {
    let flags_given = args.ttft_sla_ms.is_some()
        || args.tpot_sla_ms.is_some()
        || args.e2e_sla_ms.is_some()
        || args.error_rate_sla.is_some()
        || !args.slas.is_empty();
    let (ttft, tpot, e2e, err, general) = if flags_given {
        (
            args.ttft_sla_ms,
            args.tpot_sla_ms,
            args.e2e_sla_ms,
            args.error_rate_sla,
            &args.slas,
        )
    } else {
        (
            file.ttft_sla_ms,
            file.tpot_sla_ms,
            file.e2e_sla_ms,
            file.error_rate_sla,
            &file.slas,
        )
    };
    let mut out = Vec::new();
    for (v, make) in [
        (
            ttft,
            Sla::ttft_ms as fn(f64) -> Result<Sla, kneepoint_planner::Error>,
        ),
        (tpot, Sla::tpot_ms),
        (e2e, Sla::e2e_ms),
        (err, Sla::error_rate),
    ] {
        if let Some(v) = v {
            if v < 0.0 {
                bail!("SLA thresholds must be ≥ 0 (got {v})");
            }
            out.push(make(v)?);
        }
    }
    for g in general {
        out.push(Sla::parse(g)?);
    }
    Ok(out)
}

/// Refuses a length sweep (`--isl`/`--osl` lists) that could not run as one: several
/// concurrency levels, a dataset, a mixture, conversations, pooling, several open-loop rates or
/// shards.
fn check_length_sweep(common: &CommonSettings, concurrency: &[u32]) -> Result<()> {
    if concurrency.len() != 1 {
        bail!("a length sweep runs every length at one concurrency: give one --concurrency (default 1), not {concurrency:?}");
    }
    if !common.target.protocol().streaming() {
        bail!("a length sweep measures TTFT against the prompt's length: it needs streaming responses (drop --streaming false)");
    }
    let other = [
        (common.dataset.is_some(), "a dataset"),
        (common.mixture.is_some(), "a length mixture (--mix)"),
        (common.conversations.is_some(), "conversations"),
        (common.pooling.is_some(), "a pooling endpoint"),
        (
            common.prefix.is_some(),
            "a shared prefix (a server's prefix cache would prefill only the rest)",
        ),
        (common.shard.is_some(), "--shard"),
        (
            common
                .levels
                .open_loop
                .as_ref()
                .is_some_and(|o| o.rates.len() != 1 || o.replay_speedup.is_some()),
            "several request rates or a trace replay",
        ),
    ];
    if let Some((_, what)) = other.iter().find(|(given, _)| *given) {
        bail!("a length sweep (--isl/--osl lists) makes synthetic prompts of each length and cannot take {what}");
    }
    Ok(())
}

/// The goodput objective as an SLA: the share of requests missing an SLO at most
/// `1 - attainment` (a miss rate, so that the search's margins and predictions read it as they
/// read an error rate).
fn goodput_sla(common: &CommonSettings, attainment: f64) -> Result<Sla> {
    if common.levels.goodput.is_empty() {
        bail!("the goodput objective needs per-request SLOs: --goodput \"time_to_first_token:500 inter_token_latency:50\" (or goodput in [load])");
    }
    if !(attainment > 0.0 && attainment <= 1.0) {
        bail!("attainment is the share of requests that must meet every SLO: more than 0 and at most 1, not {attainment}");
    }
    let threshold = ((1.0 - attainment) * 1e9).round() / 1e9;
    Ok(Sla::new(
        &format!("slo_attainment_{attainment}"),
        kneepoint_planner::Metric::SloMissRate,
        kneepoint_planner::Stat::Avg,
        kneepoint_planner::Op::Le,
        threshold,
    )?)
}

/// Everything a sweep needs.
#[derive(Debug, Clone)]
pub struct SweepSettings {
    /// Target, workload, output.
    pub common: CommonSettings,
    /// The levels.
    pub plan: SweepPlan,
    /// SLAs that mark each level pass/fail (may be empty).
    pub slas: Vec<Sla>,
    /// Peak traffic to size a fleet for.
    pub peak: Option<PeakTraffic>,
    /// Reserved capacity fraction for fleet sizing.
    pub headroom: f64,
}

impl SweepSettings {
    /// Merges the config file (if any) with the flags and validates the result.
    pub fn resolve(args: &SweepArgs) -> Result<Self> {
        Self::resolve_with(args, &load(&args.common.config)?)
    }

    /// [`SweepSettings::resolve`] with the file already read.
    pub fn resolve_with(args: &SweepArgs, file: &FileConfig) -> Result<Self> {
        let sw = flags_over(
            &args.common.load.counts,
            &file.sweep_params.clone().unwrap_or_default(),
        );
        let counts = sw.request_count.clone();
        let mut common = CommonSettings::resolve(
            &args.common,
            file,
            counts.as_ref().map(crate::RequestCounts::first),
        )?;
        let concurrency = if !args.concurrency.is_empty() {
            args.concurrency.clone()
        } else {
            sw.concurrency.clone().unwrap_or_else(|| {
                // a length sweep holds the load low and fixed: the prefill curve
                let default: &[u32] = if common.lengths.is_some() {
                    &[1]
                } else {
                    &DEFAULT_CONCURRENCY
                };
                default.to_vec()
            })
        };
        if common.lengths.is_some() {
            check_length_sweep(&common, &concurrency)?;
        }
        // Without a request count, each level sends at least four requests per slot, so
        // that ramp-up and drain do not dominate its figures (the default 1,024 would give
        // one per slot at concurrency 1,024).
        let plan = if let Some(counts) = &counts {
            let each = counts.for_levels(&concurrency)?;
            SweepPlan::new(
                concurrency
                    .iter()
                    .zip(each)
                    // raised to the level's concurrency where lower, as a single count is: a
                    // level with fewer requests than slots never has them all in flight
                    .map(|(&c, n)| SweepLevel {
                        concurrency: c,
                        request_count: n.max(c),
                    })
                    .collect(),
            )?
        } else if common.lengths.is_some() {
            // each length measured by at least 32 requests (at concurrency 1, one after another)
            let c = concurrency[0];
            SweepPlan::uniform(&concurrency, c.saturating_mul(4).max(32))?
        } else {
            let lv = &common.levels;
            let off = sw.lead_in == Some(0);
            let loaded = !off
                && lv.open_loop.is_none()
                && lv.duration.is_none()
                && lv.warmup_requests == 0
                && common.conversations.is_none()
                // `kneepoint merge` counts shards' rates over their common window, which a
                // lead-in and fillers would share with the measured requests.
                && common.shard.is_none();
            let levels = concurrency
                .iter()
                .map(|&c| SweepLevel {
                    concurrency: c,
                    request_count: if loaded {
                        crate::default_level_counts(c).1
                    } else {
                        lv.request_count.max(c.saturating_mul(4))
                    },
                })
                .collect();
            if loaded && common.levels.lead_in.is_none() {
                common.levels.lead_in = Some(crate::DEFAULT_LEAD_IN);
            }
            SweepPlan::new(levels)?
        };
        let plan = match common.shard {
            Some(sh) => {
                common.shard_levels = plan.levels().iter().map(|l| l.concurrency).collect();
                plan.shard(sh)?
            }
            None => plan,
        };
        let slas = slas(&args.sla, &file.search_params.clone().unwrap_or_default())?;
        common.check_server_slas(&slas)?;
        common.check_goodput(&slas)?;
        if !common.target.protocol().streaming() {
            if let Some(s) = slas.iter().find(|s| s.requires_streaming()) {
                bail!("{} needs streaming responses", s.name);
            }
        }
        let fleet = flags_over(&args.fleet, &file.fleet.clone().unwrap_or_default());
        let (peak, headroom) = (fleet.peak()?, fleet.headroom()?);
        if common.lengths.is_some() {
            // nothing of these would be used: a length sweep has no knee, zone or fleet
            if let Some(s) = slas.first() {
                bail!("a length sweep judges no SLA ({} was given): it reports TTFT and ITL against the prompt's length; use --goodput to count the requests meeting per-request SLOs", s.name);
            }
            if peak.is_some() || fleet.headroom.is_some() {
                bail!("a length sweep sizes no fleet: drop the peak and the headroom");
            }
        }
        Ok(SweepSettings {
            common,
            plan,
            slas,
            peak,
            headroom,
        })
    }
}

/// Everything a search needs.
#[derive(Debug, Clone)]
pub struct SearchSettings {
    /// Target, workload, output.
    pub common: CommonSettings,
    /// The search's parameters and SLAs.
    pub search: SearchConfig,
    /// SLAs judged at the pessimistic end of each probe's across-run confidence interval.
    pub sla_by_confidence: bool,
}

impl SearchSettings {
    /// Merges the config file (if any) with the flags and validates the result.
    pub fn resolve(args: &SearchArgs) -> Result<Self> {
        Self::resolve_with(args, &load(&args.common.config)?)
    }

    /// [`SearchSettings::resolve`] with the file already read.
    pub fn resolve_with(args: &SearchArgs, file: &FileConfig) -> Result<Self> {
        let sp = flags_over(
            &args.search,
            &file.search_params.clone().unwrap_or_default(),
        );
        let recipe_goodput = match sp.search_recipe.as_deref() {
            None | Some("max-concurrency-under-sla") => false,
            Some("max-goodput-under-slo") => true,
            Some(r) => bail!("search_recipe {r:?} is not known (max-concurrency-under-sla or max-goodput-under-slo)"),
        };
        if let Some(c) = args
            .common
            .load
            .counts
            .request_count
            .as_ref()
            .and_then(|c| c.per_level())
        {
            bail!(
                "a search sends the same request count at every probe: give one --request-count, not {}",
                c.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            );
        }
        let mut common = CommonSettings::resolve(&args.common, file, sp.request_count)?;
        if args.common.output.artifact_dir.is_none() && file.artifact_dir.is_none() {
            // Named for what it holds.
            common.artifact_dir = crate::common::default_artifact_dir("search");
        }
        if common.lengths.is_some() {
            bail!("a list of lengths makes a length sweep (kneepoint sweep --isl A,B,...); a search runs one workload: give one --isl and one --osl");
        }
        if common.shard.is_some() {
            bail!("--shard splits a sweep's levels; a search decides each probe from the last one, so it runs in one process");
        }
        if common.levels.open_loop.is_some() {
            bail!("the search finds the highest concurrency under the SLAs in a closed loop; request_rate (open loop) applies to `kneepoint sweep`");
        }
        let mut slas = slas(&args.sla, &sp)?;
        let goodput = match sp.objective {
            None => recipe_goodput,
            Some(SearchObjective::Sla) if recipe_goodput => bail!("--objective sla contradicts search_recipe = \"max-goodput-under-slo\" in the config file: drop one of them"),
            Some(SearchObjective::Sla) => false,
            Some(SearchObjective::Goodput) => true,
        };
        let attainment = sp.attainment;
        if goodput {
            slas.push(goodput_sla(&common, attainment.unwrap_or(0.99))?);
        } else if attainment.is_some() {
            bail!("attainment applies to --objective goodput");
        }
        let mut search = SearchConfig::new(slas);
        common.check_server_slas(&search.slas)?;
        common.check_goodput(&search.slas)?;
        search.request_count = common.levels.request_count;
        search.streaming = common.target.protocol().streaming();
        if let Some(v) = sp.concurrency_min {
            search.concurrency_min = v;
        }
        if let Some(v) = sp.concurrency_max {
            search.concurrency_max = v;
        }
        if let Some(v) = sp.search_max_iterations {
            search.max_iterations = v;
        }
        if let Some(v) = sp.search_noise_iterations {
            search.noise_iterations = v;
        }
        search.initial_points = sp.search_initial_points;
        if let Some(v) = sp.precision {
            search.precision = v;
        }
        if let Some(v) = sp.confirm_margin {
            search.confirm_margin = v;
        }
        search.validate()?;
        let sla_by_confidence = sp.sla_by_confidence;
        if sla_by_confidence && common.levels.runs.num_runs < 2 {
            bail!("sla_by_confidence judges each probe by its confidence interval across runs: set num_runs to 2 or more");
        }
        Ok(SearchSettings {
            common,
            search,
            sla_by_confidence,
        })
    }
}

impl SweepSettings {
    /// Starts the target and returns the engine's sweep, ready to run, reporting to `observer`.
    pub async fn prepare(&self, observer: Arc<dyn Observer>) -> Result<Sweep> {
        if self.common.lengths.is_some() {
            bail!("these settings describe a length sweep (--isl/--osl lists): prepare it with prepare_lengths");
        }
        let widest = self.plan.levels().iter().map(|l| l.concurrency).max();
        check_client_resources(widest, &self.common.target, observer.as_ref())?;
        let bench = crate::prepare::prepare(&self.common, observer).await?;
        Ok(Sweep::on(bench)
            .plan(self.plan.clone())
            .slas(self.slas.clone())
            .peak(self.peak)
            .headroom(self.headroom)
            .build()?)
    }
}

impl SweepSettings {
    /// Starts the target and returns the engine's length sweep (`--isl`/`--osl` lists), ready
    /// to run, reporting to `observer`: each length's prompts are made from the same settings
    /// and seed, with the length's mean and the stddev given.
    pub async fn prepare_lengths(&self, observer: Arc<dyn Observer>) -> Result<LengthSweep> {
        let Some(points) = self.common.lengths.clone() else {
            bail!("not a length sweep: give --isl or --osl a list of lengths");
        };
        let level = self.plan.levels()[0];
        check_client_resources(
            Some(level.concurrency),
            &self.common.target,
            observer.as_ref(),
        )?;
        let bench = crate::prepare::prepare(&self.common, observer).await?;
        let tokenizer = kneepoint_workload::load_tokenizer(&self.common.tokenizer)?;
        let stddev = |d: &LengthDist| match d {
            LengthDist::Normal { stddev, .. } => *stddev,
            _ => 0.0,
        };
        let (isl_sd, osl_sd) = (stddev(&self.common.isl), stddev(&self.common.osl));
        let common = self.common.clone();
        let make = move |p: LengthPoint| -> std::result::Result<Box<dyn Workload>, kneepoint_engine::Error> {
            let isl = LengthDist::mean_stddev(f64::from(p.isl), isl_sd);
            let osl = LengthDist::mean_stddev(f64::from(p.osl), osl_sd);
            let mut own = common.clone();
            own.levels.seed = crate::workload::length_seed(common.levels.seed, p);
            Ok(crate::prepare::synthetic(&own, tokenizer.clone(), isl, osl)?)
        };
        Ok(LengthSweep::on(bench)
            .points(points)
            .concurrency(level.concurrency)
            .request_count(level.request_count)
            .workloads(make)
            .build()?)
    }
}

impl SearchSettings {
    /// Starts the target and returns the engine's search, ready to run, reporting to
    /// `observer`.
    pub async fn prepare(&self, observer: Arc<dyn Observer>) -> Result<Search> {
        // The search's upper bound is a bound, not a level it will surely run: a shortfall
        // there is a warning (the probes above it would fail as client_resources).
        if let Err(why) = check_client_resources(
            Some(self.search.concurrency_max),
            &self.common.target,
            observer.as_ref(),
        ) {
            observer.warning(&format!(
                "concurrency_max {}: {why}",
                self.search.concurrency_max
            ));
        }
        let bench = crate::prepare::prepare(&self.common, observer).await?;
        Ok(Search::on(bench)
            .config(self.search.clone())
            .sla_by_confidence(self.sla_by_confidence)
            .build()?)
    }
}

/// Refuses, before anything is sent, a widest level that cannot be had on this machine: more
/// connections than the hard open-file limit allows (HTTP/2 multiplexes them on one), or more
/// streams in flight than the memory left can hold; warns when the soft limit is short.
fn check_client_resources(
    concurrency: Option<u32>,
    target: &crate::Target,
    observer: &dyn Observer,
) -> Result<()> {
    let Some(c) = concurrency.map(u64::from) else {
        return Ok(());
    };
    if !target.protocol().connect().http2 {
        let fds_each = if target.simulator().is_some() { 2 } else { 1 };
        if let Some(why) = kneepoint_transport::fd_refusal(c, fds_each) {
            bail!("{why}");
        }
        if let Some(why) = kneepoint_transport::fd_shortfall(c * fds_each) {
            observer.warning(&why);
        }
    }
    if let Some(why) = kneepoint_transport::memory_shortfall(c) {
        bail!("{why}");
    }
    Ok(())
}
