//! The max-concurrency-under-SLA search inside another program, with `kneepoint` as the only
//! kneepoint dependency: a scripted in-process model (the `testkit` feature's), SLAs on request
//! latency and error rate, and the answer with why.
//!
//! `cargo run -p kneepoint --features testkit --example embed_search [DIR]`

use std::time::Duration;

use kneepoint::testkit::{MockTransport, Model};

/// The model under test (the transport): 8 tokens, 2 ms apart alone, 10 % slower per other
/// request in flight.
fn model() -> MockTransport {
    let pace = Duration::from_millis(2);
    MockTransport::new(Model::paced(pace, pace, 0.1)).0
}

// search: begin
use std::path::Path;
use std::sync::Arc;

use kneepoint::prelude::*;

/// The highest concurrency in 1..=64 whose p99 request latency stays under 60 ms.
pub async fn search_into(dir: &Path) -> anyhow::Result<SearchReport> {
    let slas = ["request_latency:p99:<=:60", "error_rate:avg:<=:0.01"].map(Sla::parse);
    let mut config = SearchConfig::new(slas.into_iter().collect::<Result<_, _>>()?);
    (config.concurrency_min, config.concurrency_max) = (1, 64);
    config.max_iterations = 6;
    Ok(Search::builder(Arc::new(model()))
        .workload(kneepoint::synthetic(32, 8, 3)?)
        .config(config)
        .request_count(64)
        .artifacts(dir)
        .overwrite(true) // the example runs again as it is
        .build()?
        .run(&CancelToken::new())
        .await?)
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
