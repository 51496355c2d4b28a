//! kneepoint-config's own tests: flags and the config file resolved into settings (flags win
//! over the file, the file over defaults), careless input refused with the field named, and
//! the scrape settings it hands the engine.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use kneepoint_config::{
    parse_start_at, FileConfig, SearchArgs, SearchSettings, SweepArgs, SweepSettings, Target,
    MAX_START_AHEAD_S,
};

#[derive(Parser)]
struct Sweep {
    #[command(flatten)]
    args: SweepArgs,
}

#[derive(Parser)]
struct Search {
    #[command(flatten)]
    args: SearchArgs,
}

fn sweep_args(flags: &[&str]) -> SweepArgs {
    Sweep::try_parse_from(std::iter::once("sweep").chain(flags.iter().copied()))
        .unwrap()
        .args
}

fn search_args(flags: &[&str]) -> SearchArgs {
    Search::try_parse_from(std::iter::once("search").chain(flags.iter().copied()))
        .unwrap()
        .args
}

/// The error and its causes, as the CLI prints them.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        next = cause.source();
    }
    out
}

const FILE: &str = r#"
    [workload]
    prompt_input_tokens_mean = 512
    output_tokens_mean = 64
    [sweep_params]
    concurrency = [1, 4]
    request_count = 8
"#;

fn levels(s: &SweepSettings) -> Vec<(u32, u32)> {
    s.plan
        .levels()
        .iter()
        .map(|l| (l.concurrency, l.request_count))
        .collect()
}

#[test]
fn flags_win_over_the_file_and_the_file_over_defaults() {
    let file = FileConfig::parse(FILE, false).unwrap();
    let s = SweepSettings::resolve_with(&sweep_args(&[]), &file).unwrap();
    assert_eq!(levels(&s), vec![(1, 8), (4, 8)]);
    assert_eq!(s.common.isl, kneepoint_workload::LengthDist::Fixed(512));
    assert!(matches!(s.common.target, Target::Simulator { .. }));
    let s = SweepSettings::resolve_with(
        &sweep_args(&[
            "--request-count",
            "16",
            "--isl",
            "100",
            "--concurrency",
            "2",
        ]),
        &file,
    )
    .unwrap();
    assert_eq!(levels(&s), vec![(2, 16)]);
    assert_eq!(s.common.isl, kneepoint_workload::LengthDist::Fixed(100));
    assert_eq!(s.common.levels.request_count, 16);
}

#[test]
fn a_search_measures_each_probe_with_the_resolved_request_count() {
    let file = FileConfig::parse("[search_params]\nrequest_count = 40\n", false).unwrap();
    let s = SearchSettings::resolve_with(&search_args(&["--e2e-sla-ms", "5000"]), &file).unwrap();
    assert_eq!(s.search.request_count, 40);
    assert_eq!(s.common.levels.request_count, 40);
    let s = SearchSettings::resolve_with(
        &search_args(&["--e2e-sla-ms", "5000", "--request-count", "12"]),
        &file,
    )
    .unwrap();
    assert_eq!(
        (s.search.request_count, s.common.levels.request_count),
        (12, 12)
    );
}

#[test]
fn careless_files_and_flags_are_refused_with_the_culprit_named() {
    let e = FileConfig::parse("[workload]\nprompt_input_tokens_meen = 5\n", false).unwrap_err();
    assert!(
        chain(&e).contains("prompt_input_tokens_meen"),
        "{}",
        chain(&e)
    );
    assert!(FileConfig::parse("{\"sweep_params\": {}} garbage", true).is_err());
    assert!(FileConfig::parse("{} {}", true).is_err());
    let e = FileConfig::parse("{\"sweep_params\": {\"concurrency\": \"many\"}}", true).unwrap_err();
    assert!(chain(&e).contains("concurrency"), "{}", chain(&e));
    let e = SweepSettings::resolve_with(
        &sweep_args(&["--url", "http://127.0.0.1:1", "--sagemaker-endpoint", "e"]),
        &FileConfig::default(),
    )
    .unwrap_err();
    assert!(chain(&e).contains("not both"), "{}", chain(&e));
    // refused as the flag is read (a count, or one per level, each at least 1)
    let e = Sweep::try_parse_from(["sweep", "--request-count", "0"])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("request_count must be at least 1"), "{e}");
}

#[test]
fn the_target_s_metrics_page_is_scraped_with_the_transport_s_client() {
    let s = SweepSettings::resolve_with(
        &sweep_args(&["--url", "http://127.0.0.1:9/v1", "--model", "m"]),
        &FileConfig::default(),
    )
    .unwrap();
    let plan = &s.common.server_metrics;
    let scrape = plan
        .settings(
            Some("http://127.0.0.1:9/v1"),
            s.common.target.protocol().connect(),
        )
        .unwrap()
        .expect("the target's own page");
    assert_eq!(
        scrape.endpoints,
        vec!["http://127.0.0.1:9/metrics".to_owned()]
    );
    let s = SweepSettings::resolve_with(
        &sweep_args(&[
            "--url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--no-server-metrics",
        ]),
        &FileConfig::default(),
    )
    .unwrap();
    let none = s.common.server_metrics.settings(
        Some("http://127.0.0.1:9"),
        s.common.target.protocol().connect(),
    );
    assert!(none.unwrap().is_none());
}

#[test]
fn start_times_are_utc_or_unix_seconds_and_never_far_ahead() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let soon = now + 60;
    assert_eq!(
        parse_start_at(&soon.to_string()).unwrap(),
        soon * 1_000_000_000
    );
    let e = parse_start_at(&(now + MAX_START_AHEAD_S + 3600).to_string()).unwrap_err();
    assert!(
        e.to_string().contains("ahead") || e.to_string().contains("days"),
        "{e}"
    );
    assert!(parse_start_at("tomorrow").is_err());
}
