//! Honest numbers by default: the server's prompt counts are checked against the client's,
//! output tokens are counted with the workload's tokenizer when the server reports no usage,
//! and every builder setting is honoured or refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kneepoint::types::{Metric, Stat};
use std::net::SocketAddr;
use std::sync::Arc;

use kneepoint::prelude::*;
use kneepoint::sim::SimServer;
use kneepoint::testkit::{MockTransport, Model};
use kneepoint::types::ApproxTokenCounter;

/// A sweep of two small levels over `transport` into a fresh folder.
async fn sweep(transport: Arc<dyn Transport>, isl: u32) -> anyhow::Result<SweepReport> {
    let dir = tempfile::tempdir()?;
    let report = Sweep::builder(transport)
        .workload(kneepoint::synthetic(isl, 8, 11)?)
        .levels([1, 4])
        .request_count(16)
        .artifacts(dir.path())
        .build()?
        .run(&CancelToken::new())
        .await?;
    // The warnings are in the level's files too.
    let text = std::fs::read_to_string(dir.path().join("concurrency_4/benchmark_summary.txt"))?;
    let json =
        std::fs::read_to_string(dir.path().join("concurrency_4/profile_export_aiperf.json"))?;
    let mismatch = report.summaries[1]
        .warnings
        .iter()
        .any(|w| w.starts_with("input lengths"));
    assert_eq!(text.contains("input lengths"), mismatch);
    assert_eq!(json.contains("input lengths"), mismatch);
    Ok(report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_counting_prompts_with_another_tokenizer_is_flagged() -> anyhow::Result<()> {
    // Told otherwise: the simulator estimates prompt lengths from whitespace words, as a server
    // with another tokenizer would count them differently prompt by prompt.
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let profile = SimProfile::fast();
    let model = profile.model.clone();
    let server = SimServer::start_with_counter(profile, addr, Arc::new(ApproxTokenCounter)).await?;
    let transport = OpenAiTransport::new(OpenAiConfig::new(server.base_url(), model))?;
    let report = sweep(Arc::new(transport), 256).await?;
    for s in &report.summaries {
        // The client sent exactly 256 tokens; the summary says so, and says the server
        // counted otherwise.
        assert_eq!(s.value(Metric::InputSequenceLength, Stat::Avg), Some(256.0));
        let w = s.warnings.iter().find(|w| w.starts_with("input lengths"));
        let w = w.unwrap_or_else(|| panic!("no ISL warning in {:?}", s.warnings));
        assert!(w.contains("where the client counted 256.0"), "{w}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_counts_with_the_workload_tokenizer_by_default() -> anyhow::Result<()> {
    // A client that does not tell the server the prompt's length (as at any --url): the
    // simulator tokenises the prompt itself, with kneepoint's default tokenizer.
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let profile = SimProfile::fast();
    let model = profile.model.clone();
    let server = SimServer::start(profile, addr).await?;
    let transport = OpenAiTransport::new(OpenAiConfig::new(server.base_url(), model))?;
    let report = sweep(Arc::new(transport), 256).await?;
    for s in &report.summaries {
        assert_eq!(s.value(Metric::InputSequenceLength, Stat::Avg), Some(256.0));
        assert!(
            s.warnings.iter().all(|w| !w.contains("input lengths")),
            "{:?}",
            s.warnings
        );
    }
    // The server's own count, per request, is the client's.
    let truth = server.truth();
    assert!(!truth.is_empty());
    assert!(
        truth.iter().all(|t| t.prompt_tokens == 256),
        "{:?}",
        truth.first()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_server_usage_output_is_counted_with_the_workload_tokenizer() -> anyhow::Result<()>
{
    // The mock model reports usage: without it, the client counts the text itself.
    let mut model = Model::instant(8);
    model.usage = false;
    let (transport, _handle) = MockTransport::new(model);
    let report = sweep(Arc::new(transport), 64).await?;
    for s in &report.summaries {
        assert_eq!(
            s.osl_sources
                .get(&kneepoint::types::TokenSource::Tokenizer.into()),
            Some(&s.ok_count),
            "{:?}",
            s.osl_sources
        );
        assert!(s
            .warnings
            .iter()
            .all(|w| !w.contains("whitespace-word estimate")));
    }
    Ok(())
}

#[tokio::test]
async fn a_search_takes_its_request_count_from_one_place() -> anyhow::Result<()> {
    let config = || {
        let mut c = SearchConfig::new(vec![Sla::parse("request_latency:p99:<=:1000").unwrap()]);
        (c.concurrency_min, c.concurrency_max, c.request_count) = (1, 4, 20);
        c
    };
    let (transport, _handle) = MockTransport::new(Model::instant(4));
    let transport: Arc<dyn Transport> = Arc::new(transport);
    let dir = tempfile::tempdir()?;
    // The builder's count replaces the parameters' (honoured: see the examples' test, where
    // every probe measures the builder's 64).
    let built = Search::builder(transport.clone())
        .workload(kneepoint::synthetic(16, 4, 1)?)
        .config(config())
        .request_count(7)
        .artifacts(dir.path().join("a"))
        .build()?;
    assert_eq!(built.search_config().request_count, 7);
    // Level settings asking for another count than the parameters are refused, not ignored.
    let mut settings = LevelSettings::default();
    settings.request_count = 50;
    let e = Search::builder(transport)
        .workload(kneepoint::synthetic(16, 4, 1)?)
        .settings(settings.clone())
        .config(config())
        .artifacts(dir.path().join("b"))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("50 requests per level"), "{e}");
    // Both the search's own count and the settings': refused unless they agree.
    let (transport, _handle) = MockTransport::new(Model::instant(4));
    let e = Search::builder(Arc::new(transport))
        .workload(kneepoint::synthetic(16, 4, 1)?)
        .settings(settings)
        .config(config())
        .request_count(7)
        .artifacts(dir.path().join("c"))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("set one of them"), "{e}");
    // Settings made from the defaults to set something else say nothing of the count.
    let mut by_confidence = LevelSettings::default();
    by_confidence.seed = 9;
    let (transport, _handle) = MockTransport::new(Model::instant(4));
    let built = Search::builder(Arc::new(transport))
        .workload(kneepoint::synthetic(16, 4, 1)?)
        .settings(by_confidence)
        .config(config())
        .request_count(9)
        .artifacts(dir.path().join("d"))
        .build()?;
    assert_eq!(built.search_config().request_count, 9);
    assert!(
        !dir.path().join("b").exists(),
        "nothing is created before the settings are valid"
    );
    Ok(())
}

#[tokio::test]
async fn a_sweep_honours_or_refuses_every_count_and_level_it_is_given() -> anyhow::Result<()> {
    let (transport, _handle) = MockTransport::new(Model::instant(2));
    let transport: Arc<dyn Transport> = Arc::new(transport);
    let dir = tempfile::tempdir()?;
    let plan = SweepPlan::uniform(&[1, 2], 5)?;
    let builder = |name: &str| {
        Sweep::builder(transport.clone())
            .workload(kneepoint::synthetic(16, 2, 1).unwrap())
            .artifacts(dir.path().join(name))
    };
    // A plan carries its levels and counts: other levels or a count beside it are refused.
    let e = builder("a")
        .plan(plan.clone())
        .levels([8])
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("not both"), "{e}");
    let e = builder("b")
        .plan(plan.clone())
        .request_count(9)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("would be ignored"), "{e}");
    // The builder's count wins over the settings', whichever comes first.
    let mut settings = LevelSettings::default();
    settings.request_count = 50;
    let report = builder("c")
        .request_count(6)
        .settings(settings)
        .levels([1])
        .build()?
        .run(&CancelToken::new())
        .await?;
    assert_eq!(report.sent, vec![6]);
    let report = builder("d")
        .plan(plan)
        .build()?
        .run(&CancelToken::new())
        .await?;
    assert_eq!(report.sent, vec![5, 5]);
    Ok(())
}
