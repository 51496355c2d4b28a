//! A sweep over your own transport, with `kneepoint` as the only kneepoint dependency: a fake
//! in-process model that batches up to eight requests at full speed and thrashes beyond
//! (requests preempt one another), three concurrency levels, the full artifact folder and the
//! knee (at 8: past it, throughput falls while latency grows).
//!
//! `cargo run -p kneepoint --example custom_transport_sweep [DIR]`, then `kneepoint report DIR`
//! renders the same folder again, byte for byte.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kneepoint::types::{async_trait, Chunk, Error, EventStream, Request, ResponseEvent, Transport};

/// A token every 4 ms for up to eight requests at once; beyond, the gap grows with the square
/// of the load (at 32, 64 ms), so that the knee stands out even on a busy machine.
#[derive(Default)]
struct FakeModel {
    in_flight: std::sync::Arc<AtomicUsize>,
}

#[async_trait]
impl Transport for FakeModel {
    async fn send(&self, request: &Request) -> Result<EventStream, Error> {
        let load = self.in_flight.fetch_add(1, Ordering::SeqCst) as u64 + 1;
        let (in_flight, n) = (
            self.in_flight.clone(),
            request.max_output_tokens.unwrap_or(8),
        );
        let gap = Duration::from_millis(4 * load.div_ceil(8).pow(2));
        let stream = futures_util::stream::unfold(0, move |i| {
            let in_flight = in_flight.clone();
            async move {
                if i == n {
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    return None;
                }
                tokio::time::sleep(gap).await;
                Some((Ok(ResponseEvent::Chunk(Chunk::content(" token"))), i + 1))
            }
        });
        Ok(Box::pin(stream))
    }
}

// sweep: begin
use std::path::Path;
use std::sync::Arc;

use kneepoint::prelude::*;

/// The sweep itself: a workload, the levels, the folder.
pub async fn sweep_into(dir: &Path) -> anyhow::Result<SweepReport> {
    Ok(Sweep::builder(Arc::new(FakeModel::default()))
        .workload(kneepoint::synthetic(64, 8, 1)?)
        .levels([1, 8, 32])
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
    let dir = dir.unwrap_or("artifacts/custom-transport".into());
    let report = sweep_into(Path::new(&dir)).await?;
    for row in &report.rows {
        let (c, tps, p99) = (row.concurrency, row.output_token_throughput, row.e2e_p99_ms);
        println!("concurrency {c:>3}: {tps:>8.0} tokens/s, p99 {p99:?} ms");
    }
    println!("knee: {:?}; files in {dir}", report.zone.knee.knee);
    Ok(())
}
// sweep: end
