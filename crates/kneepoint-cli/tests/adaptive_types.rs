//! Issue 58, part 4: the instance type as a search dimension. The adaptive strategy searches
//! one matrix on two instance types jointly (gpt-oss-20b on ml.g5.12xlarge, 4 × A10G, and
//! ml.g6.12xlarge, 4 × L4, each priced at its own rate and predicted by its own stage-1
//! fit), each combination a launched `sim serve` of that setting: one search covers both
//! types, for fewer launches and at most 80 % of the grid's instance-hours, and its winner is
//! the grid's or within 10 % of it on either run's reading (not 5 %: one reading of a
//! simulator on a busy 2-core machine moves between runs). How often the search lands within
//! 5 % of the true best is measured where the truth is known, on 60 spaces: `cargo bench -p
//! kneepoint-cli --bench structural` (docs/deployments.md).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use std::path::Path;

use serde_json::Value;

mod common;

const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../kneepoint-fit/configs/gpt-oss-20b.json"
);

fn candidate(instance: &str, price: f64) -> String {
    format!(
        r#"
[[candidates]]
name = "{instance}"
instance_type = "{instance}"
price_per_hour = {price}
[candidates.deploy]
command = "{{kneepoint}} sim serve --port {{port}} --model-config {MODEL} --instance {instance} --tensor-parallel-size {{tensor_parallel_size}} --data-parallel-size {{data_parallel_size}} --max-num-seqs {{max_num_seqs}} --time-scale 0.2"
ready_path = "/health"
ready_timeout_s = 120
[candidates.matrix]
tensor_parallel_size = [1, 2, 4]
max_num_seqs = [32, 256]
"#
    )
}

fn config(out: &Path, strategy: &str) -> String {
    format!(
        r#"
objective = "cost"
artifact_dir = {out:?}
search_strategy = "{strategy}"

[model]
config = {MODEL:?}

[workload]
prompt_input_tokens_mean = 256
output_tokens_mean = 64

[search_params]
# A TPOT SLA that binds: the prior judges it in the modelled hardware's time, the launched
# simulators run 5 times faster (--time-scale 0.2), and the search reads each launch as that
# speed (before it did not, and skipped the grid's winner, certain: TP 1's modelled 188 ms
# steps against 60 ms its measurement, 38 ms, met).
tpot_sla_ms = 60
ttft_sla_ms = 10000
concurrency_min = 1
concurrency_max = 2048
search_max_iterations = 7
request_count = 48
{}{}"#,
        candidate("ml.g5.12xlarge", 7.09),
        candidate("ml.g6.12xlarge", 5.752)
    )
}

fn recommend(dir: &Path, strategy: &str) -> Value {
    let out = dir.join(strategy);
    let cfg = dir.join(format!("{strategy}.toml"));
    common::recommend_doc(&cfg, &config(&out, strategy), &out).0
}

/// The best ranked or provisional candidate: (name, cost).
fn best(doc: &Value) -> (String, f64) {
    common::candidate_values(doc, "cost_per_million_output_tokens", |_| true)
        .into_iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or_else(|| panic!("nothing costed: {doc:#}"))
}

#[test]
fn the_adaptive_search_spans_two_instance_types() {
    let tmp = tempfile::tempdir().unwrap();
    let grid = recommend(tmp.path(), "grid");
    let adaptive = recommend(tmp.path(), "adaptive");
    let (gw, gc) = best(&grid);
    let (aw, ac) = best(&adaptive);
    let launches = |d: &Value| d["spent"]["launches"].as_u64().unwrap();
    let hours = |d: &Value| d["spent"]["instance_hours"].as_f64().unwrap();
    eprintln!(
        "grid: {gw} at {gc:.4} ({} launches, {:.5} h); adaptive: {aw} at {ac:.4} ({} launches, {:.5} h); {}",
        launches(&grid),
        hours(&grid),
        launches(&adaptive),
        hours(&adaptive),
        adaptive["search_stop"]
    );
    assert_eq!(launches(&grid), 12, "{grid:#}");
    // both instance types were in the one search
    let types: std::collections::BTreeSet<&str> = adaptive["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["instance_type"].as_str())
        .collect();
    assert_eq!(types.len(), 2, "{types:?}");
    let grid_cost = |name: &str| {
        grid["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .and_then(|c| c["cost_per_million_output_tokens"].as_f64())
            .unwrap_or(f64::INFINITY)
    };
    assert!(
        aw == gw || ac <= gc * 1.10 || grid_cost(&aw) <= gc * 1.10,
        "adaptive chose {aw} at {ac} (the grid measured {}) vs the grid's {gw} at {gc}",
        grid_cost(&aw)
    );
    assert!(launches(&adaptive) < launches(&grid), "{adaptive:#}");
    // 3-7 launches, 31-74 % of the grid's hours in four runs of session 17 (at this binding
    // SLA; issue 58's 60 % target for any one space is not met, docs/status.md)
    assert!(hours(&adaptive) <= 0.8 * hours(&grid), "{adaptive:#}");
}
