//! Measuring one candidate: its run, and the operating point and curve it is ranked on.

use std::collections::BTreeMap;

use kneepoint_core::{Metric, Stat};
use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{CurvePoint, OperatingPoint, ParetoPoint};
use kneepoint_runner::CancelToken;

use std::path::Path;
use std::time::Instant;

use kneepoint_report::schema::{DeploymentRecord, LevelRow};

use crate::candidate::{CandidateRun, CandidateSource, CandidateSpec};
use crate::{Error, Observer};

fn point(s: &LevelSummary) -> OperatingPoint {
    let st = |m: Metric, q: Stat| s.value(m, q);
    OperatingPoint {
        concurrency: s.concurrency,
        output_token_throughput: s.output_token_throughput,
        request_throughput: s.request_throughput,
        ttft_p50_ms: st(Metric::TimeToFirstToken, Stat::P50),
        ttft_p99_ms: st(Metric::TimeToFirstToken, Stat::P99),
        itl_p50_ms: st(Metric::InterTokenLatency, Stat::P50),
        itl_p99_ms: st(Metric::InterTokenLatency, Stat::P99),
        e2e_p50_ms: st(Metric::RequestLatency, Stat::P50),
        e2e_p90_ms: st(Metric::RequestLatency, Stat::P90),
        e2e_p99_ms: st(Metric::RequestLatency, Stat::P99),
        error_rate: s.error_rate,
        output_token_throughput_interval: s
            .interval(Metric::OutputTokenThroughput, Stat::Avg)
            .map(|i| [i.low, i.high]),
    }
}

/// Why a level cannot be a ranking's basis: the client, not the server, may have shaped it.
fn client_limited(s: &LevelSummary) -> Option<String> {
    let why = s.client.as_ref()?.client_limited.as_ref()?;
    Some(format!(
        "the client was the bottleneck at concurrency {} ({why}); measure it again with more client capacity",
        s.concurrency
    ))
}

fn curve(summaries: &[LevelSummary]) -> Vec<CurvePoint> {
    let mut by_c: BTreeMap<u32, f64> = BTreeMap::new();
    for s in summaries {
        if let Some(p99) = s.value(Metric::RequestLatency, Stat::P99) {
            by_c.insert(s.concurrency, p99);
        }
    }
    by_c.into_iter()
        .map(|(concurrency, e2e_p99_ms)| CurvePoint {
            concurrency,
            e2e_p99_ms,
        })
        .collect()
}

/// Each level on the per-user speed / throughput plane with its SLA verdict (`verdicts` in the
/// summaries' order), for the Pareto front: the last reading of a concurrency counts.
fn levels(summaries: &[LevelSummary], verdicts: &[Option<bool>]) -> Vec<ParetoPoint> {
    let rows: Vec<LevelRow> = summaries
        .iter()
        .zip(verdicts)
        .map(|(s, ok)| LevelRow::new(s, String::new(), *ok, None))
        .collect();
    let mut by_c: BTreeMap<u32, ParetoPoint> = BTreeMap::new();
    for p in crate::sweep_doc::pareto_points(&rows) {
        by_c.insert(p.concurrency, p);
    }
    by_c.into_values().collect()
}

/// The start of the reason of a candidate that was not measured.
pub(crate) const NOT_MEASURED: &str = "not measured: ";
/// The start of the reason of a candidate whose measurement was thrown away.
pub(crate) const SERVER_EXITED: &str = "its server exited during the measurement";

/// What one candidate's run found.
pub(crate) struct Measured {
    pub(crate) point: Option<OperatingPoint>,
    pub(crate) curve: Vec<CurvePoint>,
    pub(crate) levels: Vec<ParetoPoint>,
    pub(crate) reason: Option<String>,
    pub(crate) lower_bound: Option<String>,
    pub(crate) interrupted: bool,
    /// Whether its run ran (false: it could not be prepared, and its folder holds no run).
    pub(crate) ran: bool,
}

impl Measured {
    /// A candidate that was not measured, and why (starting with [`NOT_MEASURED`]).
    pub(crate) fn unmeasured(reason: String) -> Self {
        Measured {
            point: None,
            curve: Vec::new(),
            levels: Vec::new(),
            reason: Some(reason),
            lower_bound: None,
            interrupted: false,
            ran: false,
        }
    }
}

