//! `kneepoint merge`: the folders of a sharded sweep (`--shard K/N`, one process per shard)
//! become one folder, written as one process at the total concurrency would have written it:
//! each level's records merged on one clock, percentiles recomputed from all of them, and
//! throughput counted over the window every shard was running. Shards of different workloads,
//! or an incomplete set, are refused.

use kneepoint_core::folder;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kneepoint_core::{read_capped, RecordSink, RequestRecord, MAX_DOCUMENT_BYTES};
use kneepoint_metrics::export::{read_jsonl, JsonlSink, LevelInfo};
use kneepoint_metrics::{GoodputSlo, LevelSummary};
use kneepoint_planner::{Shard, Sla};
use kneepoint_report::schema::{write_document, SweepSummary};
use serde::Serialize;
use serde_json::Value;

use crate::sweep_doc::{conclude, write_sweep_summary, RunState, SweepDoc};
use crate::{Error, Observer};

/// One merged level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MergedLevel {
    /// Total concurrency (the shards' sum).
    pub concurrency: u32,
    /// Its folder in the merged run.
    pub dir: String,
    /// Records merged (= requests the shards sent).
    pub records: usize,
    /// Spread of the shards' level start times, ms (clock skew plus start-up jitter).
    pub start_skew_ms: f64,
    /// The window every shard was running, s (throughput is counted over it).
    pub common_window_s: f64,
    /// Each shard's level folder.
    pub shard_dirs: Vec<String>,
}

/// What a merge wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MergeReport {
    /// Shards merged.
    pub shards: u32,
    /// The merged levels.
    pub levels: Vec<MergedLevel>,
    /// The largest start skew seen, ms.
    pub max_start_skew_ms: f64,
    /// The merged folder.
    pub artifact_dir: PathBuf,
    /// The merged levels' summaries.
    #[serde(skip)]
    pub summaries: Vec<LevelSummary>,
}

struct ShardRun {
    dir: PathBuf,
    shard: Shard,
    doc: SweepSummary,
}

/// A shard's saved level summary, if it can be read (only its goodput SLOs are taken from it).
fn saved_level_json(level_dir: &Path) -> Option<Value> {
    let bytes = read_capped(&level_dir.join(folder::AIPERF_JSON), MAX_DOCUMENT_BYTES).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn read_shard(dir: &Path) -> Result<ShardRun, Error> {
    let path = dir.join(folder::SWEEP_SUMMARY);
    let text = read_capped(&path, MAX_DOCUMENT_BYTES).map_err(|e| Error::io("read", &path, e))?;
    let doc: SweepSummary = serde_json::from_slice(&text).map_err(|source| Error::Saved {
        path: path.clone(),
        what: "sweep summary",
        source,
    })?;
    let shard: Shard = serde_json::from_value(doc.settings["shard"].clone()).map_err(|_| {
        Error::invalid(format!(
            "{} is not a shard's run (it was not started with --shard K/N)",
            dir.display()
        ))
    })?;
    if doc
        .settings
        .pointer("/requests/num_runs")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        > 1
    {
        return Err(Error::invalid(format!(
            "{}: merging shards of repeated runs (--num-runs) is not supported: run each shard once per level",
            dir.display()
        )));
    }
    if doc.load.is_some() || doc.request_rates.is_some() {
        return Err(Error::invalid(format!(
            "{}: merging open-loop shards is not supported yet (closed-loop sweeps only)",
            dir.display()
        )));
    }
    Ok(ShardRun {
        dir: dir.to_owned(),
        shard,
        doc,
    })
}

/// The settings that must agree between shards: everything but the shard block, the seed
/// (each shard's is its own) and the start time.
fn comparable(settings: &Value) -> Value {
    let mut v = settings.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("shard");
        o.remove("start_at");
        // what each shard's server answered (a model list's creation time is the moment's)
        o.remove("server_identity");
    }
    if let Some(w) = v.get_mut("workload").and_then(Value::as_object_mut) {
        w.remove("seed");
    }
    // Shards on different hosts connect from their own addresses.
    if let Some(c) = v
        .pointer_mut("/endpoint/connect")
        .and_then(Value::as_object_mut)
    {
        c.remove("source_addrs");
    }
    v
}

