//! Several models and endpoints behind one transport: two simulators, one of them serving two
//! model names (a base model and an adapter). Records say which model and URL served them,
//! `inputs.json` shows the model each body named, and each level writes its aggregates per
//! route beside the level's own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use kneepoint_core::{Route, Transport};
use kneepoint_engine::LevelSettings;
use kneepoint_sim::{SimProfile, SimServer};
use kneepoint_transport::{OpenAiConfig, OpenAiTransport, RouteRule, RouteTarget, RoutedTransport};
use kneepoint_workload::{Conversations, LengthDist, SyntheticConfig};

mod support;
use support::records;

fn target(url: &str, model: &str, weight: f64) -> anyhow::Result<RouteTarget> {
    Ok(RouteTarget {
        transport: Arc::new(OpenAiTransport::new(OpenAiConfig::new(url, model))?),
        route: Route {
            model: model.into(),
            url: url.into(),
        },
        weight,
    })
}

async fn sweep(
    transport: RoutedTransport,
    conversations: Option<Conversations>,
    dir: &std::path::Path,
) -> anyhow::Result<std::path::PathBuf> {
    let mut config = SyntheticConfig::new(LengthDist::Fixed(24), LengthDist::Fixed(6), 9);
    config.conversations = conversations;
    let settings = LevelSettings::default();
    support::one_level(Arc::new(transport), config, settings, (8, 120), dir).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_routes_are_recorded_and_summarised_per_model_and_url() -> anyhow::Result<()> {
    let (a, b) = (
        SimServer::start_local(SimProfile::fast()).await?,
        SimServer::start_local(SimProfile::fast()).await?,
    );
    let (ua, ub) = (a.base_url(), b.base_url());
    let routed = RoutedTransport::new(
        vec![
            target(&ua, "base", 2.0)?,
            target(&ua, "adapter-1", 1.0)?,
            target(&ub, "base", 1.0)?,
        ],
        RouteRule::Weighted,
    )?;
    let dir = tempfile::tempdir()?;
    let level = sweep(routed, None, dir.path()).await?;
    let recs = records(&level)?;
    assert_eq!(recs.len(), 120);
    let mut count: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut model_of: BTreeMap<u64, String> = BTreeMap::new();
    for r in &recs {
        assert!(r["error"].is_null(), "{r}");
        let md = &r["metadata"];
        let key = (
            md["model_name"].as_str().unwrap().to_owned(),
            md["endpoint_url"].as_str().unwrap().to_owned(),
        );
        model_of.insert(md["session_num"].as_u64().unwrap(), key.0.clone());
        *count.entry(key).or_default() += 1;
    }
    // 2:1:1 of 120 requests, with a wide margin (binomial sd about 5)
    let share = |m: &str, u: &str| count.get(&(m.into(), u.into())).copied().unwrap_or(0);
    assert!((40..=80).contains(&share("base", &ua)), "{count:?}");
    assert!((15..=45).contains(&share("adapter-1", &ua)), "{count:?}");
    assert!((15..=45).contains(&share("base", &ub)), "{count:?}");
    // the body sent named the model the record names
    let inputs = support::json(&level, "inputs.json")?;
    for e in inputs["data"].as_array().unwrap() {
        let id: u64 = e["session_id"].as_str().unwrap().parse()?;
        assert_eq!(e["payloads"][0]["model"], model_of[&id].as_str());
    }
    // both simulators served requests
    assert!(!a.load_history().is_empty() && !b.load_history().is_empty());
    // per-route aggregates, summing to the level
    let routes = support::json(&level, "route_summary.json")?;
    let routes = routes["routes"].as_array().unwrap();
    assert_eq!(routes.len(), 3);
    let total: u64 = routes
        .iter()
        .map(|r| r["request_count"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 120);
    for r in routes {
        let key = (
            r["model"].as_str().unwrap().to_owned(),
            r["url"].as_str().unwrap().to_owned(),
        );
        assert_eq!(r["request_count"].as_u64().unwrap() as usize, count[&key]);
        assert!(r["metrics"]["time_to_first_token"]["p95"].is_number());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sticky_routes_keep_each_conversation_on_one_target() -> anyhow::Result<()> {
    let (a, b) = (
        SimServer::start_local(SimProfile::fast()).await?,
        SimServer::start_local(SimProfile::fast()).await?,
    );
    let routed = RoutedTransport::new(
        vec![
            target(&a.base_url(), "m", 1.0)?,
            target(&b.base_url(), "m", 1.0)?,
        ],
        RouteRule::Sticky,
    )?;
    assert!(routed
        .route(&kneepoint_core::Request::text(1, "x"))
        .is_some());
    let dir = tempfile::tempdir()?;
    let level = sweep(
        routed,
        Some(Conversations::new(LengthDist::Fixed(4))),
        dir.path(),
    )
    .await?;
    let mut url_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in records(&level)? {
        let md = &r["metadata"];
        url_of
            .entry(md["conversation_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(md["endpoint_url"].as_str().unwrap().to_owned());
    }
    assert_eq!(url_of.len(), 30);
    for urls in url_of.values() {
        assert_eq!(urls.len(), 4);
        assert!(urls.iter().all(|u| u == &urls[0]), "{urls:?}");
    }
    // and both targets carried conversations
    let used: std::collections::BTreeSet<&String> = url_of.values().map(|v| &v[0]).collect();
    assert_eq!(used.len(), 2);
    Ok(())
}
