//! How levels load the endpoint: timed levels, open-loop arrivals, repeated runs, the ramp of
//! a closed loop's first wave and early stop, from the `[load]` and `[runs]` groups (the
//! flags over the file's sections, [`crate::options::flags_over`]), checked and turned into
//! the engine's types.

use std::time::Duration;

use kneepoint_engine::{OpenLoopSettings, RunsSettings};
use kneepoint_metrics::{ConvergenceRule, Criterion};
use kneepoint_runner::{Arrival, EarlyStop, LevelDuration, PrecisionTarget};

use crate::error::bail;
use crate::{CountOptions, LoadOptions, Result, RunsOptions};
use kneepoint_engine::LevelSettings;

/// A timed level (`None`: count-bound levels).
pub(crate) fn level_duration(load: &LoadOptions) -> Result<Option<LevelDuration>> {
    let secs = |what: &str, v: f64, zero_ok: bool| -> Result<Duration> {
        if !v.is_finite() || v < 0.0 || (v == 0.0 && !zero_ok) || v > 1e7 {
            bail!(
                "{what} must be a {} number of seconds, not {v}",
                if zero_ok { "non-negative" } else { "positive" }
            );
        }
        Ok(Duration::from_secs_f64(v))
    };
    let (grace, warm) = (load.grace_s, load.warmup_duration_s);
    let Some(d) = load.duration_s else {
        if grace.is_some() || warm.is_some() {
            bail!("grace_s and warmup_duration_s need duration_s");
        }
        return Ok(None);
    };
    Ok(Some(LevelDuration {
        measure: secs("duration_s", d, false)?,
        grace: secs("grace_s", grace.unwrap_or(30.0), true)?,
        warmup: secs("warmup_duration_s", warm.unwrap_or(0.0), true)?,
    }))
}

/// Open-loop arrivals.
pub(crate) fn resolve_open_loop(load: &LoadOptions) -> Result<Option<OpenLoopSettings>> {
    {
        let rates = load.request_rate.clone().unwrap_or_default();
        let (arrival, burstiness) = (load.arrival.clone(), load.burstiness);
        let (cap, replay) = (load.max_in_flight, load.replay_speedup);
        if let Some(f) = replay {
            if !(f.is_finite() && f > 0.0) {
                bail!("replay_speedup must be a positive factor, not {f}");
            }
            if !rates.is_empty() || arrival.is_some() || burstiness.is_some() {
                bail!("replay_speedup replays a trace's own times: it does not combine with request_rate, arrival or burstiness");
            }
            if cap == Some(0) {
                bail!("max_in_flight must be at least 1");
            }
            return Ok(Some(OpenLoopSettings::replay(f).with_max_in_flight(cap)));
        }
        if rates.is_empty() {
            if arrival.is_some() || burstiness.is_some() || cap.is_some() {
                bail!("arrival, burstiness and max_in_flight need request_rate (open loop)");
            }
            return Ok(None);
        }
        if let Some(r) = rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
            bail!("request_rate must be positive requests/s, not {r}");
        }
        if cap == Some(0) {
            bail!("max_in_flight must be at least 1");
        }
        let arrival = Arrival::parse(arrival.as_deref().unwrap_or("poisson"), burstiness)?;
        if let Arrival::Gamma { burstiness } = arrival {
            if !(burstiness.is_finite() && burstiness > 0.0) {
                bail!("burstiness must be a positive number, not {burstiness}");
            }
        }
        Ok(Some(
            OpenLoopSettings::rates(rates, arrival).with_max_in_flight(cap),
        ))
    }
}

