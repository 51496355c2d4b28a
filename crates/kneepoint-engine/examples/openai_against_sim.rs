//! The built-in OpenAI-compatible transport against the in-process simulator, with the
//! workload's tokenizer counting tokens on both sides (so prompts are exactly the lengths asked
//! for, and the simulator's usage agrees).
//!
//! `cargo run -p kneepoint-engine --example openai_against_sim [DIR]`

use std::path::Path;
use std::sync::Arc;

use kneepoint_engine::{CancelToken, Sweep, SweepReport};
use kneepoint_sim::{SimProfile, SimServer};
use kneepoint_transport::{OpenAiConfig, OpenAiTransport};
use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticWorkload, TokenizerCounter};

/// Starts the simulator on a free loopback port and sweeps it at concurrency 1 and 8.
pub async fn sweep_sim_into(dir: &Path) -> anyhow::Result<SweepReport> {
    let tokenizer = load_tokenizer("builtin")?;
    let counter = Arc::new(TokenizerCounter(tokenizer.clone()));
    let profile = SimProfile::fast();
    let model = profile.model.clone();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let server = SimServer::start_with_counter(profile, addr, counter.clone()).await?;
    let transport = OpenAiTransport::new(OpenAiConfig::new(server.base_url(), model))?;
    let workload =
        SyntheticWorkload::new(tokenizer, LengthDist::Fixed(128), LengthDist::Fixed(16), 5)?;
    let report = Sweep::builder(Arc::new(transport))
        .workload(workload)
        .token_counter(counter)
        .levels([1, 8])
        .request_count(32)
        .artifacts(dir)
        .keep_alive(server)
        .build()?
        .run(&CancelToken::new())
        .await?;
    Ok(report)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or("artifacts/openai-against-sim".into());
    let report = sweep_sim_into(Path::new(&dir)).await?;
    for row in &report.rows {
        let (c, ttft) = (row.concurrency, row.ttft_p50_ms.unwrap_or(f64::NAN));
        println!(
            "concurrency {c}: TTFT p50 {ttft:.1} ms, {} errors",
            row.error_count
        );
    }
    Ok(())
}
