//! The built-in OpenAI-compatible client against the in-process simulator (the `sim` feature):
//! the simulator counts prompt tokens with the workload's tokenizer, so prompts are exactly the
//! lengths asked for on both sides.
//!
//! `cargo run -p kneepoint --features sim --example openai_against_sim [DIR]`

use std::path::Path;

use kneepoint::prelude::*;

/// Starts the simulator on a free loopback port and sweeps it at concurrency 1 and 8.
pub async fn sweep_sim_into(dir: &Path) -> anyhow::Result<SweepReport> {
    let report = LocalSim::start(SimProfile::fast())
        .await?
        .sweep()
        .workload(kneepoint::synthetic(128, 16, 5)?)
        .levels([1, 8])
        .request_count(32)
        .artifacts(dir)
        .overwrite(true) // the example runs again as it is
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
