//! Reading a saved artifact folder: which run wrote it, its top-level document, and each
//! level's records, recomputed summary and saved settings.

use kneepoint_core::folder;
use kneepoint_core::{Metric, Stat};
use std::path::{Path, PathBuf};

use kneepoint_core::RequestRecord;
use kneepoint_metrics::export::{
    read_jsonl, read_jsonl_each, write_aiperf_csv, write_level_summary, LevelInfo,
};
use kneepoint_metrics::{GoodputSlo, LevelSummary};
use serde_json::Value;

use crate::curve::{Curve, CurvePoint};
use crate::Error;

/// The command that wrote a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// `kneepoint sweep` (`sweep_summary.json`).
    Sweep,
    /// `kneepoint search` (`search_history.json`).
    Search,
    /// `kneepoint recommend` (`recommendations.json`).
    Recommend,
    /// `kneepoint sweep --isl A,B,...` (`length_sweep.json`).
    Lengths,
}

impl RunKind {
    /// The top-level file of this kind of run.
    pub fn file(self) -> &'static str {
        match self {
            RunKind::Sweep => folder::SWEEP_SUMMARY,
            RunKind::Search => folder::SEARCH_HISTORY,
            RunKind::Recommend => folder::RECOMMENDATIONS,
            RunKind::Lengths => folder::LENGTH_SWEEP,
        }
    }
}

/// One level (a sweep level or a search probe) read back from its folder.
#[derive(Debug, Clone)]
pub struct Level {
    /// The folder, relative to the run's folder.
    pub dir: String,
    /// The level's concurrency.
    pub concurrency: u32,
    /// Every record of the level (warm-up included), from `profile_export.jsonl`; for a level
    /// summarised as it ran (longer than it kept in memory), an even sample of at most
    /// 50,000 (`PLOT_RECORDS`) for the plots.
    pub records: Vec<RequestRecord>,
    /// The summary recomputed from the records.
    pub summary: LevelSummary,
    /// Times, settings and the partial flag from `profile_export_aiperf.json` (absent when that
    /// file is missing).
    pub info: Option<LevelInfo>,
    /// Whether the level met the SLAs, as the run judged it.
    pub meets_slas: Option<bool>,
    /// How many measured records the run said it saved (`requests_recorded`), when its
    /// summary says.
    pub saved_records: Option<usize>,
}

/// The start of the warning a level carries once it was recomputed from a records file that
/// had lost some of its records; kept verbatim by later re-renders.
pub const SHORT_RECORDS_WARNING: &str = "recomputed from";

impl Level {
    /// `(read, saved)` when the records file holds fewer measured records than the run saved
    /// (a file cut short or edited): its aggregates would silently change if recomputed.
    pub fn short(&self) -> Option<(usize, usize)> {
        let read = self.summary.request_count;
        self.saved_records
            .filter(|saved| read < *saved)
            .map(|saved| (read, saved))
    }

    /// Marks the level as recomputed from the records left: partial, with a warning that
    /// gives the counts.
    pub fn mark_short(&mut self) {
        if let Some((read, saved)) = self.short() {
            if let Some(info) = &mut self.info {
                info.partial = true;
            }
            self.summary.warnings.push(format!(
                "{SHORT_RECORDS_WARNING} {read} of the {saved} measured records the run saved: its records file was cut short"
            ));
        }
    }
}

/// A run read back from its folder.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// The folder.
    pub root: PathBuf,
    /// The command that wrote it.
    pub kind: RunKind,
    /// Its top-level document.
    pub doc: Value,
    /// Its levels, in run order (empty for a recommendation).
    pub levels: Vec<Level>,
    /// A recommendation's candidates' runs, in the document's order.
    pub candidates: Vec<Artifact>,
}

pub(crate) fn read_json(path: &Path) -> Result<Value, Error> {
    let text = kneepoint_core::read_capped_to_string(path, kneepoint_core::MAX_DOCUMENT_BYTES)
        .map_err(Error::read(path))?;
    serde_json::from_str(&text).map_err(|source| Error::Json {
        path: path.to_owned(),
        source,
    })
}

