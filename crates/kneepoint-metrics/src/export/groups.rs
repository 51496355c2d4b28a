//! Records grouped by a key (turn position, route), each group summarised like a level: the
//! per-group files (`turn_summary.json`, `route_summary.json`) share this.

use std::collections::BTreeMap;

use kneepoint_core::RequestRecord;
use serde_json::{json, Value};

use crate::summary::{GoodputSlo, LevelSummary};

/// The records grouped by `key` (records without one left out), each group summarised like a
/// level, in key order.
pub fn summaries_by<K: Ord>(
    concurrency: u32,
    records: &[RequestRecord],
    key: impl Fn(&RequestRecord) -> Option<K>,
) -> Vec<(K, Vec<&RequestRecord>, LevelSummary)> {
    let mut groups: BTreeMap<K, Vec<&RequestRecord>> = BTreeMap::new();
    for r in records {
        if let Some(k) = key(r) {
            groups.entry(k).or_default().push(r);
        }
    }
    groups
        .into_iter()
        .map(|(k, rs)| {
            let owned: Vec<RequestRecord> = rs.iter().map(|r| (*r).clone()).collect();
            let summary = LevelSummary::from_records(concurrency, &owned, &GoodputSlo::default());
            (k, rs, summary)
        })
        .collect()
}

/// The fields every group's entry shares: counts, error rate, throughputs and the metrics.
pub(crate) fn group_entry(s: &LevelSummary) -> serde_json::Map<String, Value> {
    let v = json!({
        "request_count": s.request_count,
        "error_count": s.error_count,
        "error_rate": s.error_rate,
        "request_throughput": s.request_throughput,
        "output_token_throughput": s.output_token_throughput,
        "metrics": s.metrics,
    });
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}
