//! Levels longer than the records a level keeps in memory (`--records-in-memory`): summarised
//! as the records finish, in bounded memory. Every count and total agrees with the records
//! on disk, the percentiles are within a histogram bucket of the exact ones (exact with
//! `--exact-percentiles`), `report` re-renders the level byte for byte, and `inputs.json`
//! lists at most `--inputs-limit` requests while counting all of them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use kneepoint_cli::run_sweep;
use kneepoint_metrics::export::{read_jsonl, records_path, INPUTS_NOTE_KEY};
use kneepoint_metrics::{GoodputSlo, LevelSummary, PERCENTILES};
use serde_json::Value;

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The level's saved summary and the exact one recomputed from every record on disk.
fn saved_and_exact(level: &Path) -> (Value, LevelSummary, usize) {
    let records = read_jsonl(&records_path(level)).unwrap();
    let exact = LevelSummary::from_records(16, &records, &GoodputSlo::default());
    (
        json(&level.join("profile_export_aiperf.json")),
        exact,
        records.len(),
    )
}

async fn run(extra: &[&str], dir: &Path) {
    let mut args = vec![
        "--concurrency",
        "16",
        "--records-in-memory",
        "50",
        "--inputs-limit",
        "20",
        "--seed",
        "5",
    ];
    args.extend_from_slice(extra);
    run_sweep(&common::fast_sweep("16", &args, dir).unwrap(), false)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_level_is_summarised_as_it_runs_and_re_rendered_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let (timed, counted) = (tmp.path().join("timed"), tmp.path().join("counted"));
    run(&["--duration-s", "3", "--grace-s", "5"], &timed).await;
    run(&["--request-count", "600", "--exact-percentiles"], &counted).await;
    for (dir, exact_percentiles) in [(&timed, false), (&counted, true)] {
        let level = dir.join("concurrency_16");
        let (saved, exact, n) = saved_and_exact(&level);
        assert!(n > 50, "{n} records: the level must outgrow the 50 kept");
        // 15 gaps per request: the inter-chunk latencies outgrow exact counting (4,096
        // distinct values) and come from a histogram, or a second pass over the file.
        let gaps = exact.metrics[&kneepoint_core::Metric::InterChunkLatency]
            .stats
            .count;
        assert!(gaps > 4096, "{gaps} inter-chunk gaps");
        let text = std::fs::read_to_string(level.join("benchmark_summary.txt")).unwrap();
        assert_eq!(
            text.contains("histograms of 3 significant digits"),
            !exact_percentiles,
            "{text}"
        );
        let note = &saved["input_config"]["level"]["summary"];
        assert_eq!(note["streamed"], true, "{note}");
        assert_eq!(note["records"], n);
        assert_eq!(saved["request_count"]["avg"], n as f64);
        assert_eq!(
            saved["output_token_throughput"]["avg"].as_f64().unwrap(),
            exact.output_token_throughput
        );
        for (metric, m) in &exact.metrics {
            for (p, _) in PERCENTILES {
                let (got, want) = (
                    saved[metric.name()][p].as_f64().unwrap(),
                    m.stats.get(p).unwrap(),
                );
                if exact_percentiles {
                    assert_eq!(got, want, "{metric} {p}");
                } else {
                    assert!(
                        (got - want).abs() <= want.abs() / 1024.0 + 1e-9,
                        "{metric} {p}: {got} vs {want}"
                    );
                }
            }
            assert_eq!(
                saved[metric.name()]["max"].as_f64().unwrap(),
                m.stats.max,
                "{metric}"
            );
        }
        // inputs.json: the first 20 listed, every request counted.
        let inputs = json(&level.join("inputs.json"));
        assert_eq!(inputs["data"].as_array().unwrap().len(), 20);
        assert_eq!(inputs[INPUTS_NOTE_KEY]["requests"], n);
        // The rest as ids and lengths: every request sent appears once, listed or not, with
        // the lengths its record holds.
        let records = read_jsonl(&records_path(&level)).unwrap();
        let by_id: std::collections::HashMap<u64, &kneepoint_core::RequestRecord> =
            records.iter().map(|r| (r.request_id, r)).collect();
        let unlisted = inputs[INPUTS_NOTE_KEY]["unlisted"].as_array().unwrap();
        assert_eq!(unlisted.len(), n - 20);
        let mut ids: Vec<u64> = inputs["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["session_id"].as_str().unwrap().parse().unwrap())
            .collect();
        for u in unlisted {
            let id: u64 = u["session_id"].as_str().unwrap().parse().unwrap();
            let r = by_id[&id];
            assert_eq!(
                u["input_tokens"].as_u64(),
                r.input_tokens.map(u64::from),
                "{u}"
            );
            assert_eq!(
                u["max_output_tokens"].as_u64(),
                r.requested_output_tokens.map(u64::from),
                "{u}"
            );
            ids.push(id);
        }
        ids.sort_unstable();
        let mut sent: Vec<u64> = by_id.keys().copied().collect();
        sent.sort_unstable();
        assert_eq!(ids, sent);
        // Re-rendered from the records alone, every level file is the same, byte for byte.
        let before = std::fs::read(level.join("profile_export_aiperf.json")).unwrap();
        let text = std::fs::read(level.join("benchmark_summary.txt")).unwrap();
        kneepoint_cli::run_report(dir, false).unwrap();
        assert_eq!(
            before,
            std::fs::read(level.join("profile_export_aiperf.json")).unwrap()
        );
        assert_eq!(
            text,
            std::fs::read(level.join("benchmark_summary.txt")).unwrap()
        );
    }
}

/// A timed level's generator draws ahead of the senders; what it drew and did not send goes
/// to the next level first: the request ids sent over the levels are 0, 1, 2, ... with no gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_levels_send_every_request_they_draw_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--concurrency",
        "4,8",
        "--duration-s",
        "1",
        "--grace-s",
        "5",
        "--seed",
        "3",
    ];
    run_sweep(&common::fast_sweep("4", &args, tmp.path()).unwrap(), false)
        .await
        .unwrap();
    let mut ids: Vec<u64> = Vec::new();
    for c in ["concurrency_4", "concurrency_8"] {
        let mut level: Vec<u64> = read_jsonl(&records_path(&tmp.path().join(c)))
            .unwrap()
            .iter()
            .map(|r| r.request_id)
            .collect();
        level.sort_unstable();
        assert!(!level.is_empty());
        ids.extend(level);
    }
    let first = ids[0];
    let want: Vec<u64> = (first..first + ids.len() as u64).collect();
    assert_eq!(ids, want, "the ids sent skip or repeat");
}
