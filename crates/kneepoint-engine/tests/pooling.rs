//! Embeddings and rerank endpoints against the simulator: batches of exact-length inputs, one
//! JSON answer per request with an item per input, no tokens generated; request latency and
//! throughput in inputs and input tokens per second.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use kneepoint_engine::LevelSettings;
use kneepoint_sim::SimProfile;
use kneepoint_transport::Api;
use kneepoint_workload::{LengthDist, Pooling, SyntheticConfig};
use serde_json::Value;

async fn sweep(api: Api, pooling: Pooling) -> anyhow::Result<(Vec<Value>, Value, Value)> {
    let dir = tempfile::tempdir()?;
    let (_server, transport) = support::simulator(SimProfile::fast(), api).await?;
    let mut config = SyntheticConfig::new(LengthDist::Fixed(32), LengthDist::Fixed(1), 4);
    config.pooling = Some(pooling);
    let settings = LevelSettings::default();
    let level = support::one_level(transport, config, settings, (4, 20), dir.path()).await?;
    Ok((
        support::records(&level)?,
        support::json(&level, "profile_export_aiperf.json")?,
        support::json(&level, "inputs.json")?,
    ))
}

fn check(records: &[Value], agg: &Value, batch: u64, input_tokens: f64) {
    assert_eq!(records.len(), 20);
    for r in records {
        assert!(r["error"].is_null(), "{r}");
        let (md, m) = (&r["metadata"], &r["metrics"]);
        assert_eq!(md["pooled_items"], batch);
        assert!(m["request_latency"]["value"].as_f64().unwrap() > 0.0);
        assert!(m.get("time_to_first_token").is_none(), "{m}");
        assert!(m.get("output_sequence_length").is_none(), "{m}");
        assert_eq!(m["input_sequence_length"]["value"], input_tokens);
        assert!(md["server_input_tokens"].as_u64().unwrap() > 0);
    }
    let rps = agg["request_throughput"]["avg"].as_f64().unwrap();
    let ips = agg["input_throughput"]["avg"].as_f64().unwrap();
    let tps = agg["input_token_throughput"]["avg"].as_f64().unwrap();
    assert!(
        (ips - rps * batch as f64).abs() < 1e-6 * ips,
        "{ips} vs {rps}"
    );
    assert!(
        (tps - rps * input_tokens).abs() < 1e-6 * tps,
        "{tps} vs {rps}"
    );
    assert_eq!(agg["output_token_throughput"]["avg"], 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_batches() -> anyhow::Result<()> {
    let (records, agg, inputs) = sweep(Api::Embeddings, Pooling::Embed { batch: 4 }).await?;
    check(&records, &agg, 4, 4.0 * 32.0);
    let body = &inputs["data"][0]["payloads"][0];
    assert_eq!(body["input"].as_array().unwrap().len(), 4);
    assert!(body.get("messages").is_none() && body.get("max_tokens").is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerank_and_score_queries() -> anyhow::Result<()> {
    let (records, agg, inputs) = sweep(Api::Rerank, Pooling::Rank { batch: 3 }).await?;
    // the query counts with each of the three documents
    check(&records, &agg, 3, 3.0 * (32.0 + 32.0));
    let body = &inputs["data"][0]["payloads"][0];
    assert!(body["query"].is_string());
    assert_eq!(body["documents"].as_array().unwrap().len(), 3);
    let (records, agg, inputs) = sweep(Api::Score, Pooling::Rank { batch: 2 }).await?;
    check(&records, &agg, 2, 2.0 * 64.0);
    assert_eq!(
        inputs["data"][0]["payloads"][0]["text_2"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    Ok(())
}
