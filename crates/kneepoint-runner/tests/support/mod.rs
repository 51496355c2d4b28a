//! Helpers shared by the runner's integration tests.

use std::sync::Arc;

use kneepoint_core::{Request, Transport};
use kneepoint_runner::{run_level, LevelConfig};

/// `n` three-token prompts with ids `0..n`.
pub fn requests(n: u64) -> Vec<Request> {
    (0..n)
        .map(|i| {
            let mut r = Request::text(i, "a b c");
            r.input_tokens = Some(3);
            r
        })
        .collect()
}

/// Runs one request through `transport` at concurrency 1, without warm-up or sinks.
#[allow(clippy::unwrap_used)]
pub async fn one_request(transport: impl Transport + 'static) -> kneepoint_runner::LevelRun {
    run_level(
        Arc::new(transport),
        &LevelConfig::new(1),
        requests(1),
        vec![],
        vec![],
        None,
    )
    .await
    .unwrap()
}
