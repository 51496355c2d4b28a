//! The async driver of the planner's search: the planner decides, the caller measures.

use std::future::Future;

use kneepoint_planner::{Measurement, Outcome, Probe, SearchPlanner};

/// Runs `search` to the end: for each probe it asks `measure` (which typically runs a level
/// with [`crate::run_level`] and summarises it), feeds the result back, then calls `after`
/// (to report progress or save the history between probes).
pub async fn drive_search<F, Fut, E, A>(
    search: &mut SearchPlanner,
    mut measure: F,
    mut after: A,
) -> Result<Outcome, E>
where
    F: FnMut(Probe) -> Fut,
    Fut: Future<Output = Result<Measurement, E>>,
    E: From<kneepoint_planner::Error>,
    A: FnMut(&SearchPlanner) -> Result<(), E>,
{
    while let Some(probe) = search.next_probe() {
        let m = measure(probe).await?;
        search.observe(probe.concurrency, &m)?;
        after(search)?;
    }
    Ok(search.outcome())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_planner::{SearchConfig, Sla};

    #[tokio::test]
    async fn drives_to_completion_and_reports_between_probes() {
        let mut s =
            SearchPlanner::new(SearchConfig::new(vec![Sla::e2e_ms(1000.0).unwrap()])).unwrap();
        let mut seen = 0;
        let outcome = drive_search(
            &mut s,
            |p: Probe| async move {
                let latency = f64::from(p.concurrency) * 10.0; // crosses 1000 ms at 100
                Ok::<_, kneepoint_planner::Error>(Measurement::new(1.0).with(
                    kneepoint_planner::Metric::RequestLatency,
                    kneepoint_planner::Stat::P99,
                    latency,
                ))
            },
            |s: &SearchPlanner| {
                seen += 1;
                assert_eq!(s.history().len(), seen);
                Ok(())
            },
        )
        .await
        .unwrap();
        let answer = outcome.feasible_max.unwrap();
        assert!((95..=100).contains(&answer), "{answer}");
        assert_eq!(seen as u32, outcome.probes);
    }
}