/// Records of a long level kept for its plots: an even sample of at most this many.
pub const PLOT_RECORDS: usize = 50_000;

/// Every `stride`-th record, the stride doubling (and every other kept record dropped)
/// whenever [`PLOT_RECORDS`] are held: an even sample of a level of any length.
#[derive(Debug, Default)]
struct Sample {
    kept: Vec<RequestRecord>,
    seen: usize,
    stride: usize,
}

impl Sample {
    fn offer(&mut self, r: RequestRecord) {
        let stride = self.stride.max(1);
        if self.seen.is_multiple_of(stride) {
            if self.kept.len() == PLOT_RECORDS {
                let mut i = 0;
                self.kept.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride = stride * 2;
            }
            if self.seen.is_multiple_of(self.stride.max(1)) {
                self.kept.push(r);
            }
        }
        self.seen += 1;
    }
}

/// Whether a saved level was summarised as it ran (more records than it kept in memory), and
/// then whether its percentiles were made exact: `input_config.level.summary`.
fn streamed(info: Option<&LevelInfo>) -> Option<bool> {
    let s = info?.input_config.pointer("/level/summary")?;
    (s.get("streamed")? == &Value::Bool(true)).then(|| {
        s.get("exact_percentiles")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    })
}

/// A streamed level's summary, read as the run made it (in bounded memory, a second pass for
/// exact percentiles when the run made one), and an even sample of its records.
fn streamed_level(
    path: &Path,
    concurrency: u32,
    exact: bool,
    slo: &GoodputSlo,
) -> Result<(LevelSummary, Vec<RequestRecord>), Error> {
    let mut summary = kneepoint_metrics::StreamingSummary::new(slo);
    let mut sample = Sample::default();
    read_jsonl_each(path, |r| {
        summary.push(&r);
        sample.offer(r);
    })?;
    let s = if exact && summary.is_approximate() {
        let mut pass = summary.second_pass();
        read_jsonl_each(path, |r| pass.offer(&r))?;
        pass.summary(concurrency)
    } else {
        summary.summary(concurrency)
    };
    Ok((s, sample.kept))
}