/// Repeated runs.
pub(crate) fn resolve_runs(runs: &RunsOptions) -> Result<RunsSettings> {
    {
        let num_runs = runs.num_runs.unwrap_or(1);
        if num_runs == 0 {
            bail!("num_runs must be at least 1");
        }
        let confidence = runs.confidence_level.unwrap_or(0.95);
        if !(confidence > 0.0 && confidence < 1.0) {
            bail!("confidence_level must be between 0 and 1 (exclusive), not {confidence}");
        }
        let (statistic, criterion) = (runs.converge_on.clone(), runs.converge_criterion.clone());
        let (threshold, min_runs) = (runs.converge_threshold, runs.min_runs);
        let convergence = match statistic {
            None => {
                if criterion.is_some() || threshold.is_some() || min_runs.is_some() {
                    bail!("converge_criterion, converge_threshold and min_runs need converge_on (the statistic to watch)");
                }
                None
            }
            Some(statistic) => {
                // One key convention: `metric:stat` as in SLAs, or `metric_stat` as in the
                // aggregate files; stored in the latter form, which the run aggregates use.
                let statistic = if matches!(statistic.as_str(), "goodput_avg" | "goodput:avg") {
                    "goodput_avg".to_owned()
                } else {
                    match kneepoint_planner::StatKey::parse(&statistic) {
                        Ok(k) => k.underscored(),
                        Err(e) => bail!("converge_on {statistic:?} is not a statistic: {e}; use <metric>:<stat> or <metric>_<stat>, e.g. time_to_first_token:p99"),
                    }
                };
                let max = threshold.unwrap_or(0.05);
                if !(max > 0.0 && max.is_finite()) {
                    bail!("converge_threshold must be a positive number, not {max}");
                }
                let criterion = match criterion.as_deref().unwrap_or("ci-width") {
                    "ci-width" | "ci_width" => Criterion::CiWidth { max },
                    "cv" => Criterion::Cv { max },
                    other => bail!("converge_criterion must be ci-width or cv, not {other:?}"),
                };
                let min_runs = min_runs.unwrap_or(3);
                if min_runs < 2 {
                    bail!("min_runs must be at least 2 (an interval needs two runs)");
                }
                if num_runs < min_runs {
                    bail!("num_runs ({num_runs}) is the cap on runs and must be at least min_runs ({min_runs})");
                }
                Some(ConvergenceRule {
                    statistic,
                    criterion,
                    min_runs: min_runs as usize,
                    confidence,
                })
            }
        };
        Ok(RunsSettings::new(num_runs, confidence, convergence))
    }
}

/// The level settings of the merged groups (`request_count` already resolved): warm-up or
/// lead-in, repeated runs, ramp, open loop, duration, early stop, slices and goodput.
pub(crate) fn level_settings(
    counts: &CountOptions,
    load: &LoadOptions,
    runs: &RunsOptions,
    request_count: u32,
) -> Result<LevelSettings> {
    let open_loop = resolve_open_loop(load)?;
    let mut levels = LevelSettings::default();
    levels.request_count = request_count;
    levels.warmup_requests = counts.warmup_requests.unwrap_or(0);
    levels.lead_in = counts.lead_in.filter(|n| *n > 0);
    if levels.lead_in.is_some() && levels.warmup_requests > 0 {
        bail!("--lead-in replaces --warmup-requests (a lead-in is a warm-up with no pause before the measured requests): give one of them");
    }
    levels.runs = resolve_runs(runs)?;
    levels.ramp_up = ramp_up(load, open_loop.is_some())?;
    levels.open_loop = open_loop;
    levels.duration = level_duration(load)?;
    levels.early_stop = early_stop(load, runs)?;
    if levels.lead_in.is_some() && (levels.open_loop.is_some() || levels.duration.is_some()) {
        bail!("--lead-in keeps a closed loop of a set request count loaded: not an open loop (--request-rate) or a timed level (--duration)");
    }
    levels.slice_s = load.slice_s;
    if let Some(s) = levels.slice_s {
        // A day at most: `1e300` would be printed with 300 digits in every warning.
        if !(s.is_finite() && s > 0.0 && s <= 86_400.0) {
            bail!("slice_s must be a positive number of seconds up to 86400 (a day), not {s:e}");
        }
    }
    if let Some(spec) = load.goodput.as_deref() {
        levels.goodput = kneepoint_metrics::GoodputSlo::parse(spec)?;
    }
    Ok(levels)
}

