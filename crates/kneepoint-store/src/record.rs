//! What the store keeps of one run, read from its artifact folder (the folder stays the
//! source of truth; the store indexes it and keeps what a history, a trend or a regression
//! gate needs after the folder is gone).

use std::collections::BTreeMap;
use std::path::Path;

use kneepoint_core::{read_capped, MAX_DOCUMENT_BYTES};
use kneepoint_metrics::LevelSummary;
use kneepoint_report::{Artifact, RunKind};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::figures::Figures;
use crate::host::Host;
use crate::Error;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// Every planned level or probe ran.
    Complete,
    /// Stopped by Ctrl-C or SIGTERM: what it measured is kept.
    Interrupted,
    /// Killed, or its folder is missing its summary: recorded from the levels it left.
    Incomplete,
}

impl RunStatus {
    /// Its name in the store and in `history`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Incomplete => "incomplete",
        }
    }

    pub(crate) fn parse(s: &str) -> RunStatus {
        match s {
            "complete" => RunStatus::Complete,
            "interrupted" => RunStatus::Interrupted,
            _ => RunStatus::Incomplete,
        }
    }
}

/// One level (a sweep level or a search probe) as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredLevel {
    /// Its folder's name in the run (`concurrency_64`, `probe_03_concurrency_96`).
    pub name: String,
    /// Requests in flight.
    pub concurrency: u32,
    /// Everything measured, intervals included.
    pub summary: LevelSummary,
}

/// Everything the store keeps of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunRecord {
    /// A stable id: the same folder, unchanged, is the same run (importing it twice adds
    /// nothing).
    pub id: String,
    /// `sweep`, `search`, `recommend` or `length-sweep`.
    pub command: String,
    /// How it ended.
    pub status: RunStatus,
    /// When its first level started (RFC 3339, UTC), when known.
    pub started_at: Option<String>,
    /// When it was stored.
    pub recorded_at: String,
    /// Its artifact folder (absolute when it could be resolved).
    pub artifact_dir: String,
    /// The endpoint measured (`http://host:port/v1/chat/completions`, `sagemaker:NAME`,
    /// `simulator:PROFILE`), without credentials.
    pub endpoint: Option<String>,
    /// The model asked for.
    pub model: Option<String>,
    /// The kneepoint that wrote the folder.
    pub kneepoint_version: Option<String>,
    /// `key=value` labels (`--label`).
    pub labels: BTreeMap<String, String>,
    /// Where it ran: known for a run recorded as it ended, not for an imported folder.
    pub host: Option<Host>,
    /// The resolved settings, as the folder records them (no secrets).
    pub settings: Value,
    /// What the server said about itself: the engine its metrics named, the simulator's
    /// profile, a launched deployment's recipe.
    pub server: Value,
    /// The answer: knee and zone, boundary, or ranking.
    pub answer: Value,
    /// The answer's key figures.
    pub figures: Figures,
    /// Each level's summary, in run order.
    pub levels: Vec<StoredLevel>,
}

impl RunRecord {
    /// Reads the run in `dir` (a sweep, search, length sweep or recommendation folder).
    pub fn from_folder(dir: &Path) -> Result<RunRecord, Error> {
        let artifact = Artifact::load(dir).map_err(|source| Error::Artifact {
            path: dir.to_owned(),
            source,
        })?;
        Ok(RunRecord::from_artifact(&artifact))
    }