/// The level in `root/dir`. `known` is the summary the run that just wrote the level made of
/// it, when it hands it over: the records are still read (for the plots), but not summarised
/// again. `kneepoint report` recomputes it, and tests hold the two pages byte for byte equal.
fn level(
    root: &Path,
    dir: &str,
    concurrency: u32,
    meets: Option<bool>,
    known: Option<&LevelSummary>,
) -> Result<Level, Error> {
    let folder = root.join(dir);
    let aiperf = folder.join(folder::AIPERF_JSON);
    let doc = aiperf.is_file().then(|| read_json(&aiperf)).transpose()?;
    let info = doc.as_ref().and_then(LevelInfo::from_aiperf_json);
    let path = kneepoint_metrics::export::records_path(&folder);
    // goodput is judged again against the SLOs the run was given
    let slo = doc
        .as_ref()
        .and_then(kneepoint_metrics::export::goodput_slo_from_aiperf_json)
        .unwrap_or_default();
    let (mut summary, records) = match streamed(info.as_ref()) {
        Some(exact) => streamed_level(&path, concurrency, exact, &slo)?,
        None => {
            let records = read_jsonl(&path)?;
            refuse_repeated(&path, &records)?;
            // Only while the file holds every measured record the summary rests on: a run
            // whose records file failed part way kept summarising what it held in memory.
            let measured = || {
                records
                    .iter()
                    .filter(|r| r.phase == kneepoint_core::Phase::Profiling)
                    .count()
            };
            if let Some(s) = known.filter(|s| s.request_count == measured()) {
                return Ok(Level {
                    dir: dir.to_owned(),
                    concurrency,
                    records,
                    summary: s.clone(),
                    saved_records: saved_records(doc.as_ref()),
                    info,
                    meets_slas: meets,
                });
            }
            let s = LevelSummary::from_records(concurrency, &records, &slo);
            (s, records)
        }
    };
    keep_saved_warnings(&mut summary, doc.as_ref());
    // The server's view and the client's health are not in the records: they are kept from
    // the saved summary.
    summary.server = doc
        .as_ref()
        .and_then(kneepoint_metrics::export::server_summary_from_aiperf_json);
    summary.client = doc
        .as_ref()
        .and_then(kneepoint_metrics::export::client_health_from_aiperf_json);
    summary.steadiness = doc
        .as_ref()
        .and_then(kneepoint_metrics::export::steadiness_from_aiperf_json);
    // A merged shard level counts its rates over the shards' common window (`kneepoint
    // merge`): the records alone would give the union of their runs. A level kept loaded
    // counts them over the time its measured load took (from the rate of its starts).
    let counted_over = ["/level/merged/duration_s", "/level/kept_loaded/duration_s"];
    if let Some(d) = counted_over.iter().find_map(|at| {
        info.as_ref()
            .and_then(|i| i.input_config.pointer(at))
            .and_then(Value::as_f64)
    }) {
        summary.rescale_duration(d);
    }
    let saved = saved_records(doc.as_ref());
    if let Some(saved) = saved.filter(|saved| summary.request_count > *saved) {
        return Err(Error::Missing {
            path,
            reason: format!(
                "holds {} measured records where the run saved {saved}: lines repeated or files joined, which would inflate its throughput; restore the run's own file",
                summary.request_count
            ),
        });
    }
    Ok(Level {
        dir: dir.to_owned(),
        concurrency,
        records,
        summary,
        saved_records: saved,
        info,
        meets_slas: meets,
    })
}

/// Keeps the run's own verdicts among `summary`'s warnings, from its saved document: the ISL
/// check's and an earlier recompute's note.
fn keep_saved_warnings(summary: &mut LevelSummary, doc: Option<&Value>) {
    // The ISL check's verdict is the run's: its saved warning is kept verbatim and none is
    // added, so that `report` reproduces a folder byte for byte whichever version of the check
    // wrote it (or whether one existed yet).
    if let Some(saved) = doc
        .and_then(|d| d.pointer("/kneepoint/warnings"))
        .and_then(Value::as_array)
    {
        let isl = kneepoint_metrics::ISL_WARNING;
        let saved_isl: Vec<String> = saved
            .iter()
            .filter_map(Value::as_str)
            .filter(|w| w.starts_with(isl))
            .map(str::to_owned)
            .collect();
        // The recomputed verdict goes; the saved one stands where the check puts its
        // warning: before "every request failed" and the interruption or thin-level notes.
        summary.warnings.retain(|w| !w.starts_with(isl));
        let at = summary
            .warnings
            .iter()
            .position(|w| {
                w == "every request failed"
                    || w.starts_with("interrupted:")
                    || w.starts_with("only ")
            })
            .unwrap_or(summary.warnings.len());
        summary.warnings.splice(at..at, saved_isl);
        // So is the note of an earlier recompute from a short records file.
        summary.warnings.extend(
            saved
                .iter()
                .filter_map(Value::as_str)
                .filter(|w| w.starts_with(SHORT_RECORDS_WARNING))
                .map(str::to_owned),
        );
    }
}

/// Refuses a records file holding one request twice (the same id, level origin and start):
/// a line repeated by an edit or a concatenation would count twice in every rate.
fn refuse_repeated(path: &Path, records: &[RequestRecord]) -> Result<(), Error> {
    let mut seen = std::collections::HashSet::with_capacity(records.len());
    let repeated = records
        .iter()
        .filter(|r| !seen.insert((r.request_id, r.origin_unix_ns, r.start_ns)))
        .count();
    if repeated == 0 {
        return Ok(());
    }
    Err(Error::Missing {
        path: path.to_owned(),
        reason: format!(
            "holds {repeated} records twice (the same request, started at the same time): lines repeated or files joined, which would inflate its throughput"
        ),
    })
}

