//! What a sweep leaves: its report, each level's row, the knee and the zone concluded from
//! them, and `sweep_summary.json`. The sweep writes it as it goes; `report` writes it again
//! from a saved folder.

use kneepoint_core::{folder, Metric, Stat};
use std::path::{Path, PathBuf};

use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{
    check_all, explain_knee, fleet_size, operating_zone, pass_probability, zone_intervals,
    FleetPlan, InstanceCapacity, KneeEstimate, KneeExplanation, KneeRule, LevelPoint, Measurement,
    OperatingZone, ParetoBasis, ParetoFront, ParetoPoint, PeakTraffic, Sla, ZonePoint,
};
use kneepoint_report::schema::{write_document, LevelRow, SweepSummary, SCHEMA_VERSION};
use serde_json::Value;

use crate::Error;

/// What a sweep produced.
#[derive(Debug)]
#[non_exhaustive]
pub struct SweepReport {
    /// One row per level, in run order.
    pub rows: Vec<LevelRow>,
    /// Full summaries, in run order.
    pub summaries: Vec<LevelSummary>,
    /// Knee, SLA breaking point, ideal balance.
    pub zone: OperatingZone,
    /// Instances for the peak, at the ideal balance (when a peak was given).
    pub fleet: Option<FleetPlan>,
    /// Where the files are.
    pub artifact_dir: PathBuf,
    /// Requests recorded per level, in run order.
    pub sent: Vec<usize>,
    /// True when the sweep was interrupted (the last level is partial, later ones not run).
    pub interrupted: bool,
    /// Levels added beyond the plan because the capacity was not yet established (see
    /// [`SweepBuilder::extend_to`](crate::SweepBuilder::extend_to)).
    pub extended: Vec<u32>,
    /// Open loop: the request rate of each level, in run order (empty for a closed loop).
    pub request_rates: Vec<f64>,
    /// Why the knee is where it is, from the server's metrics (when they were scraped).
    pub knee_explanation: Option<KneeExplanation>,
    /// The Pareto front of per-user speed against output tokens/s per instance over the levels
    /// (`None` without output tokens, or in an open loop).
    pub pareto: Option<ParetoFront>,
}

/// The Pareto front over a closed-loop sweep's levels (per instance; every level eligible, its
/// SLA verdict kept for the plot). Per-user speed is each level's median per-request speed
/// (streaming); a level without it puts every level on output tokens/s ÷ concurrency (see
/// [`kneepoint_planner::pareto_front`]). `None` when no level produced output tokens.
pub fn sweep_pareto(rows: &[LevelRow]) -> Option<ParetoFront> {
    let points = pareto_points(rows);
    if points.is_empty() {
        return None;
    }
    Some(kneepoint_planner::pareto_front(
        points,
        ParetoBasis::Instance,
        false,
    ))
}

/// Each level with output tokens on the per-user speed / throughput plane, with its SLA
/// verdict, client limit and spreads (a sweep's front, and a candidate's levels).
pub(crate) fn pareto_points(rows: &[LevelRow]) -> Vec<ParetoPoint> {
    rows.iter()
        .filter(|r| r.output_token_throughput > 0.0 && r.concurrency > 0)
        .map(|r| {
            let p = match r.output_token_throughput_per_user {
                Some(u) => ParetoPoint::new(r.concurrency, u, r.output_token_throughput),
                None => ParetoPoint::without_per_request(r.concurrency, r.output_token_throughput),
            }
            .meets_slas(r.meets_slas)
            .client_limited(r.client_limited.clone())
            .with_ttft(r.ttft_p50_ms);
            match (
                r.relative_se(Metric::OutputTokenThroughputPerUser, Stat::P50),
                r.relative_se(Metric::OutputTokenThroughput, Stat::Avg),
            ) {
                (Some(u), Some(t)) => p.with_spread(u, t),
                _ => p,
            }
        })
        .collect()
}

/// The knee's explanation from the rows' server metrics; `None` when no level was scraped.
pub fn knee_explanation(rows: &[LevelRow], zone: &OperatingZone) -> Option<KneeExplanation> {
    let servers: Vec<(u32, Option<kneepoint_core::ServerSummary>)> = rows
        .iter()
        .map(|r| (r.concurrency, r.server_summary()))
        .collect();
    if servers.iter().all(|(_, s)| s.is_none()) {
        return None;
    }
    let refs: Vec<(u32, Option<&kneepoint_core::ServerSummary>)> =
        servers.iter().map(|(c, s)| (*c, s.as_ref())).collect();
    Some(explain_knee(&refs, zone.knee.knee))
}