/// Why a run found no operating point: `why`, led by the interrupt when the run was cut short
/// (its last level or probe is partial, so what it lacks may be what the interrupt cut off).
fn unmet(why: &str, interrupted: bool) -> String {
    if interrupted {
        format!("interrupted before an operating point was established ({why})")
    } else {
        why.to_owned()
    }
}

pub(crate) async fn measure(
    run: CandidateRun,
    bound: Option<u32>,
    cancel: &CancelToken,
) -> Result<Measured, Error> {
    match run {
        CandidateRun::Search(s) => {
            let top = s.search_config().concurrency_max;
            let o = s.run(cancel).await?;
            let answer = o.outcome.feasible_max.and_then(|c| {
                o.history
                    .iter()
                    .zip(&o.summaries)
                    .rev()
                    .find(|(r, _)| r.probe.concurrency == c && r.pass)
                    .map(|(_, s)| s)
            });
            let at = answer.map(point);
            Ok(Measured {
                reason: at
                    .is_none()
                    .then(|| unmet(&o.outcome.explanation, o.interrupted)),
                lower_bound: answer
                    .and_then(client_limited)
                    .or_else(|| {
                        // the lowest failing probe, when the client shaped it
                        let h = o.outcome.infeasible_min?;
                        o.history
                            .iter()
                            .zip(&o.summaries)
                            .filter(|(r, _)| r.probe.concurrency == h)
                            .find_map(|(_, s)| client_limited(s))
                    })
                    .or_else(|| kneepoint_planner::search_lower_bound(&o.outcome, top, bound)),
                ran: true,
                point: at,
                curve: curve(&o.summaries),
                levels: levels(
                    &o.summaries,
                    &o.history.iter().map(|r| Some(r.pass)).collect::<Vec<_>>(),
                ),
                interrupted: o.interrupted,
            })
        }
        CandidateRun::Sweep(s) => {
            let o = s.run(cancel).await?;
            let at = o
                .zone
                .ideal_balance
                .and_then(|c| o.summaries.iter().find(|s| s.concurrency == c))
                .map(point);
            let highest = o.summaries.iter().map(|s| s.concurrency).max();
            // a client-limited level counts against the ranking when the operating point rests
            // on it: at or below the ideal balance, or the first level above it
            let ideal = o.zone.ideal_balance.unwrap_or(0);
            let next_above = o
                .summaries
                .iter()
                .map(|s| s.concurrency)
                .filter(|c| *c > ideal)
                .min();
            let limited = o
                .summaries
                .iter()
                .filter(|s| s.concurrency <= ideal || Some(s.concurrency) == next_above)
                .find_map(client_limited);
            Ok(Measured {
                reason: at.is_none().then(|| unmet(&o.zone.summary, o.interrupted)),
                lower_bound: kneepoint_planner::sweep_lower_bound(&o.zone, highest, bound)
                    .or(limited),
                ran: true,
                point: at,
                curve: curve(&o.summaries),
                levels: levels(
                    &o.summaries,
                    &o.rows.iter().map(|r| r.meets_slas).collect::<Vec<_>>(),
                ),
                interrupted: o.interrupted,
            })
        }
    }
}

/// The record of candidate `c`'s launch that failed to start after `up_s` seconds (taking it
/// down included, which the source does before it returns the error).
fn failed_launch(c: &CandidateSpec, up_s: f64) -> DeploymentRecord {
    let instance_hours = up_s / 3600.0 * f64::from(c.instance_count);
    DeploymentRecord {
        recipe: None,
        launch_s: None,
        up_s,
        teardown_s: 0.0,
        instance_hours,
        benchmark_cost: instance_hours * c.price_per_instance_hour,
        teardown_error: None,
    }
}

