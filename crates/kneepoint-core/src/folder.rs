//! The layout of an artifact folder: the name of every file and folder a run writes and
//! `report`, `merge`, `compare` and `archive` read, in one table, so that writers and readers
//! cannot drift apart. The shapes of the documents are in `kneepoint-report`'s `schema`; the
//! per-request lines and the AIPerf-style exports in `kneepoint-metrics`' `export`.
//!
//! ```text
//! <run>/                      sweep_summary.json | search_history.json | length_sweep.json
//!                             | recommendations.json
//!   report.html  plots/  logs/kneepoint.log
//!   concurrency_<N>/ | probe_<II>_concurrency_<N>/ | request_rate_<R>/ | trace_replay_x<F>/
//!   | isl_<I>_osl_<O>/
//!     profile_export.jsonl[.zst]  profile_export_aiperf.json  profile_export_aiperf.csv
//!     benchmark_summary.txt  inputs.json  [outputs.json  route_summary.json  turn_summary.json
//!     server_metrics_export.{json,csv,jsonl}  profile_runs/<run>/  aggregate/]
//!   candidate_<name>/         (a recommendation: one run folder per candidate)
//! ```

/// A sweep's summary document (levels, knee, zone, fleet).
pub const SWEEP_SUMMARY: &str = "sweep_summary.json";
/// A search's history document (probes, boundary, cost).
pub const SEARCH_HISTORY: &str = "search_history.json";
/// A length sweep's document (lengths, TTFT and ITL against length, the prefill fit).
pub const LENGTH_SWEEP: &str = "length_sweep.json";
/// A recommendation's ranking document.
pub const RECOMMENDATIONS: &str = "recommendations.json";
/// The self-contained page.
pub const REPORT_HTML: &str = "report.html";
/// The SVG plots' folder.
pub const PLOTS_DIR: &str = "plots";
/// The run log, relative to the run's folder.
pub const LOG_FILE: &str = "logs/kneepoint.log";

/// A level's per-request records, one JSON line each.
pub const RECORDS: &str = "profile_export.jsonl";
/// The same records, zstd-compressed (`--records-zstd`).
pub const RECORDS_ZSTD: &str = "profile_export.jsonl.zst";
/// A level's aggregates, AIPerf's JSON shape.
pub const AIPERF_JSON: &str = "profile_export_aiperf.json";
/// A level's aggregates, AIPerf's CSV shape.
pub const AIPERF_CSV: &str = "profile_export_aiperf.csv";
/// A level's aggregates per time slice, AIPerf's JSON shape (`--slice-s`).
pub const TIMESLICES_JSON: &str = "profile_export_aiperf_timeslices.json";
/// A level's aggregates per time slice, AIPerf's long CSV shape (`--slice-s`).
pub const TIMESLICES_CSV: &str = "profile_export_aiperf_timeslices.csv";
/// A level's summary as text.
pub const SUMMARY_TEXT: &str = "benchmark_summary.txt";
/// The payloads a level sent.
pub const INPUTS: &str = "inputs.json";
/// The text each response generated (`--export-outputs-json`).
pub const OUTPUTS: &str = "outputs.json";
/// A level's figures per model and URL (several routes).
pub const ROUTE_SUMMARY: &str = "route_summary.json";
/// A level's figures per conversation turn (multi-turn workloads).
pub const TURN_SUMMARY: &str = "turn_summary.json";
/// The server's metrics over a level, AIPerf's JSON shape.
pub const SERVER_METRICS_JSON: &str = "server_metrics_export.json";
/// The server's metrics over a level, as CSV.
pub const SERVER_METRICS_CSV: &str = "server_metrics_export.csv";
/// Every scrape of a level, one JSON line each.
pub const SERVER_METRICS_JSONL: &str = "server_metrics_export.jsonl";
/// Repeated runs of a level, one folder each.
pub const RUNS_DIR: &str = "profile_runs";
/// The statistics across a level's repeated runs.
pub const AGGREGATE_DIR: &str = "aggregate";
/// The aggregate across runs, JSON.
pub const AGGREGATE_JSON: &str = "profile_export_aiperf_aggregate.json";
/// The aggregate across runs, CSV.
pub const AGGREGATE_CSV: &str = "profile_export_aiperf_aggregate.csv";

/// The prefixes of the level and candidate folders a run writes.
pub const RUN_DIR_PREFIXES: [&str; 6] = [
    "concurrency_",
    "isl_",
    "probe_",
    "request_rate_",
    "trace_replay_",
    "candidate_",
];

/// The folder of a closed-loop level: `concurrency_<N>`.
pub fn concurrency_dir(concurrency: u32) -> String {
    format!("concurrency_{concurrency}")
}

/// The folder of a search's probe: `probe_<II>_concurrency_<N>`.
pub fn probe_dir(iteration: u32, concurrency: u32) -> String {
    format!("probe_{iteration:02}_concurrency_{concurrency}")
}

/// The folder of an open-loop level: `request_rate_<R>`.
pub fn request_rate_dir(rate: f64) -> String {
    format!("request_rate_{rate}")
}

/// The folder of a trace replay: `trace_replay_x<F>`.
pub fn trace_replay_dir(speedup: f64) -> String {
    format!("trace_replay_x{speedup}")
}

/// The folder of a recommendation's candidate: `candidate_<name>` (`name` already safe).
pub fn candidate_dir(name: &str) -> String {
    format!("candidate_{name}")
}

/// Whether an entry of a run's folder is something a kneepoint run writes (a new run may
/// replace exactly these; `logs/` may hold the user's files and is judged by [`LOG_FILE`]).
pub fn is_written_by_a_run(name: &str, is_dir: bool) -> bool {
    if is_dir {
        name == PLOTS_DIR
            || name == AGGREGATE_DIR
            || RUN_DIR_PREFIXES.iter().any(|p| name.starts_with(p))
    } else {
        [
            SWEEP_SUMMARY,
            SEARCH_HISTORY,
            LENGTH_SWEEP,
            RECOMMENDATIONS,
            REPORT_HTML,
        ]
        .contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_keep_the_shapes_saved_runs_have() {
        assert_eq!(concurrency_dir(64), "concurrency_64");
        assert_eq!(probe_dir(3, 256), "probe_03_concurrency_256");
        assert_eq!(request_rate_dir(2.5), "request_rate_2.5");
        assert_eq!(request_rate_dir(10.0), "request_rate_10");
        assert_eq!(trace_replay_dir(2.0), "trace_replay_x2");
        assert!(is_written_by_a_run("probe_01_concurrency_1", true));
        assert!(is_written_by_a_run(SWEEP_SUMMARY, false));
        assert!(!is_written_by_a_run("notes.txt", false));
        assert!(!is_written_by_a_run("concurrency_1", false));
    }
}
