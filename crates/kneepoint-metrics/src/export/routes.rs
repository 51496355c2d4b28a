//! `route_summary.json`: a level's aggregates per model and endpoint, when the transport spread
//! its requests over several ([`kneepoint_core::Transport::route`]), beside the level's own
//! (every route together).

use std::path::Path;

use kneepoint_core::RequestRecord;
use serde_json::{json, Value};

use super::groups::{group_entry, summaries_by};
use crate::summary::LevelSummary;
use crate::Error;

/// One route's aggregates.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSummary {
    /// The model the requests were sent to.
    pub model: String,
    /// The endpoint they were sent to.
    pub url: String,
    /// The level's aggregates over this route's records only (throughput over the route's own
    /// span of time).
    pub summary: LevelSummary,
}

/// The aggregates of every (model, endpoint) among `records`; empty when none was routed.
pub fn route_summaries(concurrency: u32, records: &[RequestRecord]) -> Vec<RouteSummary> {
    summaries_by(concurrency, records, |r| {
        Some((r.model.clone()?, r.url.clone().unwrap_or_default()))
    })
    .into_iter()
    .map(|((model, url), _, summary)| RouteSummary {
        model,
        url,
        summary,
    })
    .collect()
}

/// The document `route_summary.json` holds.
pub fn route_summary_json(routes: &[RouteSummary]) -> Value {
    json!({
        "routes": routes.iter().map(|r| {
            let mut e = serde_json::Map::new();
            e.insert("model".into(), json!(r.model));
            e.insert("url".into(), json!(r.url));
            e.extend(group_entry(&r.summary));
            Value::Object(e)
        }).collect::<Vec<_>>(),
    })
}

/// Writes `route_summary.json`.
pub fn write_route_summary(path: &Path, routes: &[RouteSummary]) -> Result<(), Error> {
    super::write_json(path, "route summary", &route_summary_json(routes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::Phase;
    use kneepoint_core::{Metric, Stat};

    #[test]
    fn aggregates_per_model_and_endpoint() {
        let records: Vec<RequestRecord> = (0..9)
            .map(|i| {
                let mut r = RequestRecord::new(i, Phase::Profiling);
                r.chunk_ns = vec![(1 + i % 3) * 1_000_000];
                r.end_ns = 10_000_000;
                r.output_tokens = Some(1);
                r.model = Some(format!("m{}", i % 3));
                r.url = Some("http://a".into());
                r
            })
            .collect();
        let routes = route_summaries(4, &records);
        assert_eq!(routes.len(), 3);
        for (k, r) in routes.iter().enumerate() {
            assert_eq!(r.model, format!("m{k}"));
            assert_eq!(r.summary.request_count, 3);
            let ttft = r
                .summary
                .value(Metric::TimeToFirstToken, Stat::Avg)
                .unwrap();
            assert!((ttft - (1.0 + k as f64)).abs() < 1e-9);
        }
        let doc = route_summary_json(&routes);
        assert_eq!(doc["routes"][1]["model"], "m1");
        assert_eq!(doc["routes"][1]["request_count"], 3);
        assert!(route_summaries(4, &[RequestRecord::new(0, Phase::Profiling)]).is_empty());
    }
}
