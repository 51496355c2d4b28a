//! Files people and tools already read: AIPerf-style aggregates (JSON, CSV), per-request JSONL,
//! `inputs.json`, and a text summary. Every file is written whole to a temporary name and
//! renamed, except the JSONL, which is appended and flushed as each request finishes.

mod aggregate;
mod aiperf;
mod groups;
mod inputs;
mod jsonl;
mod level_files;
mod outputs;
mod read;
mod read_line;
mod record_line;
mod routes;
mod text;
mod time;
mod timeslices;
mod turns;
mod unlisted;

pub use aggregate::{aggregate_csv, aggregate_json, write_aggregate, AggregateInfo};
pub use aiperf::{
    aiperf_csv, aiperf_json, client_health_from_aiperf_json, goodput_slo_from_aiperf_json,
    server_summary_from_aiperf_json, steadiness_from_aiperf_json, write_aiperf_csv,
    write_aiperf_json, LevelInfo,
};
pub use groups::summaries_by;
pub use inputs::{
    render_input_entry, write_inputs_json, InputEntry, InputsWriter, INPUTS_NOTE_KEY,
};
pub use jsonl::{
    record_json, records_file_name, records_path, JsonlSink, RECORDS_FILE, RECORDS_FILE_ZSTD,
    ZSTD_FLUSH_EVERY,
};
pub use level_files::write_level_summary;
pub use outputs::{outputs_json, write_outputs_json, OUTPUTS_SCHEMA_VERSION};
pub use read::{read_jsonl, read_jsonl_each, record_from_json};
pub use routes::{route_summaries, route_summary_json, write_route_summary, RouteSummary};
pub use text::{summary_text, write_summary_text};
pub use time::{parse_rfc3339, rfc3339};
pub use timeslices::{timeslices_csv, timeslices_json, write_timeslices};
pub use turns::{turn_summaries, turn_summary_json, write_turn_summary, TurnSummary};
pub use unlisted::Unlisted;

use std::path::Path;

use crate::Error;

/// Writes `doc` as pretty JSON to `path` (atomically); `what` names it in an error.
pub(crate) fn write_json(
    path: &Path,
    what: &'static str,
    doc: &serde_json::Value,
) -> Result<(), Error> {
    let bytes = serde_json::to_vec_pretty(doc).map_err(|source| Error::Json { what, source })?;
    write_atomic(path, &bytes)
}

/// Writes `bytes` to `path` atomically (temporary file, then rename), with every registered
/// secret ([`kneepoint_core::secrets`]) scrubbed out: a summary can quote a server's message.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let bytes = kneepoint_core::secrets::scrub_bytes(bytes);
    let tmp = path.with_extension("tmp");
    let written = std::fs::write(&tmp, &*bytes)
        .map_err(Error::io(&tmp))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(Error::io(path)));
    if written.is_err() {
        // A full disk must not leave a half-written temporary file behind.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
