//! The server's view in a level's summary.

use kneepoint_core::ServerSummary;
use kneepoint_metrics::LevelSummary;

/// Adds what needs the client's side too (output tokens per joule of GPU energy) and attaches
/// the server summary to the level's.
pub(crate) fn attach(summary: &mut LevelSummary, server: Option<ServerSummary>) {
    let Some(mut server) = server else {
        return;
    };
    let tokens = summary.total_output_tokens as f64;
    let joules = server.get("gpu_energy", "total").or_else(|| {
        server
            .get("gpu_power", "avg")
            .map(|w| w * summary.benchmark_duration_s)
    });
    if let Some(j) = joules.filter(|j| *j > 0.0) {
        server.set("gpu_output_tokens_per_joule", "avg", tokens / j);
    }
    summary.server = Some(server);
}
