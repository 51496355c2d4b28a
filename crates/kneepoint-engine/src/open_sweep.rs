//! An open-loop sweep: one level per request rate, in `request_rate_<R>/` (or one trace replay
//! in `trace_replay_x<F>/`). The knee and the operating zone are found over closed-loop
//! concurrency levels, so they are not computed here; each level reports latency from the
//! actual and from the intended start and its schedule lag.

use kneepoint_core::folder;
use kneepoint_planner::{OperatingZone, Sla};
use kneepoint_report::schema::{write_document, LevelRow, SweepSummary, SCHEMA_VERSION};
use kneepoint_runner::CancelToken;

use crate::sweep_doc::{level_row, open_loop_zone, SweepReport};
use crate::{Bench, Error};

fn write(
    bench: &Bench,
    complete: bool,
    interrupted: bool,
    rates: &[f64],
    slas: &[Sla],
    rows: &[LevelRow],
    zone: &OperatingZone,
) -> Result<(), Error> {
    let doc = SweepSummary {
        schema_version: SCHEMA_VERSION,
        kneepoint_version: env!("CARGO_PKG_VERSION").to_owned(),
        complete,
        interrupted,
        load: Some("open_loop".into()),
        settings: bench.description.clone(),
        levels_planned: None,
        pareto: None,
        request_rates: Some(rates.to_vec()),
        slas: slas.to_vec(),
        levels: rows.to_vec(),
        knee: None,
        knee_explanation: None,
        zone: zone.clone(),
        peak: None,
        fleet: None,
    };
    write_document(&bench.artifact_dir.join(folder::SWEEP_SUMMARY), &doc)?;
    Ok(())
}

pub(crate) async fn run(
    mut bench: Bench,
    slas: &[Sla],
    cancel: &CancelToken,
) -> Result<SweepReport, Error> {
    let Some(open) = bench.settings.open_loop.clone() else {
        return Err(Error::invalid(
            "an open-loop sweep needs open-loop settings",
        ));
    };
    let dir = bench.artifact_dir.clone();
    let cap = open.max_in_flight.unwrap_or(0);
    let request_count = bench.settings.request_count;
    let (mut rows, mut summaries, mut sent, mut rates) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let zone = open_loop_zone();
    // A trace replay is one level at the trace's own times (its rate shows as 0 in the table).
    let levels: Vec<(String, String, Option<f64>)> = match open.replay_speedup {
        Some(f) => vec![(folder::trace_replay_dir(f), format!("trace x{f}"), None)],
        None => open
            .rates
            .iter()
            .map(|&r| {
                (
                    folder::request_rate_dir(r),
                    format!("{r} requests/s"),
                    Some(r),
                )
            })
            .collect(),
    };
    for (name, label, rate) in levels {
        bench.set_rate(rate);
        let (summary, cancelled, runs) = bench
            .run_level(&dir.join(&name), cap, request_count, &label, cancel)
            .await?;
        if let Some(r) = &runs {
            bench
                .observer
                .note(&format!("{label}: {} runs; {}", r.completed, r.stop_reason));
        }
        rows.push(level_row(&summary, name, slas));
        sent.push(summary.request_count);
        summaries.push(summary);
        rates.push(rate.unwrap_or(0.0));
        write(
            &bench,
            false,
            cancel.is_cancelled(),
            &rates,
            slas,
            &rows,
            &zone,
        )?;
        if cancelled {
            break;
        }
    }
    let interrupted = cancel.is_cancelled();
    write(
        &bench,
        !interrupted,
        interrupted,
        &rates,
        slas,
        &rows,
        &zone,
    )?;
    bench.log.info(&format!(
        "open-loop sweep {} over {} request rate(s): {}",
        if interrupted { "interrupted" } else { "done" },
        rates.len(),
        zone.summary
    ));
    crate::render::render_quietly(&dir, bench.observer.as_ref());
    Ok(SweepReport {
        rows,
        summaries,
        zone,
        fleet: None,
        artifact_dir: dir,
        sent,
        interrupted,
        request_rates: rates,
        extended: Vec::new(),
        knee_explanation: None,
        pareto: None,
    })
}
