//! The max-concurrency-under-SLA search inside another program: a scripted in-process model
//! (kneepoint-testkit's), SLAs on request latency and error rate, and the answer with why.
//!
//! `cargo run -p kneepoint-engine --example embed_planner`

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kneepoint_engine::{CancelToken, Search, SearchReport};
use kneepoint_planner::{SearchConfig, Sla};
use kneepoint_testkit::{MockTransport, Model};
use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticWorkload};

/// Searches concurrency 1..=64 for the highest level whose p99 request latency stays under
/// 60 ms (8 tokens, 2 ms apart alone, 10 % slower per other request in flight).
pub async fn search_into(dir: &Path) -> anyhow::Result<SearchReport> {
    let model = Model::paced(Duration::from_millis(2), Duration::from_millis(2), 0.1);
    let (transport, _handle) = MockTransport::new(model);
    let workload = SyntheticWorkload::new(
        load_tokenizer("builtin")?,
        LengthDist::Fixed(32),
        LengthDist::Fixed(8),
        3,
    )?;
    let mut config = SearchConfig::new(vec![
        Sla::parse("request_latency:p99:<=:60")?,
        Sla::parse("error_rate:avg:<=:0.01")?,
    ]);
    config.concurrency_min = 1;
    config.concurrency_max = 64;
    config.max_iterations = 6;
    config.request_count = 64;
    let report = Search::builder(Arc::new(transport))
        .workload(workload)
        .config(config)
        .artifacts(dir)
        .build()?
        .run(&CancelToken::new())
        .await?;
    Ok(report)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or("artifacts/embed-planner".into());
    let report = search_into(Path::new(&dir)).await?;
    for p in &report.history {
        println!(
            "probe {} at {}: {}",
            p.probe.iteration, p.probe.concurrency, p.pass
        );
    }
    println!("{}", report.outcome.explanation);
    Ok(())
}