/// Moves a record onto one clock: its times become relative to `origin` (at most its own).
/// `None` when a time would overflow (a damaged file).
fn rebase(r: &mut RequestRecord, origin: u64) -> Option<()> {
    let d = r.origin_unix_ns.checked_sub(origin)?;
    let add = |t: &mut u64| -> Option<()> {
        *t = t.checked_add(d)?;
        Some(())
    };
    r.origin_unix_ns = origin;
    add(&mut r.start_ns)?;
    add(&mut r.end_ns)?;
    for t in [
        r.response_ns.as_mut(),
        r.first_content_ns.as_mut(),
        r.intended_start_ns.as_mut(),
    ]
    .into_iter()
    .flatten()
    {
        add(t)?;
    }
    for t in &mut r.chunk_ns {
        add(t)?;
    }
    Some(())
}

/// Output tokens emitted inside `[from, to)` (a stream's tokens spread over its chunks, a
/// whole response's at its end).
fn tokens_in(records: &[RequestRecord], from: u64, to: u64) -> f64 {
    records
        .iter()
        .filter(|r| r.error.is_none())
        .map(|r| {
            let tokens = f64::from(r.output_tokens.unwrap_or(0));
            if r.chunk_ns.is_empty() {
                if (from..to).contains(&r.end_ns) {
                    tokens
                } else {
                    0.0
                }
            } else {
                let inside = r
                    .chunk_ns
                    .iter()
                    .filter(|t| (from..to).contains(*t))
                    .count();
                tokens * inside as f64 / r.chunk_ns.len() as f64
            }
        })
        .sum()
}

/// One level's records from every shard, on one clock, and what was computed from them.
struct MergedRecords {
    all: Vec<RequestRecord>,
    summary: LevelSummary,
    skew_ms: f64,
    window_s: f64,
    measured_shards: usize,
    windowed: bool,
}

/// Merges one level's records (`per_shard[k]`: shard k's) at total concurrency `total`:
/// rebased on the earliest origin, summarised together, with every per-second figure over the
/// common window (the latest shard start to the earliest shard end). `None` when a time
/// overflows.
fn merge_records(
    mut per_shard: Vec<Vec<RequestRecord>>,
    total: u32,
    slo: &GoodputSlo,
) -> Option<MergedRecords> {
    let origin = per_shard
        .iter()
        .flatten()
        .map(|r| r.origin_unix_ns)
        .min()
        .unwrap_or(0);
    let mut windows = Vec::new();
    let mut all = Vec::new();
    for recs in per_shard.iter_mut() {
        for r in recs.iter_mut() {
            rebase(r, origin)?;
        }
        let (lo, hi) = recs
            .iter()
            .filter(|r| r.phase == kneepoint_core::Phase::Profiling)
            .fold((u64::MAX, 0u64), |(lo, hi), r| {
                (lo.min(r.start_ns), hi.max(r.end_ns))
            });
        if lo < hi {
            windows.push((lo, hi));
        }
        all.append(recs);
    }
    let mut summary = LevelSummary::from_records(total, &all, slo);
    let from = windows.iter().map(|w| w.0).max().unwrap_or(0);
    let to = windows.iter().map(|w| w.1).min().unwrap_or(0);
    let first = windows.iter().map(|w| w.0).min().unwrap_or(0);
    let skew_ms = from.saturating_sub(first) as f64 / 1e6;
    let window_s = to.saturating_sub(from) as f64 / 1e9;
    let measured: Vec<RequestRecord> = all
        .iter()
        .filter(|r| r.phase == kneepoint_core::Phase::Profiling)
        .cloned()
        .collect();
    let in_window = tokens_in(&measured, from, to);
    let windowed = window_s > 0.0 && in_window > 0.0 && summary.total_output_tokens > 0;
    if windowed {
        // Every per-second figure over the duration the common window's rate implies.
        summary.rescale_duration(summary.total_output_tokens as f64 * window_s / in_window);
    }
    Some(MergedRecords {
        all,
        summary,
        skew_ms,
        window_s,
        measured_shards: windows.len(),
        windowed,
    })
}

