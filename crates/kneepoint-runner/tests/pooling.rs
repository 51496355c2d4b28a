//! Pooling answers through the runner: no tokens and still a success, as long as the answer
//! holds between one item and one per input (a rerank may return only its top documents).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kneepoint_core::{
    async_trait, iter_stream, Error, ErrorKind, EventStream, Prompt, Request, ResponseEvent,
    Transport, Usage,
};
use kneepoint_runner::{run_level, LevelConfig};

/// Answers every request with `items` pooled items and its prompt's usage.
struct Pooler {
    items: u32,
}

#[async_trait]
impl Transport for Pooler {
    async fn send(&self, _request: &Request) -> Result<EventStream, Error> {
        Ok(Box::pin(iter_stream(vec![
            Ok(ResponseEvent::Pooled { items: self.items }),
            Ok(ResponseEvent::Usage(Usage::new(Some(12), None))),
        ])))
    }
}

fn batch(id: u64, n: usize) -> Request {
    let mut r = Request::text(id, "");
    r.prompt = Prompt::Batch((0..n).map(|i| format!("input {i}")).collect());
    r.input_tokens = Some(12);
    r
}

async fn run(items: u32) -> Vec<kneepoint_core::RequestRecord> {
    let mut config = LevelConfig::new(2);
    config.require_finish_reason = true;
    let requests = (0..4).map(|i| batch(i, 3)).collect();
    run_level(
        Arc::new(Pooler { items }),
        &config,
        requests,
        Vec::new(),
        Vec::new(),
        None,
    )
    .await
    .unwrap()
    .records
}

#[tokio::test]
async fn an_answer_per_input_or_fewer_succeeds_without_tokens() {
    for items in [3, 1] {
        for r in run(items).await {
            assert!(r.is_ok(), "{items} items: {:?}", r.error);
            assert_eq!(r.pooled_items, Some(items));
            assert!(r.chunk_ns.is_empty() && r.output_tokens.is_none());
            assert_eq!(r.server_input_tokens, Some(12));
        }
    }
}

#[tokio::test]
async fn more_items_than_inputs_or_none_is_malformed() {
    for items in [4, 0] {
        for r in run(items).await {
            let e = r.error.expect("a failure");
            assert_eq!(e.kind, ErrorKind::MalformedResponse, "{e:?}");
            assert!(e.message.contains("items for 3 inputs"), "{}", e.message);
        }
    }
}
