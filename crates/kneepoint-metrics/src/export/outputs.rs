//! `outputs.json` (opt-in, `--export-outputs-json`): each request's generated text, for
//! spot checks of correctness, in AIPerf's shape (`schema_version`, `data` for the measured
//! requests, `warmup` for the warm-up ones), sorted by conversation position.

use std::path::Path;

use kneepoint_core::{Phase, RequestRecord};
use serde_json::{json, Value};

use crate::request_metrics::RequestMetrics;
use crate::Error;

/// The schema version of the file, AIPerf's.
pub const OUTPUTS_SCHEMA_VERSION: &str = "1.1";

fn entry(r: &RequestRecord) -> Value {
    let abs = |t: u64| r.origin_unix_ns.saturating_add(t);
    let m = RequestMetrics::of(r);
    json!({
        "session_num": r.request_id,
        "conversation_id": r.conversation_id,
        "turn_index": r.turn_index.unwrap_or(0),
        "x_request_id": r.x_request_id.clone().unwrap_or_else(|| r.request_id.to_string()),
        "benchmark_phase": match r.phase { Phase::Warmup => "warmup", Phase::Profiling => "profiling" },
        "request_start_ns": abs(r.start_ns),
        "request_end_ns": abs(r.end_ns),
        "metrics": {
            "time_to_first_token": m.ttft_ms,
            "request_latency": m.request_latency_ms,
            "output_sequence_length": m.osl,
            "input_sequence_length": m.isl,
            "reasoning_token_count": m.reasoning_tokens,
        },
        "error": r.error.as_ref().map(|e| e.message.clone()),
        "response_text": r.response_text,
        "reasoning_text": r.reasoning_text,
    })
}

fn sorted(records: &[RequestRecord]) -> Vec<Value> {
    let mut v: Vec<&RequestRecord> = records.iter().collect();
    v.sort_by_key(|r| r.request_id);
    v.into_iter().map(entry).collect()
}

/// The document `outputs.json` holds.
pub fn outputs_json(records: &[RequestRecord], warmup: &[RequestRecord]) -> Value {
    json!({
        "schema_version": OUTPUTS_SCHEMA_VERSION,
        "data": sorted(records),
        "warmup": sorted(warmup),
    })
}

/// Writes `outputs.json`.
pub fn write_outputs_json(
    path: &Path,
    records: &[RequestRecord],
    warmup: &[RequestRecord],
) -> Result<(), Error> {
    super::write_json(path, "outputs", &outputs_json(records, warmup))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_reasoning_per_request_in_id_order() {
        let mut a = RequestRecord::new(2, Phase::Profiling);
        a.response_text = Some("the answer".into());
        a.reasoning_text = Some("hmm".into());
        a.chunk_ns = vec![5_000_000];
        a.end_ns = 6_000_000;
        let mut b = RequestRecord::new(1, Phase::Profiling);
        b.response_text = Some(String::new());
        let w = RequestRecord::new(0, Phase::Warmup);
        let doc = outputs_json(&[a, b], &[w]);
        assert_eq!(doc["schema_version"], "1.1");
        assert_eq!(doc["data"][0]["session_num"], 1);
        assert_eq!(doc["data"][1]["response_text"], "the answer");
        assert_eq!(doc["data"][1]["reasoning_text"], "hmm");
        assert_eq!(doc["data"][1]["metrics"]["time_to_first_token"], 5.0);
        assert_eq!(doc["warmup"][0]["benchmark_phase"], "warmup");
        assert!(doc["warmup"][0]["response_text"].is_null());
    }
}