/// How many measured records the run said it saved.
fn saved_records(doc: Option<&Value>) -> Option<usize> {
    doc?.pointer("/kneepoint/requests_recorded")
        .and_then(Value::as_u64)
        .map(|n| n as usize)
}

fn entries<'a>(doc: &'a Value, key: &str, path: &Path) -> Result<&'a Vec<Value>, Error> {
    doc.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| Error::Missing {
            path: path.to_owned(),
            reason: format!("no {key} list"),
        })
}

impl Artifact {
    /// Reads the run in `root`.
    pub fn load(root: &Path) -> Result<Artifact, Error> {
        Artifact::load_known(root, &[])
    }

    /// [`Artifact::load`] for a sweep that has just written `root`: `known` holds the
    /// summaries it made of its levels (by folder name), which are taken as they are instead
    /// of being computed again from the records (a level's summary is about a tenth of a whole
    /// run's instructions). A level that is not in `known` is read as [`Artifact::load`]
    /// reads it.
    pub fn load_known(root: &Path, known: &[(&str, &LevelSummary)]) -> Result<Artifact, Error> {
        let kind = [
            RunKind::Recommend,
            RunKind::Search,
            RunKind::Lengths,
            RunKind::Sweep,
        ]
        .into_iter()
        .find(|k| root.join(k.file()).is_file())
        // A sweep killed before its first summary: its level folders say what it was.
        .or_else(|| (!crate::killed::level_dirs(root).is_empty()).then_some(RunKind::Sweep))
        // A recommendation killed before its summary: its candidates' folders say what it was.
        .or_else(|| (!crate::killed::candidate_dirs(root).is_empty()).then_some(RunKind::Recommend))
        .ok_or_else(|| Error::NotAnArtifact {
            path: root.to_owned(),
        })?;
        let path = root.join(kind.file());
        let mut doc = if path.is_file() {
            read_json(&path)?
        } else if kind == RunKind::Recommend {
            crate::killed::recommend_doc(root)
        } else {
            crate::killed::sweep_doc(root)
        };
        let mut levels = Vec::new();
        let mut candidates = Vec::new();
        match kind {
            RunKind::Sweep | RunKind::Lengths => {
                let (list, concurrency) = match kind {
                    RunKind::Lengths => ("rows", doc.get("concurrency").and_then(Value::as_u64)),
                    _ => ("levels", None),
                };
                for row in entries(&doc, list, &path)? {
                    let (Some(dir), Some(c)) = (
                        row.get("dir").and_then(Value::as_str),
                        row.get("concurrency")
                            .and_then(Value::as_u64)
                            .or(concurrency),
                    ) else {
                        continue;
                    };
                    let meets = row.get("meets_slas").and_then(Value::as_bool);
                    let made = known.iter().find(|(d, _)| *d == dir).map(|(_, s)| *s);
                    levels.push(level(root, dir, c as u32, meets, made)?);
                }
                // A sweep still "running" was killed: the level it was running when it died
                // has records but no row yet.
                let finished = ["complete", "interrupted"]
                    .iter()
                    .any(|k| doc.get(*k).and_then(Value::as_bool) == Some(true));
                if kind == RunKind::Sweep && !finished {
                    for (dir, c) in crate::killed::level_dirs(root) {
                        if levels.iter().any(|l| l.dir == dir) {
                            continue;
                        }
                        let mut l = level(root, &dir, c, None, None)?;
                        if l.info.is_none() {
                            l.info = crate::killed::info_from_records(&l.records, c);
                        }
                        levels.push(l);
                    }
                    doc["interrupted"] = Value::Bool(true);
                }
            }
            RunKind::Search => {
                for p in entries(&doc, "probes", &path)? {
                    let (Some(dir), Some(c)) = (
                        p.get("dir").and_then(Value::as_str),
                        p.pointer("/probe/concurrency").and_then(Value::as_u64),
                    ) else {
                        continue;
                    };
                    let meets = p.get("pass").and_then(Value::as_bool);
                    levels.push(level(root, dir, c as u32, meets, None)?);
                }
            }
            RunKind::Recommend => {
                for c in entries(&doc, "candidates", &path)? {
                    if let Some(dir) = c.get("artifact_dir").and_then(Value::as_str) {
                        let sub = root.join(dir);
                        if sub.is_dir() {
                            candidates.push(Artifact::load(&sub)?);
                        }
                    }
                }
            }
        }
        Ok(Artifact {
            root: root.to_owned(),
            kind,
            doc,
            levels,
            candidates,
        })
    }