    /// The record of a loaded run.
    pub fn from_artifact(a: &Artifact) -> RunRecord {
        let doc = &a.doc;
        // The flags as the run wrote them (a killed sweep's document is rebuilt from its
        // level folders and marked interrupted when loaded: it is incomplete here).
        let written: Value = read_capped(&a.root.join(a.kind.file()), MAX_DOCUMENT_BYTES)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        let flag = |k: &str| written.get(k).and_then(Value::as_bool) == Some(true);
        // A records file cut short (or emptied) leaves a level that is not what the run
        // measured: the run is incomplete whatever its summary says.
        let torn = a
            .levels
            .iter()
            .chain(a.candidates.iter().flat_map(|c| c.levels.iter()))
            .any(|l| l.short().is_some());
        let status = if flag("interrupted") {
            RunStatus::Interrupted
        } else if torn {
            RunStatus::Incomplete
        } else if flag("complete") || (a.kind == RunKind::Recommend && !written.is_null()) {
            RunStatus::Complete
        } else {
            RunStatus::Incomplete
        };
        // A recommendation's settings are its candidates' (the first one's stands for the
        // workload and the target's kind).
        let settings = doc
            .get("settings")
            .or_else(|| a.candidates.first().and_then(|c| c.doc.get("settings")))
            .cloned()
            .unwrap_or(Value::Null);
        let root = std::fs::canonicalize(&a.root).unwrap_or_else(|_| a.root.clone());
        // A recommendation's levels are its candidates' (`candidate_x/concurrency_64`).
        let own = a.levels.iter().map(|l| (String::new(), l));
        let candidates = a.candidates.iter().flat_map(|c| {
            let prefix = c
                .root
                .file_name()
                .map(|n| format!("{}/", n.to_string_lossy()))
                .unwrap_or_default();
            c.levels.iter().map(move |l| (prefix.clone(), l))
        });
        let all: Vec<(String, &kneepoint_report::Level)> = own.chain(candidates).collect();
        let start = all
            .iter()
            .filter_map(|(_, l)| l.info.as_ref().map(|i| i.start_unix_ns))
            .filter(|t| *t > 0)
            .min()
            .map(kneepoint_metrics::export::rfc3339);
        let levels: Vec<StoredLevel> = all
            .into_iter()
            .map(|(prefix, l)| {
                let mut summary = l.summary.clone();
                if let Some((read, saved)) = l.short() {
                    summary.warnings.push(format!(
                        "{} {read} of the {saved} measured records the run saved: its records file was cut short",
                        kneepoint_report::SHORT_RECORDS_WARNING
                    ));
                }
                StoredLevel {
                    name: format!("{prefix}{}", l.dir),
                    concurrency: l.concurrency,
                    summary,
                }
            })
            .collect();
        let id = run_id(&root, doc);
        RunRecord {
            id,
            command: command(a.kind).to_owned(),
            status,
            started_at: start,
            recorded_at: crate::now_rfc3339(),
            artifact_dir: root.display().to_string(),
            endpoint: match a.kind {
                // a recommendation measured its candidates' own servers (launched on ports
                // of the moment): it is named by them
                RunKind::Recommend => candidate_names(doc),
                _ => endpoint(&settings),
            },
            model: model(&settings, doc),
            kneepoint_version: doc
                .get("kneepoint_version")
                .and_then(Value::as_str)
                .map(str::to_owned),
            labels: labels_in(&a.root),
            host: None,
            server: server(a),
            answer: answer(a.kind, doc),
            figures: crate::figures::figures(
                a,
                &levels
                    .iter()
                    .map(|l| (l.concurrency, &l.summary))
                    .collect::<Vec<_>>(),
            ),
            settings,
            levels,
        }
    }
}

/// The file in a run's folder that keeps its labels, so that a run recorded later
/// (`kneepoint import`) keeps them.
pub const LABELS_FILE: &str = "labels.json";

/// Writes `labels` into the run's folder ([`LABELS_FILE`]); nothing when there are none.
pub fn write_labels(dir: &Path, labels: &BTreeMap<String, String>) -> Result<(), Error> {
    if labels.is_empty() {
        return Ok(());
    }
    let path = dir.join(LABELS_FILE);
    let text = serde_json::to_vec_pretty(labels).unwrap_or_default();
    // written whole or not at all: a temporary file renamed over it
    let tmp = dir.join(format!(".{LABELS_FILE}.tmp"));
    std::fs::write(&tmp, &text)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|source| Error::Io { path, source })
}

/// The labels the folder keeps (none when it keeps none, or they cannot be read).
fn labels_in(dir: &Path) -> BTreeMap<String, String> {
    use std::io::Read as _;
    let mut text = Vec::new();
    let read = std::fs::File::open(dir.join(LABELS_FILE))
        .and_then(|f| f.take(1 << 20).read_to_end(&mut text));
    match read {
        Ok(_) => serde_json::from_slice(&text).unwrap_or_default(),
        Err(_) => BTreeMap::new(),
    }
}

fn command(kind: RunKind) -> &'static str {
    match kind {
        RunKind::Sweep => "sweep",
        RunKind::Search => "search",
        RunKind::Recommend => "recommend",
        RunKind::Lengths => "length-sweep",
    }
}