/// Where a sweep or search is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunState {
    Running,
    Complete,
    Interrupted,
}

impl RunState {
    pub(crate) fn of(doc: &Value) -> Self {
        if doc.get("interrupted").and_then(Value::as_bool) == Some(true) {
            RunState::Interrupted
        } else if doc.get("complete").and_then(Value::as_bool) == Some(true) {
            RunState::Complete
        } else {
            RunState::Running
        }
    }
}

/// The row of one level, judged against `slas`.
pub fn level_row(s: &LevelSummary, dir: String, slas: &[Sla]) -> LevelRow {
    let checks = check_all(slas, &Measurement::from(s));
    let mut row = LevelRow::new(
        s,
        dir,
        (!checks.is_empty()).then(|| checks.iter().all(|c| c.holds)),
        checks.iter().find(|c| !c.holds).map(|c| c.sla.clone()),
    );
    row.sla_pass_probability = (!checks.is_empty()).then(|| pass_probability(slas, &checks));
    row
}

fn zone_of(rows: &[LevelRow]) -> Result<OperatingZone, Error> {
    let points: Vec<ZonePoint> = rows
        .iter()
        .map(|r| {
            let point = LevelPoint::new(
                r.concurrency,
                crate::work_throughput(r.output_token_throughput, r.request_throughput),
                r.e2e_p99_ms.unwrap_or(0.0),
            );
            // Requests the run cancelled (an interrupt, a timed level's end) are not failures.
            let p = ZonePoint::of_counts(
                point,
                r.meets_slas,
                r.request_count,
                r.error_count,
                r.cancelled_count,
            )
            .client_limited(r.client_limited.is_some());
            let throughput = if r.output_token_throughput > 0.0 {
                Metric::OutputTokenThroughput
            } else {
                Metric::RequestThroughput
            };
            match (
                r.relative_se(throughput, Stat::Avg),
                r.relative_se(Metric::RequestLatency, Stat::P99),
            ) {
                (Some(t), Some(l)) => p.with_uncertainty(t, l, r.sla_pass_probability),
                _ => p,
            }
        })
        .collect();
    let rule = KneeRule::default();
    let mut zone = operating_zone(&points, &rule)?;
    zone.intervals = zone_intervals(&points, &rule, &zone);
    Ok(zone)
}

/// The 5th and 95th percentiles of the instances needed over the zone's redraws: each redraw's
/// ideal balance, its throughput scaled as redrawn.
fn fleet_interval(
    rows: &[LevelRow],
    zone: &OperatingZone,
    peak: PeakTraffic,
    headroom: f64,
) -> Option<[u32; 2]> {
    let draws = &zone.intervals.as_ref()?.samples;
    let mut n: Vec<u32> = draws
        .iter()
        .filter_map(|d| {
            let r = rows
                .iter()
                .find(|r| Some(r.concurrency) == d.ideal_balance)?;
            let capacity = InstanceCapacity {
                concurrency: r.concurrency,
                request_throughput: r.request_throughput * d.throughput_factor,
                output_token_throughput: r.output_token_throughput * d.throughput_factor,
            };
            fleet_size(peak, &capacity, headroom)
                .ok()
                .map(|f| f.instances)
        })
        .collect();
    n.sort_unstable();
    let at = |q: f64| {
        n.get(((n.len().checked_sub(1)?) as f64 * q).round() as usize)
            .copied()
    };
    Some([at(0.05)?, at(0.95)?])
}

/// The rows, operating zone and fleet of finished levels (summary and folder name each): the
/// same computation for a live sweep and for re-rendering a saved one.
pub fn conclude(
    levels: &[(&LevelSummary, String)],
    slas: &[Sla],
    peak: Option<PeakTraffic>,
    headroom: f64,
) -> Result<(Vec<LevelRow>, OperatingZone, Option<FleetPlan>), Error> {
    let mut rows: Vec<LevelRow> = levels
        .iter()
        .map(|(s, dir)| level_row(s, dir.clone(), slas))
        .collect();
    let zone = zone_of(&rows)?;
    for r in &mut rows {
        r.is_knee = zone.knee.knee == Some(r.concurrency);
    }
    // The fleet is sized at the ideal balance, the level to operate at.
    let at_ideal = rows
        .iter()
        .find(|r| Some(r.concurrency) == zone.ideal_balance);
    let fleet = match (peak, at_ideal) {
        (Some(peak), Some(r)) => {
            let capacity = InstanceCapacity {
                concurrency: r.concurrency,
                request_throughput: r.request_throughput,
                output_token_throughput: r.output_token_throughput,
            };
            let mut plan = fleet_size(peak, &capacity, headroom)?;
            plan.instances_interval = fleet_interval(&rows, &zone, peak, headroom);
            Some(plan)
        }
        _ => None,
    };
    Ok((rows, zone, fleet))
}