/// Shares the levels out to shard K of N (`--shard K/N`), when asked; `remote` is whether
/// every shard sends to one endpoint (a simulator of each shard's own would not be).
pub(crate) fn shard(
    spec: Option<&str>,
    levels: &mut LevelSettings,
    remote: bool,
) -> Result<Option<kneepoint_planner::Shard>> {
    let shard = spec.map(kneepoint_planner::Shard::parse).transpose()?;
    if let Some(sh) = shard {
        if !remote {
            bail!("--shard needs the endpoint every shard sends to (--url): with the built-in simulator each shard would measure a simulator of its own");
        }
        levels.seed = sh.seed(levels.seed);
        levels.warmup_requests = sh.share(levels.warmup_requests);
        if let Some(o) = levels.open_loop.as_mut() {
            if o.replay_speedup.is_some() {
                bail!("a trace replay cannot be sharded: each shard would replay the whole trace");
            }
            o.rates = o.rates.iter().map(|r| sh.share_rate(*r)).collect();
            if let Some(m) = o.max_in_flight {
                if m < sh.count {
                    bail!(
                        "--max-in-flight {m} cannot be shared by {} shards",
                        sh.count
                    );
                }
                o.max_in_flight = Some(sh.share(m));
            }
            // A closed loop's counts are shared with its levels; an open loop's here.
            levels.request_count = sh.share(levels.request_count).max(1);
        }
    }
    Ok(shard)
}

/// Closed loop: the time each phase's first wave is spread over.
pub(crate) fn ramp_up(load: &LoadOptions, open_loop: bool) -> Result<Option<Duration>> {
    Ok(match load.ramp_up_s {
        None => None,
        Some(_) if open_loop => {
            bail!("ramp_up_s spreads a closed loop's first wave; an open loop (request_rate, replay_speedup) has its own schedule")
        }
        Some(v) if v.is_finite() && (0.0..=3600.0).contains(&v) => Some(Duration::from_secs_f64(v)),
        Some(v) => bail!("ramp_up_s must be between 0 and 3600 seconds, not {v}"),
    })
}

/// Early stop of a level once its statistics are precise enough.
pub(crate) fn early_stop(load: &LoadOptions, runs: &RunsOptions) -> Result<Option<EarlyStop>> {
    Ok({
        let (width, min) = (load.early_stop_width, load.early_stop_min_requests);
        let target = load.target_precision;
        if let Some(t) = target {
            if width.is_some() {
                bail!("give early_stop_width or target_precision, not both");
            }
            if !(t.is_finite() && t > 0.0 && t < 1.0) {
                bail!("target_precision must be a fraction above 0 (e.g. 0.02 for ±2 %), not {t}");
            }
            let spec = load
                .precision_statistic
                .clone()
                .unwrap_or_else(|| "request_latency:p99".into());
            return Ok(Some(EarlyStop {
                min_requests: min.unwrap_or(200).max(20) as usize,
                max_relative_width: t,
                confidence: 0.9,
                batch: 1,
                target: Some(precision_target(&spec)?),
            }));
        }
        match width {
            None if min.is_some() => {
                bail!("early_stop_min_requests needs early_stop_width")
            }
            None => None,
            Some(w) if !(w.is_finite() && w > 0.0 && w < 2.0) => {
                bail!(
                    "early_stop_width must be a fraction of the mean above 0 (e.g. 0.05), not {w}"
                )
            }
            Some(w) => Some(EarlyStop {
                min_requests: min.unwrap_or(200).max(20) as usize,
                max_relative_width: w,
                confidence: runs.confidence_level.unwrap_or(0.95),
                batch: 1,
                target: None,
            }),
        }
    })
}

/// `metric:stat` for `--precision-statistic`.
fn precision_target(spec: &str) -> Result<PrecisionTarget> {
    use kneepoint_core::{Metric, Stat};
    let Some((m, s)) = spec.split_once(':') else {
        bail!("precision_statistic is metric:stat, e.g. request_latency:p99 (got {spec:?})");
    };
    let metric: Metric = match m.parse() {
        Ok(x) => x,
        Err(e) => bail!("precision_statistic: {e}"),
    };
    // Only avg and percentiles are watched: the parse error's list (min, max, std...) would
    // offer statistics refused just below.
    let stat: Stat = match s.parse() {
        Ok(x) => x,
        Err(_) => {
            bail!("precision_statistic takes avg or a percentile (p50, p90, p95, p99...), not {s}")
        }
    };
    if !PrecisionTarget::METRICS.contains(&metric) {
        bail!("precision_statistic watches request_latency, time_to_first_token or inter_token_latency, not {m}");
    }
    if stat != Stat::Avg && stat.quantile().is_none() {
        bail!("precision_statistic takes avg or a percentile (p50, p90, p95, p99...), not {s}");
    }
    Ok(PrecisionTarget { metric, stat })
}