/// A stable id from the folder's path and its summary document: FNV-1a (64 bits), written
/// here because the id must not change between processes or versions (std's hasher is
/// seeded per process, and a cryptographic hash would be a dependency for 16 hex digits).
fn run_id(root: &Path, doc: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let text = format!("{}\n{doc}", root.display());
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn endpoint(settings: &Value) -> Option<String> {
    if let Some(name) = settings
        .pointer("/sagemaker/endpoint_name")
        .and_then(Value::as_str)
    {
        return Some(format!("sagemaker:{name}"));
    }
    if settings.pointer("/target/kind").and_then(Value::as_str) == Some("simulator") {
        let profile = settings
            .pointer("/target/profile/name")
            .and_then(Value::as_str)
            .unwrap_or("custom");
        return Some(format!("simulator:{profile}"));
    }
    settings
        .pointer("/endpoint/url")
        .and_then(Value::as_str)
        .map(kneepoint_core::redact_url)
}

/// `candidates: a, b, c` of a recommendation.
fn candidate_names(doc: &Value) -> Option<String> {
    let names: Vec<&str> = doc
        .get("candidates")?
        .as_array()?
        .iter()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    (!names.is_empty()).then(|| format!("candidates: {}", names.join(", ")))
}

fn model(settings: &Value, doc: &Value) -> Option<String> {
    settings
        .pointer("/endpoint/model")
        .or_else(|| doc.pointer("/model/name"))
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
}

/// What the server said about itself, as the folder recorded it.
fn server(a: &Artifact) -> Value {
    let engines: Vec<Value> = a
        .levels
        .iter()
        .filter_map(|l| l.summary.server.as_ref())
        .flat_map(|s| s.endpoints.iter())
        .filter_map(|e| e.server.clone())
        .collect::<std::collections::BTreeSet<String>>()
        .into_iter()
        .map(Value::String)
        .collect();
    let mut out = json!({ "engines": engines });
    if let Some(id) = a.doc.pointer("/settings/server_identity") {
        out["identity"] = id.clone();
    }
    if let Some(p) = a.doc.pointer("/settings/target/profile") {
        out["simulator"] = p.clone();
    }
    if let Some(d) = a.doc.get("deployment") {
        out["deployment"] = d.clone();
    }
    let candidates: Vec<Value> = a
        .doc
        .get("candidates")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("deployment").cloned())
                .collect()
        })
        .unwrap_or_default();
    if !candidates.is_empty() {
        out["deployments"] = Value::Array(candidates);
    }
    out
}

/// The run's answer, as its summary document gives it.
fn answer(kind: RunKind, doc: &Value) -> Value {
    let pick = |keys: &[&str]| {
        let mut out = serde_json::Map::new();
        for k in keys {
            if let Some(v) = doc.get(*k).filter(|v| !v.is_null()) {
                out.insert((*k).to_owned(), v.clone());
            }
        }
        Value::Object(out)
    };
    match kind {
        RunKind::Sweep => pick(&["knee", "zone", "fleet", "slas"]),
        RunKind::Search => pick(&["boundary", "zone", "cost", "search_params"]),
        RunKind::Lengths => pick(&["prefill", "fit", "concurrency"]),
        RunKind::Recommend => pick(&[
            "objective",
            "strategy",
            "recommendation",
            "candidates",
            "spent",
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 57 item 11: importing a folder whose summary has a huge tail (a valid document
    /// followed by zeros past 256 MiB, sparse: no disk is spent) is refused with the cap
    /// named, without reading the tail into memory.
    #[test]
    fn a_summary_with_a_huge_tail_is_refused_naming_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let summary = dir.path().join(kneepoint_core::folder::SWEEP_SUMMARY);
        std::fs::write(&summary, r#"{"levels": [], "complete": true}"#).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&summary)
            .unwrap()
            .set_len(MAX_DOCUMENT_BYTES + 1)
            .unwrap();
        let start = std::time::Instant::now();
        let e = RunRecord::from_folder(dir.path()).unwrap_err();
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        assert!(text.contains("sweep_summary.json"), "{text}");
        assert!(
            text.contains("larger than 256 MiB, the most read"),
            "{text}"
        );
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
    }
}