    /// Rewrites every level's `profile_export_aiperf.json`, `.csv` and `benchmark_summary.txt`
    /// from its records (this run's own levels; a recommendation's candidates are runs of their
    /// own). Levels without saved times keep
    /// their JSON file untouched. Returns the files written.
    pub fn rewrite_level_summaries(&self) -> Result<Vec<PathBuf>, Error> {
        let mut written = Vec::new();
        for l in &self.levels {
            let dir = self.root.join(&l.dir);
            match &l.info {
                Some(info) => written.extend(write_level_summary(&dir, &l.summary, info)?),
                None => {
                    let p = dir.join(folder::AIPERF_CSV);
                    write_aiperf_csv(&p, &l.summary)?;
                    written.push(p);
                }
            }
        }
        Ok(written)
    }

    /// The levels as a plot curve: one point per concurrency (the last probe of a level stands
    /// for it; it meets the SLAs only if every probe of it did), with the knee and the chosen
    /// operating point from the document.
    pub fn curve(&self, name: &str) -> Curve {
        let mut points: Vec<CurvePoint> = Vec::new();
        for l in &self.levels {
            let s = &l.summary;
            let p = CurvePoint {
                concurrency: l.concurrency,
                throughput: s.output_token_throughput,
                e2e_p50_ms: s.value(Metric::RequestLatency, Stat::P50),
                e2e_p90_ms: s.value(Metric::RequestLatency, Stat::P90),
                e2e_p99_ms: s.value(Metric::RequestLatency, Stat::P99),
                meets_slas: l.meets_slas,
            };
            match points.iter_mut().find(|q| q.concurrency == l.concurrency) {
                Some(q) => {
                    let meets = match (q.meets_slas, p.meets_slas) {
                        (Some(a), Some(b)) => Some(a && b),
                        (a, b) => a.or(b),
                    };
                    *q = CurvePoint {
                        meets_slas: meets,
                        ..p
                    };
                }
                None => points.push(p),
            }
        }
        let u = |ptr: &str| {
            self.doc
                .pointer(ptr)
                .and_then(Value::as_u64)
                .map(|v| v as u32)
        };
        Curve {
            name: name.to_owned(),
            points,
            knee: u("/zone/knee/knee").or_else(|| u("/knee/knee")),
            chosen: match self.kind {
                RunKind::Search => u("/boundary/feasible_max"),
                _ => u("/zone/ideal_balance"),
            },
        }
    }

    /// The SLAs the run checked (as saved).
    pub fn slas(&self) -> Vec<Value> {
        let list = match self.kind {
            RunKind::Search => self.doc.pointer("/search_params/slas"),
            _ => self.doc.get("slas"),
        };
        list.and_then(Value::as_array).cloned().unwrap_or_default()
    }

    /// The p99 request-latency SLA threshold in ms, if the run had one.
    pub fn e2e_p99_sla_ms(&self) -> Option<f64> {
        self.slas().iter().find_map(|s| {
            (s.get("metric")?.as_str()? == "request_latency" && s.get("stat")?.as_str()? == "p99")
                .then(|| s.get("threshold")?.as_f64())
                .flatten()
        })
    }
}