/// The shards in `shard_dirs`, read and checked to make one sweep (each index once, the same
/// settings and levels), none of them `out`.
fn read_shards(shard_dirs: &[PathBuf], out: &Path) -> Result<Vec<ShardRun>, Error> {
    if shard_dirs.is_empty() {
        return Err(Error::invalid("give the shards' folders to merge"));
    }
    let mut runs = shard_dirs
        .iter()
        .map(|d| read_shard(d))
        .collect::<Result<Vec<_>, _>>()?;
    runs.sort_by_key(|r| r.shard.index);
    let n = runs[0].shard.count;
    let indices: Vec<u32> = runs.iter().map(|r| r.shard.index).collect();
    if runs.iter().any(|r| r.shard.count != n) || indices != (0..n).collect::<Vec<_>>() {
        return Err(Error::invalid(format!(
            "the shards do not make one sweep: expected shards 0..{n} of {n} once each, got {}",
            runs.iter()
                .map(|r| format!("{}/{}", r.shard.index, r.shard.count))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let base = comparable(&runs[0].doc.settings);
    for r in &runs[1..] {
        if comparable(&r.doc.settings) != base {
            return Err(Error::invalid(format!(
                "{} and {} ran different workloads or settings: shards must differ only in --shard (and the seed it derives)",
                runs[0].dir.display(),
                r.dir.display()
            )));
        }
        if r.doc.levels.len() != runs[0].doc.levels.len() {
            return Err(Error::invalid(format!(
                "{} has {} levels and {} has {}: merge shards that all finished",
                runs[0].dir.display(),
                runs[0].doc.levels.len(),
                r.dir.display(),
                r.doc.levels.len()
            )));
        }
    }
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
    if runs.iter().any(|r| canon(&r.dir) == canon(out)) {
        return Err(Error::invalid(format!(
            "--out {} is one of the shards: merge into a folder of its own",
            out.display()
        )));
    }
    Ok(runs)
}

/// Writes a merged level's records into `dir` (made), compressed as the shards' were.
fn write_records(dir: &Path, all: &[RequestRecord], compressed: bool) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
    let mut sink = JsonlSink::in_dir(dir, compressed)?;
    for r in all {
        sink.record(r).map_err(|e| Error::invalid(e.to_string()))?;
    }
    sink.flush().map_err(|e| Error::invalid(e.to_string()))
}

/// Merges level `i` of `runs` into `out`: its records on one clock, its summary, its log
/// line; the level as `merge_summary.json` lists it, its summary and its folder's name.
fn merge_level(
    i: usize,
    runs: &[ShardRun],
    out: &Path,
    observer: &dyn Observer,
    log: &crate::RunLog,
) -> Result<(MergedLevel, LevelSummary, String), Error> {
    let n = runs[0].shard.count;
    let parts: Vec<(&ShardRun, u32, &str)> = runs
        .iter()
        .map(|r| {
            let row = &r.doc.levels[i];
            (r, row.concurrency, row.dir.as_str())
        })
        .collect();
    let total: u32 = parts.iter().map(|p| p.1).sum();
    let planned = runs[0].doc.settings["shard"]["levels"]
        .get(i)
        .and_then(Value::as_u64);
    if planned.is_some_and(|p| p != u64::from(total)) {
        return Err(Error::invalid(format!(
            "level {}: the shards add up to concurrency {total}, but the sweep planned {}",
            i + 1,
            planned.unwrap_or_default()
        )));
    }
    if let Some(p) = parts.iter().find(|p| p.0.shard.share(total) != p.1) {
        return Err(Error::invalid(format!(
            "level {}: shard {} ran concurrency {}, not its share of {total}",
            i + 1,
            p.0.shard.index,
            p.1
        )));
    }
    let mut per_shard = Vec::new();
    let mut compressed = false;
    for (r, _, dir) in &parts {
        let path = kneepoint_metrics::export::records_path(&r.dir.join(dir));
        compressed |= path.extension().is_some_and(|e| e == "zst");
        per_shard.push(read_jsonl(&path)?);
    }
    let name = folder::concurrency_dir(total);
    // goodput judged against the SLOs the shards were given (the first shard whose saved
    // summary names them: a damaged summary of one shard does not drop them)
    let slo = parts
        .iter()
        .filter_map(|(r, _, dir)| saved_level_json(&r.dir.join(dir)))
        .find_map(|v| kneepoint_metrics::export::goodput_slo_from_aiperf_json(&v))
        .unwrap_or_default();
    let Some(m) = merge_records(per_shard, total, &slo) else {
        return Err(Error::invalid(format!(
            "level {}: a record's times overflow when put on one clock (a damaged file)",
            i + 1
        )));
    };
    let origin = m.all.first().map_or(0, |r| r.origin_unix_ns);
    let MergedRecords {
        all,
        summary,
        skew_ms,
        window_s,
        measured_shards,
        windowed,
    } = m;
    if measured_shards < parts.len() {
        observer.warning(&format!(
            "level {name}: {} of {} shards measured no request: the window and skew are over the others",
            parts.len() - measured_shards,
            parts.len()
        ));
    }
    if !windowed {
        observer.warning(&format!(
            "level {name}: the shards never ran at the same time (no common window): throughput is over the union of their runs"
        ));
    }
    observer.note(&format!(
        "{name}: {} records from {n} shards, start skew {skew_ms:.1} ms, common window {window_s:.2} s",
        all.len()
    ));
    // Only the first level starts together: later ones drift by each shard's finish.
    if window_s > 0.0 && skew_ms / 1000.0 > 0.05 * window_s {
        observer.warning(&format!(
            "level {name}: the shards started {skew_ms:.0} ms apart, over 5 % of the {window_s:.2} s they ran together: its latencies mix times when not every shard was at this level (longer levels, or timed ones, drift less)"
        ));
    }
    let dir = out.join(&name);
    write_records(&dir, &all, compressed)?;
    let mut input_config = runs[0].doc.settings.clone();
    input_config["shard"] = serde_json::json!({"merged": n});
    input_config["level"] = serde_json::json!({
        "concurrency": total,
        "merged": {"shards": n, "duration_s": summary.benchmark_duration_s},
    });
    let info = LevelInfo {
        start_unix_ns: origin.saturating_add(all.iter().map(|r| r.start_ns).min().unwrap_or(0)),
        end_unix_ns: origin.saturating_add(all.iter().map(|r| r.end_ns).max().unwrap_or(0)),
        input_config,
        partial: runs.iter().any(|r| !r.doc.complete),
    };
    kneepoint_metrics::export::write_level_summary(dir.as_ref(), &summary, &info)?;
    log.level(&dir, &summary, info.partial);
    let level = MergedLevel {
        concurrency: total,
        dir: name.clone(),
        records: all.len(),
        start_skew_ms: skew_ms,
        common_window_s: window_s,
        shard_dirs: parts
            .iter()
            .map(|(r, _, d)| r.dir.join(d).display().to_string())
            .collect(),
    };
    Ok((level, summary, name))
}

/// Merges the sharded sweeps in `shard_dirs` into `out` (refused if it holds a run, unless
/// `overwrite`), with plots and `report.html`, and `merge_summary.json` beside them.
pub fn merge(
    shard_dirs: &[PathBuf],
    out: &Path,
    overwrite: bool,
    observer: Arc<dyn Observer>,
) -> Result<MergeReport, Error> {
    let runs = read_shards(shard_dirs, out)?;
    let n = runs[0].shard.count;
    crate::bench::fresh_folder(out, overwrite)?;
    let log = crate::RunLog::create(out)?;
    let observer = crate::Logged::wrap(observer, log.clone());
    let mut levels = Vec::new();
    let mut summaries = Vec::new();
    let mut names = Vec::new();
    for i in 0..runs[0].doc.levels.len() {
        let (level, summary, name) = merge_level(i, &runs, out, observer.as_ref(), &log)?;
        levels.push(level);
        summaries.push(summary);
        names.push(name);
    }
    let slas: Vec<Sla> = runs[0].doc.slas.clone();
    let done: Vec<(&LevelSummary, String)> = summaries.iter().zip(names.iter().cloned()).collect();
    let headroom = runs[0].doc.fleet.as_ref().map_or(0.2, |f| f.headroom);
    let (rows, zone, fleet) = conclude(&done, &slas, runs[0].doc.peak, headroom)?;
    let mut settings = runs[0].doc.settings.clone();
    settings["shard"] = serde_json::json!({"merged": n, "from": shard_dirs});
    let doc = SweepDoc {
        settings,
        levels_planned: serde_json::to_value(
            levels.iter().map(|l| l.concurrency).collect::<Vec<_>>(),
        )
        .unwrap_or(Value::Null),
        slas,
        peak: runs[0].doc.peak,
    };
    let state = if runs.iter().all(|r| r.doc.complete) {
        RunState::Complete
    } else {
        RunState::Interrupted
    };
    write_sweep_summary(out, &doc, rows, &zone, fleet.as_ref(), state)?;
    let report = MergeReport {
        shards: n,
        max_start_skew_ms: levels.iter().map(|l| l.start_skew_ms).fold(0.0, f64::max),
        levels,
        artifact_dir: out.to_owned(),
        summaries,
    };
    write_document(&out.join("merge_summary.json"), &report)?;
    log.info(&format!(
        "merged {n} shards: {}; knee: {}",
        zone.summary, zone.knee.reason
    ));
    crate::render::render_quietly(out, observer.as_ref());
    Ok(report)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A finished stream of `tokens` chunks, one per 10 ms after a 50 ms first token.
    fn record(origin: u64, start_ms: u64, tokens: u32) -> RequestRecord {
        let mut r = RequestRecord::new(start_ms, kneepoint_core::Phase::Profiling);
        r.origin_unix_ns = origin;
        r.start_ns = start_ms * 1_000_000;
        r.response_ns = Some(r.start_ns + 40_000_000);
        r.first_content_ns = Some(r.start_ns + 50_000_000);
        r.intended_start_ns = Some(r.start_ns);
        r.chunk_ns = (0..u64::from(tokens))
            .map(|i| r.start_ns + 50_000_000 + i * 10_000_000)
            .collect();
        r.end_ns = *r.chunk_ns.last().unwrap();
        r.output_tokens = Some(tokens);
        r.input_tokens = Some(10);
        r
    }

    #[test]
    fn shards_a_second_apart_merge_on_one_clock_over_their_common_window() {
        let t0 = 1_000_000_000_000_000_000u64;
        // Shard 0 starts at t0 and shard 1 one second later (its own clock starts then):
        // each runs back-to-back requests of 96 tokens (1 s each) for 5 s.
        let shard = |origin: u64| {
            (0..5)
                .map(|k| record(origin, k * 1000, 96))
                .collect::<Vec<_>>()
        };
        let m = merge_records(
            vec![shard(t0), shard(t0 + 1_000_000_000)],
            2,
            &GoodputSlo::default(),
        )
        .unwrap();
        assert_eq!(m.all.len(), 10);
        assert!(m.all.iter().all(|r| r.origin_unix_ns == t0));
        // Every time of shard 1's records moved by the second between the origins.
        let late = m.all.iter().find(|r| r.start_ns == 1_000_000_000).unwrap();
        assert_eq!(late.response_ns, Some(1_040_000_000));
        assert_eq!(late.first_content_ns, Some(1_050_000_000));
        assert_eq!(late.intended_start_ns, Some(1_000_000_000));
        assert_eq!(late.chunk_ns[0], 1_050_000_000);
        assert!((m.skew_ms - 1000.0).abs() < 1e-9);
        // Both ran from 1 s to 5 s (shard 0's end): 4 s in which two streams emitted 96 tokens
        // per 950 ms each.
        assert!((m.window_s - (4.0 + 0.0)).abs() < 0.01, "{}", m.window_s);
        let rate = m.summary.output_token_throughput;
        assert!((rate / (2.0 * 96.0 / 1.0) - 1.0).abs() < 0.06, "{rate}");
        // Over the union (6 s) it would be 960 / 6 = 160 tokens/s: the window is not diluted.
        assert!(rate > 180.0, "{rate}");
        assert!(m.windowed && m.measured_shards == 2);
    }

    #[test]
    fn overflowing_times_are_refused_and_lone_shards_have_no_window() {
        let mut r = record(5_000_000_000, 0, 4);
        r.end_ns = u64::MAX;
        assert!(merge_records(
            vec![vec![record(1, 0, 4)], vec![r]],
            2,
            &GoodputSlo::default()
        )
        .is_none());
        let a = (0..3).map(|k| record(1, k * 1000, 8)).collect::<Vec<_>>();
        let b = (0..3)
            .map(|k| record(1 + 60_000_000_000, k * 1000, 8))
            .collect::<Vec<_>>();
        let m = merge_records(vec![a, b], 2, &GoodputSlo::default()).unwrap();
        assert!(!m.windowed && m.window_s == 0.0);
    }
}