/// Prepares (launches) candidate `c` in `dir`, measures it and always takes down what was
/// launched for it, whatever the measurement's outcome. `None`: interrupted before its run
/// started. A candidate that cannot be prepared is reported as not measured (with the
/// source's reason) and the recommendation goes on; when the source launches it
/// ([`CandidateSource::launches`]), with the record of what its failed launch spent.
/// `screen`: the run made coarse ([`CandidateRun::screening`]); the answer's `bool` says
/// whether what ran is the full measurement all the same (a sweep), or there is nothing more
/// to learn from another launch (it could not be prepared).
pub(crate) async fn measure_candidate(
    source: &dyn CandidateSource,
    observer: &dyn Observer,
    c: &CandidateSpec,
    dir: &Path,
    screen: bool,
    cancel: &CancelToken,
) -> Result<Option<(Measured, Option<DeploymentRecord>, bool)>, Error> {
    let started = Instant::now();
    let prepared = match source.prepare(c, dir, cancel).await {
        Ok(p) => p,
        Err(e) if cancel.is_cancelled() => {
            observer.warning(&format!("candidate {}: interrupted ({e})", c.name));
            return Ok(None);
        }
        Err(e) => {
            observer.warning(&format!("candidate {} is not measured: {e}", c.name));
            let m = Measured::unmeasured(format!("{NOT_MEASURED}{e}"));
            // A launch that failed kept its instances up until it failed: spent all the same.
            let record = source
                .launches(c)
                .then(|| failed_launch(c, started.elapsed().as_secs_f64()));
            return Ok(Some((m, record, true)));
        }
    };
    let mut deployment = prepared.deployment;
    let launch_s = deployment
        .as_ref()
        .and_then(|d| d.launch_time())
        .map(|t| t.as_secs_f64());
    let recipe = deployment.as_ref().and_then(|d| d.recipe());
    let full = !screen || prepared.run.screens_fully();
    let run = if screen {
        prepared.run.screening()
    } else {
        prepared.run
    };
    let mut measured = measure(run, c.max_concurrency, cancel).await;
    let exited = match deployment.as_mut() {
        Some(d) => d.exited().await,
        None => None,
    };
    if let (Some(why), Ok(m)) = (&exited, measured.as_mut()) {
        let last = m.curve.last().map(|p| p.concurrency);
        let reason = format!(
            "{}{}: {why}",
            SERVER_EXITED,
            last.map(|c| format!(" (by the end of concurrency {c})"))
                .unwrap_or_default()
        );
        observer.warning(&format!("candidate {} is not ranked: {reason}", c.name));
        m.point = None;
        m.lower_bound = None;
        // Not on the Pareto front either: the levels before the exit are not the server's
        // behaviour under load.
        m.levels.clear();
        m.reason = Some(reason);
    }
    let record = match deployment.as_mut() {
        None => None,
        Some(d) => {
            let down = Instant::now();
            let teardown_error = match d.teardown().await {
                Ok(()) => None,
                Err(e) => {
                    observer.warning(&format!(
                        "candidate {}: taking it down failed ({e}); it may still be running: `kneepoint cleanup` finds what kneepoint left",
                        c.name
                    ));
                    Some(e.to_string())
                }
            };
            let up_s = started.elapsed().as_secs_f64();
            let instance_hours = up_s / 3600.0 * f64::from(c.instance_count);
            Some(DeploymentRecord {
                recipe,
                launch_s,
                up_s,
                teardown_s: down.elapsed().as_secs_f64(),
                instance_hours,
                benchmark_cost: instance_hours * c.price_per_instance_hour,
                teardown_error,
            })
        }
    };
    let m = measured.map_err(|e| Error::Measuring {
        name: c.name.clone(),
        source: Box::new(e),
    })?;
    Ok(Some((m, record, full)))
}

#[cfg(test)]
mod tests {
    /// Issue 57, item 17: an interrupted candidate's reason read as a verdict on the server
    /// ("more than 5 % of requests failed"); it now says first that the run was interrupted.
    #[test]
    fn an_interrupted_run_says_so_before_what_it_lacks() {
        let why = super::unmet(
            "no level is usable: fewer than 10 successful requests",
            true,
        );
        assert!(
            why.starts_with("interrupted before an operating point was established ("),
            "{why}"
        );
        assert!(why.contains("fewer than 10"), "{why}");
        assert_eq!(
            super::unmet("no level meets the SLAs", false),
            "no level meets the SLAs"
        );
    }
}
