//! Issue 58, part 6: a recommendation with no `[model]` (a CPU server, a GPU missing from the
//! catalog) has no predictions, so structure stands in for them: a larger `max_num_seqs` runs
//! every level a smaller one does the same way, and more, so under the throughput goal it
//! never scores worse. The adaptive strategy measures the top of the batch limit fully first
//! and skips what it dominates, so a small space on a real engine is not measured whole. Each
//! combination is a launched `sim serve` (the calibrated engine, whose batch limit and speed
//! the matrix sets).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use std::path::Path;

use serde_json::Value;

mod common;

fn config(out: &Path, strategy: &str) -> String {
    format!(
        r#"
objective = "throughput"
artifact_dir = {out:?}
search_strategy = "{strategy}"

[workload]
prompt_input_tokens_mean = 128
output_tokens_mean = 32

[search_params]
e2e_sla_ms = 60000
concurrency_min = 1
concurrency_max = 256
search_max_iterations = 5
request_count = 48

[[candidates]]
name = "cpu"
instance_type = "local-cpu"
price_per_hour = 1.0
[candidates.deploy]
command = "{{kneepoint}} sim serve --port {{port}} --max-num-seqs {{max_num_seqs}} --time-scale {{time_scale}}"
ready_path = "/health"
ready_timeout_s = 60
[candidates.matrix]
max_num_seqs = [8, 32, 128]
time_scale = [0.05, 0.1]
"#
    )
}

fn recommend(dir: &Path, strategy: &str) -> Value {
    let out = dir.join(strategy);
    let cfg = dir.join(format!("{strategy}.toml"));
    common::recommend_doc(&cfg, &config(&out, strategy), &out).0
}

/// Each measured candidate's output tokens/s per instance, by name.
fn throughputs(doc: &Value) -> Vec<(String, f64)> {
    common::candidate_values(doc, "output_tokens_per_s_per_instance", |_| true)
}

fn best(doc: &Value) -> (String, f64) {
    throughputs(doc)
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or_else(|| panic!("nothing measured: {doc:#}"))
}

#[test]
fn without_a_model_the_batch_limit_skips_what_it_dominates() {
    let tmp = tempfile::tempdir().unwrap();
    let grid = recommend(tmp.path(), "grid");
    let adaptive = recommend(tmp.path(), "adaptive");
    let (gw, gt) = best(&grid);
    let (aw, at) = best(&adaptive);
    let launches = |d: &Value| d["spent"]["launches"].as_u64().unwrap();
    let hours = |d: &Value| d["spent"]["instance_hours"].as_f64().unwrap();
    eprintln!(
        "grid: {gw} at {gt:.0} ({} launches, {:.5} h; all {:?}); adaptive: {aw} at {at:.0} ({} launches, {:.5} h); {}",
        launches(&grid),
        hours(&grid),
        throughputs(&grid),
        launches(&adaptive),
        hours(&adaptive),
        adaptive["search_stop"]
    );
    assert_eq!(launches(&grid), 6, "{grid:#}");
    // the space discriminates: the grid's best and worst differ by far more than the noise
    let worst = throughputs(&grid)
        .into_iter()
        .map(|t| t.1)
        .fold(f64::INFINITY, f64::min);
    assert!(gt >= 1.3 * worst, "{gt} vs {worst}");
    let grid_tput = |name: &str| {
        throughputs(&grid)
            .into_iter()
            .find(|t| t.0 == name)
            .map_or(0.0, |t| t.1)
    };
    assert!(
        aw == gw || at >= gt * 0.95 || grid_tput(&aw) >= gt * 0.95,
        "adaptive chose {aw} at {at} (the grid measured {}) vs the grid's {gw} at {gt}",
        grid_tput(&aw)
    );
    assert!(launches(&adaptive) <= 3, "{adaptive:#}");
    assert!(hours(&adaptive) <= 0.5 * hours(&grid), "{adaptive:#}");
    let skipped = adaptive["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["trials"].as_array().cloned().unwrap_or_default())
        .filter(|t| {
            t.as_str()
                .is_some_and(|t| t.contains("max_num_seqs 128 was measured"))
        })
        .count();
    assert!(skipped >= 3, "{adaptive:#}");
}
