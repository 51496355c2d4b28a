//! `inputs.json`: the payloads sent, AIPerf's `{"data": [{"session_id", "payloads"}]}` shape.

use std::path::Path;

use serde::Serialize;

use crate::export::write_atomic;
use crate::Error;

/// One request's payload.
#[derive(Debug, Clone, Serialize)]
pub struct InputEntry {
    /// The request id in decimal (matches `session_num` in the JSONL; `x_request_id` there is
    /// the id the server was sent, a UUID that differs between runs by design).
    pub session_id: String,
    /// The body sent (one entry: single-turn).
    pub payloads: Vec<serde_json::Value>,
}

/// Writes `inputs.json`.
pub fn write_inputs_json(path: &Path, entries: &[InputEntry]) -> Result<(), Error> {
    #[derive(Serialize)]
    struct File<'a> {
        data: &'a [InputEntry],
    }
    let bytes =
        serde_json::to_vec_pretty(&File { data: entries }).map_err(|source| Error::Json {
            what: "inputs",
            source,
        })?;
    write_atomic(path, &bytes)
}
