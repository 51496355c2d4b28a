//! A sweep killed before it could write its summary (a second Ctrl-C, a SIGKILL): its level
//! folders and their records are intact, but `sweep_summary.json` is missing or does not list
//! the level that was running. Such a folder is read as an interrupted sweep of the levels
//! found on disk, so that `kneepoint report` rebuilds every summary from the records.

use std::path::Path;

use kneepoint_core::RequestRecord;
use kneepoint_metrics::export::LevelInfo;
use serde_json::{json, Value};

/// The `concurrency_N` folders under `root` that hold a records file, by concurrency.
pub(crate) fn level_dirs(root: &Path) -> Vec<(String, u32)> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<(String, u32)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let c: u32 = name.strip_prefix("concurrency_")?.parse().ok()?;
            kneepoint_metrics::export::records_path(&e.path())
                .is_file()
                .then_some((name, c))
        })
        .collect();
    out.sort_by_key(|(_, c)| *c);
    out
}

/// The `candidate_*` folders under `root` that hold a run of their own (a sweep's or a
/// search's summary, or level folders): a recommendation's candidates, when it was killed
/// before its summary. A folder of other runs is not a recommendation.
pub(crate) fn candidate_dirs(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix(CANDIDATE_PREFIX)?;
            let p = e.path();
            let holds_run = [
                kneepoint_core::folder::SWEEP_SUMMARY,
                kneepoint_core::folder::SEARCH_HISTORY,
            ]
            .iter()
            .any(|f| p.join(f).is_file())
                || !level_dirs(&p).is_empty();
            holds_run.then_some(name)
        })
        .collect();
    out.sort();
    out
}

/// How a recommendation names its candidates' folders (`kneepoint_core::folder::candidate_dir`).
const CANDIDATE_PREFIX: &str = "candidate_";

/// The summary document of a recommendation that wrote none: its candidates as found, the
/// run marked interrupted.
pub(crate) fn recommend_doc(root: &Path) -> Value {
    let candidates: Vec<Value> = candidate_dirs(root)
        .into_iter()
        .map(|dir| {
            let name = dir
                .strip_prefix(CANDIDATE_PREFIX)
                .unwrap_or(&dir)
                .to_owned();
            json!({ "name": name, "artifact_dir": dir })
        })
        .collect();
    json!({ "candidates": candidates, "interrupted": true })
}

/// The summary document of a sweep that wrote none: no SLAs, no peak, the settings the first
/// saved level carries (the levels found are added as a killed run's).
pub(crate) fn sweep_doc(root: &Path) -> Value {
    let settings = level_dirs(root)
        .iter()
        .find_map(|(dir, _)| {
            let path = root.join(dir).join(kneepoint_core::folder::AIPERF_JSON);
            let bytes =
                kneepoint_core::read_capped(&path, kneepoint_core::MAX_DOCUMENT_BYTES).ok()?;
            let doc: Value = serde_json::from_slice(&bytes).ok()?;
            let mut settings = doc.get("input_config")?.clone();
            settings.as_object_mut()?.remove("level");
            Some(settings)
        })
        .unwrap_or(Value::Null);
    json!({
        "settings": settings,
        "levels_planned": Value::Null,
        "slas": [],
        "peak": Value::Null,
        "levels": [],
    })
}

/// A level's times from its records, for a level killed before it wrote its summary: from the
/// earliest start to the latest end of its measured records, partial.
pub(crate) fn info_from_records(records: &[RequestRecord], concurrency: u32) -> Option<LevelInfo> {
    let measured = || {
        records
            .iter()
            .filter(|r| r.phase == kneepoint_core::Phase::Profiling)
    };
    let start = measured().map(|r| r.origin_unix_ns + r.start_ns).min()?;
    let end = measured().map(|r| r.origin_unix_ns + r.end_ns).max()?;
    Some(LevelInfo {
        start_unix_ns: start,
        end_unix_ns: end.max(start),
        input_config: json!({"level": {"concurrency": concurrency, "killed": true}}),
        partial: true,
    })
}
