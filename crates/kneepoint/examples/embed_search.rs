//! The max-concurrency-under-SLA search inside another program, with `kneepoint` as the only
//! kneepoint dependency: a scripted in-process model (the `testkit` feature's), SLAs on request
//! latency and error rate, and the answer with why.
//!
//! `cargo run -p kneepoint --features testkit --example embed_search [DIR]`

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kneepoint::prelude::*;
use kneepoint::testkit::{MockTransport, Model};

// search: begin
/// Searches concurrency 1..=64 for the highest level whose p99 request latency stays under
/// 60 ms (8 tokens, 2 ms apart alone, 10 % slower per other request in flight).
pub async fn search_into(dir: &Path) -> anyhow::Result<SearchReport> {
    let model = Model::paced(Duration::from_millis(2), Duration::from_millis(2), 0.1);
    let (transport, _handle) = MockTransport::new(model);
    let mut config = SearchConfig::new(vec![
        Sla::parse("request_latency:p99:<=:60")?,
        Sla::parse("error_rate:avg:<=:0.01")?,
    ]);
    (config.concurrency_min, config.concurrency_max) = (1, 64);
    config.max_iterations = 6;
    let report = Search::builder(Arc::new(transport))
        .workload(kneepoint::synthetic(32, 8, 3)?)
        .config(config)
        .request_count(64)
        .artifacts(dir)
        .build()?
        .run(&CancelToken::new())
        .await?;
    Ok(report)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::args().nth(1);
    let dir = dir.unwrap_or("artifacts/embed-search".into());
    let report = search_into(Path::new(&dir)).await?;
    println!("{}", report.outcome.explanation);
    Ok(())
}
// search: end
