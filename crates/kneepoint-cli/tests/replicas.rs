//! Issue 58, part 2: replicas per instance. On a 4-GPU instance (ml.g6e.12xlarge), a launch
//! at tensor parallelism 1 runs four engines behind one port (`--data-parallel-size
//! {data_parallel_size}`, which kneepoint fills with GPUs / TP) and one at TP 4 runs one:
//! each is measured as the whole instance, priced as the whole instance, and ranked by the
//! instance's cost per million tokens; recommendations.json and the report show the engines.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use std::path::Path;

use serde_json::Value;

mod common;

const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../kneepoint-fit/configs/gpt-oss-20b.json"
);
const PRICE: f64 = 10.49;

fn config(out: &Path) -> String {
    format!(
        r#"
objective = "cost"
artifact_dir = {out:?}

[model]
config = {MODEL:?}

[workload]
prompt_input_tokens_mean = 256
output_tokens_mean = 64

[search_params]
tpot_sla_ms = 60
ttft_sla_ms = 2000
concurrency_min = 1
concurrency_max = 1024
search_max_iterations = 6
request_count = 48

[[candidates]]
name = "gpt-oss"
instance_type = "ml.g6e.12xlarge"
price_per_hour = {PRICE}
[candidates.deploy]
command = "{{kneepoint}} sim serve --port {{port}} --model-config {MODEL} --instance ml.g6e.12xlarge --tensor-parallel-size {{tensor_parallel_size}} --data-parallel-size {{data_parallel_size}} --max-num-seqs 64 --time-scale 0.2"
ready_path = "/health"
ready_timeout_s = 120
[candidates.matrix]
tensor_parallel_size = [1, 4]
"#
    )
}

#[test]
fn engines_per_instance_are_measured_and_priced_as_the_whole_instance() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let cfg = tmp.path().join("rec.toml");
    let (doc, _) = common::recommend_doc(&cfg, &config(&out), &out);
    let list = doc["candidates"].as_array().unwrap();
    let find = |tp: u64| {
        list.iter()
            .find(|c| c["tensor_parallel"] == tp)
            .unwrap_or_else(|| panic!("no TP {tp}: {doc:#}"))
    };
    let (one, four) = (find(1), find(4));
    assert_eq!(one["replicas_per_instance"], 4, "{one:#}");
    assert_eq!(four["replicas_per_instance"], 1, "{four:#}");
    // the prediction covers the instance's four engines
    assert_eq!(one["prediction"]["replicas"], 4, "{one:#}");
    // each priced as the whole instance: cost per million tokens from its measured tok/s
    for c in [one, four] {
        assert_eq!(c["price_per_instance_hour"].as_f64(), Some(PRICE), "{c:#}");
        let tps = c["point"]["output_token_throughput"].as_f64().unwrap();
        let cost = c["cost_per_million_output_tokens"].as_f64().unwrap();
        let expected = PRICE / (3600.0 * tps) * 1e6;
        assert!(
            (cost / expected - 1.0).abs() < 1e-6,
            "{cost} vs {expected}: {c:#}"
        );
    }
    // ranked by that cost
    let rank = |c: &Value| c["rank"].as_u64().unwrap_or(u64::MAX);
    let cost = |c: &Value| c["cost_per_million_output_tokens"].as_f64().unwrap();
    assert_eq!(rank(one) < rank(four), cost(one) < cost(four), "{doc:#}");
    // the server launched at TP 1 ran four engines
    let log = std::fs::read_to_string(
        out.join(one["artifact_dir"].as_str().unwrap())
            .join("logs/server.log"),
    )
    .unwrap();
    assert!(log.contains("data parallel: 4 engines"), "{log}");
    // and the report shows both
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("4 × TP 1") && html.contains("1 × TP 4"),
        "report lacks the engines"
    );
}