/// What `sweep_summary.json` is made of, apart from the levels.
pub(crate) struct SweepDoc {
    pub(crate) settings: Value,
    pub(crate) levels_planned: Value,
    pub(crate) slas: Vec<Sla>,
    pub(crate) peak: Option<PeakTraffic>,
}

pub(crate) fn write_sweep_summary(
    dir: &Path,
    doc: &SweepDoc,
    rows: Vec<LevelRow>,
    zone: &OperatingZone,
    fleet: Option<&FleetPlan>,
    state: RunState,
) -> Result<(Option<KneeExplanation>, Option<ParetoFront>), Error> {
    let explanation = knee_explanation(&rows, zone);
    let pareto = sweep_pareto(&rows);
    let summary = SweepSummary {
        schema_version: SCHEMA_VERSION,
        kneepoint_version: env!("CARGO_PKG_VERSION").to_owned(),
        complete: state == RunState::Complete,
        interrupted: state == RunState::Interrupted,
        load: None,
        settings: doc.settings.clone(),
        levels_planned: Some(doc.levels_planned.clone()),
        request_rates: None,
        slas: doc.slas.clone(),
        knee_explanation: explanation.clone(),
        levels: rows,
        knee: Some(zone.knee.clone()),
        zone: zone.clone(),
        peak: doc.peak,
        fleet: fleet.cloned(),
        pareto: pareto.clone(),
    };
    write_document(&dir.join(folder::SWEEP_SUMMARY), &summary)?;
    Ok((explanation, pareto))
}

/// The zone of an open-loop sweep: request rates have no knee.
pub(crate) fn open_loop_zone() -> OperatingZone {
    OperatingZone {
        knee: KneeEstimate {
            knee: None,
            reason: "open-loop levels are request rates; the knee is found over closed-loop concurrency levels".into(),
            steps: Vec::new(),
        },
        sla_breaking_point: None,
        error_breaking_point: None,
        ideal_balance: None,
        safe_max: None,
        summary: "open loop: compare latency from the intended start and the schedule lag across rates".into(),
        intervals: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use kneepoint_core::{ErrorRecord, Phase, RequestRecord};
    use kneepoint_metrics::GoodputSlo;

    /// Issue 57, item 17: a level cut short by Ctrl-C (5 requests answered, 4 cancelled in
    /// flight) concluded "no level is usable: more than 5 % of requests failed at every level"
    /// — the cancelled requests were counted as failures. They are not: the level is too thin
    /// to use, and the zone says that.
    #[test]
    fn a_level_cut_short_is_not_read_as_failing() {
        let mut records: Vec<RequestRecord> = (0..5u64)
            .map(|i| {
                let mut r = RequestRecord::new(i, Phase::Profiling);
                r.start_ns = i * 10;
                r.chunk_ns = vec![i * 10 + 5];
                r.end_ns = i * 10 + 8;
                r.output_tokens = Some(1);
                r
            })
            .collect();
        for i in 5..9u64 {
            let mut r = RequestRecord::new(i, Phase::Profiling);
            r.start_ns = 40;
            r.end_ns = 60;
            r.error = Some(ErrorRecord::from(&kneepoint_core::Error::Cancelled));
            records.push(r);
        }
        let s = LevelSummary::from_records(4, &records, &GoodputSlo::default());
        assert_eq!((s.ok_count, s.error_count), (5, 4));
        let (rows, zone, _) =
            conclude(&[(&s, String::from("concurrency_4"))], &[], None, 1.0).unwrap();
        assert_eq!(rows[0].cancelled_count, 4);
        assert_eq!(zone.error_breaking_point, None, "{zone:?}");
        assert!(
            !zone.summary.contains("requests failed"),
            "{}",
            zone.summary
        );
        assert!(
            zone.summary.contains("fewer than 10 successful requests"),
            "{}",
            zone.summary
        );
    }
}
