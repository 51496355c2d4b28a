//! `turn_summary.json`: a multi-turn level's aggregates per turn position, beside the level's
//! own (every turn together). The prompt grows turn by turn (the conversation so far is sent
//! again), so latency by turn shows what the history costs and what prefix caching saves.

use std::path::Path;

use kneepoint_core::RequestRecord;
use serde_json::{json, Value};

use super::groups::{group_entry, summaries_by};
use crate::summary::LevelSummary;
use crate::Error;

/// One turn position's aggregates.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnSummary {
    /// The 0-based turn position.
    pub turn_index: u32,
    /// Mean prompt tokens repeating the conversation so far.
    pub history_tokens_avg: Option<f64>,
    /// The level's aggregates over this turn's records only.
    pub summary: LevelSummary,
}

/// The aggregates of every turn position among `records` (those with a `turn_index`), in
/// turn order; empty when no record is a turn.
pub fn turn_summaries(concurrency: u32, records: &[RequestRecord]) -> Vec<TurnSummary> {
    summaries_by(concurrency, records, |r| r.turn_index)
        .into_iter()
        .map(|(turn_index, rs, summary)| {
            let history: Vec<f64> = rs
                .iter()
                .filter_map(|r| r.history_tokens.map(f64::from))
                .collect();
            TurnSummary {
                turn_index,
                history_tokens_avg: (!history.is_empty())
                    .then(|| history.iter().sum::<f64>() / history.len() as f64),
                summary,
            }
        })
        .collect()
}

/// The document `turn_summary.json` holds.
pub fn turn_summary_json(turns: &[TurnSummary]) -> Value {
    json!({
        "turns": turns.iter().map(|t| {
            let mut e = serde_json::Map::new();
            e.insert("turn_index".into(), json!(t.turn_index));
            e.insert("history_tokens_avg".into(), json!(t.history_tokens_avg));
            e.extend(group_entry(&t.summary));
            Value::Object(e)
        }).collect::<Vec<_>>(),
    })
}

/// Writes `turn_summary.json`.
pub fn write_turn_summary(path: &Path, turns: &[TurnSummary]) -> Result<(), Error> {
    super::write_json(path, "turn summary", &turn_summary_json(turns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::Phase;
    use kneepoint_core::{Metric, Stat};

    fn turn(id: u64, k: u32, ttft_ms: u64, history: u32) -> RequestRecord {
        let mut r = RequestRecord::new(id, Phase::Profiling);
        r.start_ns = 0;
        r.response_ns = Some(1);
        r.chunk_ns = vec![ttft_ms * 1_000_000, ttft_ms * 1_000_000 + 5_000_000];
        r.end_ns = ttft_ms * 1_000_000 + 5_000_000;
        r.output_tokens = Some(2);
        r.input_tokens = Some(10 + history);
        r.conversation_id = Some(format!("c{}", id / 10));
        r.turn_index = Some(k);
        r.history_tokens = Some(history);
        r
    }

    #[test]
    fn aggregates_per_turn_position() {
        let records: Vec<RequestRecord> = (0..4)
            .flat_map(|c| {
                (0..3).map(move |k| turn(c * 10 + k, k as u32, 10 + 20 * k, 15 * k as u32))
            })
            .collect();
        let turns = turn_summaries(8, &records);
        assert_eq!(turns.len(), 3);
        for (k, t) in turns.iter().enumerate() {
            assert_eq!(t.turn_index as usize, k);
            assert_eq!(t.summary.request_count, 4);
            assert_eq!(t.history_tokens_avg, Some(15.0 * k as f64));
            let ttft = t
                .summary
                .value(Metric::TimeToFirstToken, Stat::Avg)
                .unwrap();
            assert!((ttft - (10.0 + 20.0 * k as f64)).abs() < 1e-9, "{ttft}");
        }
        let doc = turn_summary_json(&turns);
        assert_eq!(doc["turns"][2]["turn_index"], 2);
        assert_eq!(doc["turns"][1]["history_tokens_avg"], 15.0);
        assert!(doc["turns"][0]["metrics"]["time_to_first_token"]["p95"].is_number());
        // single-turn records: no turns
        let mut single = turn(0, 0, 10, 0);
        single.turn_index = None;
        assert!(turn_summaries(1, &[single]).is_empty());
    }
}
