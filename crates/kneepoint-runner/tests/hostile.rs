//! Issue 20: transports that misbehave on purpose (never answer, fall silent, stream forever,
//! report implausible usage), each with the record it must produce.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream;
use kneepoint_core::{
    async_trait, Chunk, Error, ErrorKind, EventStream, Request, RequestRecord, ResponseEvent,
    TokenSource, Transport, Usage,
};
use kneepoint_runner::{run_level, LevelConfig};

mod support;
use support::{one_request, requests};

/// A server that accepts and never answers (`send` never resolves), or sends headers and then
/// nothing (`stream` never yields), or streams tokens forever.
enum Hostile {
    NoHeaders,
    Silence,
    Endless,
}

#[async_trait]
impl Transport for Hostile {
    async fn send(&self, _: &Request) -> Result<EventStream, Error> {
        match self {
            Hostile::NoHeaders => std::future::pending().await,
            Hostile::Silence => Ok(Box::pin(stream::pending())),
            Hostile::Endless => Ok(Box::pin(stream::repeat_with(|| {
                Ok(ResponseEvent::Chunk(Chunk::content(" tok")))
            }))),
        }
    }
}

async fn hostile(t: Hostile, deadlines: impl FnOnce(&mut LevelConfig)) -> RequestRecord {
    let mut cfg = LevelConfig::new(1);
    // The safety net: a bug shows as a `request` timeout after 30 s, not as a hang.
    cfg.deadlines.request = Some(Duration::from_secs(30));
    deadlines(&mut cfg);
    let mut reqs = requests(1);
    reqs[0].max_output_tokens = Some(16);
    let run = run_level(Arc::new(t), &cfg, reqs, vec![], vec![], None)
        .await
        .unwrap();
    run.records.into_iter().next().unwrap()
}

#[tokio::test]
async fn the_first_token_deadline_runs_from_the_start_even_without_headers() {
    let r = hostile(Hostile::NoHeaders, |c| {
        c.deadlines.first_token = Some(Duration::from_millis(50))
    })
    .await;
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert!(e.message.contains("first_token"), "{}", e.message);
    assert!(r.response_ns.is_none());
}

#[tokio::test]
async fn headers_then_silence_is_a_first_token_timeout_not_an_idle_one() {
    // A queued request is silent after its headers: the idle deadline (gaps between tokens)
    // leaves it alone, the first-token deadline ends it.
    let r = hostile(Hostile::Silence, |c| {
        c.deadlines.idle = Some(Duration::from_millis(20));
        c.deadlines.first_token = Some(Duration::from_millis(200));
    })
    .await;
    let e = r.error.unwrap();
    assert!(e.message.contains("first_token"), "{}", e.message);
    assert!(r.response_ns.is_some() && r.chunk_ns.is_empty());
}

#[tokio::test]
async fn an_endless_stream_is_cut_off_and_its_record_kept() {
    let r = hostile(Hostile::Endless, |_| {}).await;
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::MalformedResponse);
    assert!(e.message.contains("kept streaming"), "{}", e.message);
    assert!(e.message.contains("at most 16 tokens"), "{}", e.message);
    // The floor of 65,536 chunks for a short request (a server may send more than asked for
    // legitimately), then one more: the chunks that arrived stay in the record.
    assert_eq!(r.chunk_ns.len(), (1 << 16) + 1);
}

/// Answers with `chunks` one-token chunks, then usage claiming `usage` completion tokens.
struct Lying {
    chunks: usize,
    usage: u32,
}

#[async_trait]
impl Transport for Lying {
    async fn send(&self, _: &Request) -> Result<EventStream, Error> {
        let mut events: Vec<Result<ResponseEvent, Error>> = (0..self.chunks)
            .map(|_| Ok(ResponseEvent::Chunk(Chunk::content(" tok"))))
            .collect();
        events.push(Ok(ResponseEvent::Usage(Usage::new(
            Some(3),
            Some(self.usage),
        ))));
        Ok(Box::pin(stream::iter(events)))
    }
}

/// Issue 20, item 9: usage 100x the chunks sent (2.39 M tokens/s), or 0 for generated text,
/// was taken as given. It is now set aside for the client's count and kept in the record;
/// `trust_server_usage` restores the server's number.
#[tokio::test]
async fn implausible_server_usage_is_set_aside_unless_trusted() {
    for (chunks, usage) in [(20, 2000), (20, 0)] {
        let r = one_request(Lying { chunks, usage }).await.records.remove(0);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(r.rejected_usage_tokens, Some(usage));
        assert_eq!(r.output_tokens, r.client_output_tokens);
        assert_ne!(r.output_tokens_source, Some(TokenSource::Usage));
        let mut cfg = LevelConfig::new(1);
        cfg.trust_server_usage = true;
        let run = run_level(
            Arc::new(Lying { chunks, usage }),
            &cfg,
            requests(1),
            vec![],
            vec![],
            None,
        )
        .await
        .unwrap();
        assert_eq!(run.records[0].output_tokens, Some(usage));
        assert_eq!(run.records[0].rejected_usage_tokens, None);
    }
    // Plausible counts are kept: several tokens per chunk, a tokenizer that differs.
    for (chunks, usage) in [(20, 20), (20, 60), (10, 12)] {
        let r = one_request(Lying { chunks, usage }).await.records.remove(0);
        assert_eq!(
            r.output_tokens,
            Some(usage),
            "{chunks} chunks, {usage} tokens"
        );
        assert_eq!(r.output_tokens_source, Some(TokenSource::Usage));
    }
}
