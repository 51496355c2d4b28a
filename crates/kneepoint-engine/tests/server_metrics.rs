//! Server-side truth: the simulator's `/metrics` scraped during a sweep, checked against the
//! engine's own state log; the knee's cause for a KV-bound and a compute-bound engine; and
//! endpoints that are missing, slow or not Prometheus at all.

use kneepoint_engine::BenchOptions;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kneepoint_engine::{CancelToken, LevelSettings, Observer, ScrapeSettings, Sweep, SweepReport};
use kneepoint_planner::KneeCause;
use kneepoint_sim::{SimProfile, SimServer};
use kneepoint_transport::Fetcher;
use kneepoint_transport::{OpenAiConfig, OpenAiTransport};
use kneepoint_workload::{LengthDist, SyntheticWorkload};

/// Collects warnings.
#[derive(Default)]
struct Warnings(Mutex<Vec<String>>);

impl Observer for Warnings {
    fn warning(&self, message: &str) {
        if let Ok(mut w) = self.0.lock() {
            w.push(message.to_owned());
        }
    }
}

const INTERVAL: Duration = Duration::from_millis(50);

async fn sweep(
    profile: SimProfile,
    levels: &[u32],
    osl: u32,
    extra: Vec<String>,
    dir: &Path,
    observer: Arc<Warnings>,
) -> anyhow::Result<(SweepReport, SimServer)> {
    sweep_with_warmup(profile, levels, osl, extra, dir, observer, 0).await
}

async fn sweep_with_warmup(
    profile: SimProfile,
    levels: &[u32],
    osl: u32,
    extra: Vec<String>,
    dir: &Path,
    observer: Arc<Warnings>,
    warmup: u32,
) -> anyhow::Result<(SweepReport, SimServer)> {
    let mut settings = LevelSettings::default();
    settings.warmup_requests = warmup;
    let model = profile.model.clone();
    let server = SimServer::start_local(profile).await?;
    let transport = OpenAiTransport::new(OpenAiConfig::new(server.base_url(), model))?;
    let workload = SyntheticWorkload::new(
        kneepoint_workload::load_tokenizer("builtin")?,
        LengthDist::Fixed(64),
        LengthDist::Fixed(osl),
        1,
    )?;
    let mut endpoints = vec![format!("{}/metrics", server.base_url())];
    endpoints.extend(extra);
    let report = Sweep::builder(Arc::new(transport))
        .workload(workload)
        .settings(settings)
        .levels(levels.iter().copied())
        .plan(kneepoint_planner::SweepPlan::new(
            levels
                .iter()
                .map(|c| kneepoint_planner::SweepLevel {
                    concurrency: *c,
                    request_count: 4 * *c,
                })
                .collect(),
        )?)
        .artifacts(dir)
        .observer(observer)
        .server_metrics(Some(
            ScrapeSettings::new(endpoints, Arc::new(Fetcher::new(&Default::default())?))
                .with_interval(INTERVAL)
                .with_timeout(Duration::from_millis(500)),
        ))
        .build()?
        .run(&CancelToken::new())
        .await?;
    Ok((report, server))
}

/// KV room for 16 sequences of 64 + 32 tokens, a batch limit far above it.
fn kv_bound() -> SimProfile {
    let mut p = SimProfile::fast();
    p.kv_cache_tokens = 16 * 96;
    p.max_model_len = 1024;
    p.max_num_seqs = 256;
    p
}

/// Ample KV and batch room; each decoding sequence adds 0.25 ms to a step.
fn compute_bound() -> SimProfile {
    let mut p = SimProfile::fast();
    p.max_num_seqs = 1024;
    p.kv_cache_tokens = 10_000_000;
    p.step_per_seq_ms = 0.25;
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraped_queue_and_kv_usage_match_the_engines_log_and_the_knee_is_kv() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let warnings = Arc::new(Warnings::default());
    let (report, server) = sweep(
        kv_bound(),
        &[4, 16, 64],
        32,
        vec![],
        dir.path(),
        warnings.clone(),
    )
    .await?;
    assert!(
        warnings.0.lock().unwrap().is_empty(),
        "{:?}",
        warnings.0.lock().unwrap()
    );
    let history = server.load_history();
    assert!(!history.is_empty());
    let mut checked = 0;
    for level in &report.rows {
        let path = dir
            .path()
            .join(&level.dir)
            .join("server_metrics_export.jsonl");
        let text = std::fs::read_to_string(&path)?;
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line)?;
            let (sent, got) = (
                v["request_sent_ns"].as_u64().unwrap(),
                v["first_byte_ns"].as_u64().unwrap(),
            );
            let waiting = v["metrics"]["vllm:num_requests_waiting"][0]["value"]
                .as_f64()
                .unwrap();
            let kv = v["metrics"]["vllm:kv_cache_usage_perc"][0]["value"]
                .as_f64()
                .unwrap();
            // The page shows the state in effect at some moment of the exchange; 50 ms allows
            // for the two clocks' anchors (one process, one machine).
            let slack = 50_000_000;
            let (from, to) = (sent.saturating_sub(slack), got + slack);
            let at_from = history.iter().rev().find(|s| s.unix_ns <= from);
            let candidates = at_from
                .into_iter()
                .chain(history.iter().filter(|s| (from..=to).contains(&s.unix_ns)));
            let matched = candidates
                .into_iter()
                .any(|s| f64::from(s.waiting) == waiting && (s.kv_usage - kv).abs() < 1e-9);
            let idle = at_from.is_none() && waiting == 0.0 && kv == 0.0;
            assert!(matched || idle, "{line}");
            checked += 1;
        }
        // Every level was scraped inside its window, and its summary says what the engine did.
        let s = report
            .summaries
            .iter()
            .find(|s| s.concurrency == level.concurrency)
            .unwrap();
        let server_view = s.server.as_ref().expect("a server summary");
        assert!(
            server_view.get("server_running", "samples").unwrap() >= 2.0,
            "{server_view:?}"
        );
        assert!(server_view.get("server_kv_cache_usage", "max").unwrap() <= 1.0);
    }
    assert!(checked >= 10, "only {checked} scrapes");
    // At 64 concurrent the KV cache holds 16: it is full and about 48 wait.
    let at64 = report.rows.iter().find(|r| r.concurrency == 64).unwrap();
    let m = at64.server_metrics.as_ref().unwrap();
    assert!(m["server_kv_cache_usage"]["max"] > 0.95, "{m:?}");
    assert!(m["server_waiting"]["avg"] > 16.0, "{m:?}");
    // Room for 16 prompts of 64 client tokens (the simulator counts words: a few more fit).
    assert!(m["server_running"]["max"] < 24.0, "{m:?}");
    let e = report.knee_explanation.as_ref().expect("an explanation");
    assert_eq!(e.cause, KneeCause::KvCacheFull, "{e:?}");
    // The explanation and the server view are in the summary, and survive a re-render.
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("sweep_summary.json"))?)?;
    assert_eq!(saved["knee_explanation"]["cause"], "kv_cache_full");
    assert!(
        saved["levels"][2]["server_metrics"]["server_waiting"]["avg"]
            .as_f64()
            .is_some()
    );
    let level_json: serde_json::Value = serde_json::from_slice(&std::fs::read(
        dir.path()
            .join("concurrency_64")
            .join("server_metrics_export.json"),
    )?)?;
    assert_eq!(level_json["schema_version"], "1.0");
    assert_eq!(
        level_json["metrics"]["vllm:num_requests_waiting"]["type"],
        "gauge"
    );
    assert!(dir
        .path()
        .join("concurrency_64")
        .join("server_metrics_export.csv")
        .is_file());
    let aiperf: serde_json::Value = serde_json::from_slice(&std::fs::read(
        dir.path()
            .join("concurrency_64")
            .join("profile_export_aiperf.json"),
    )?)?;
    assert!(
        aiperf["server_metrics"]["concepts"]["server_waiting"]["avg"]
            .as_f64()
            .is_some()
    );
    // report.html: the explanation in the answer, the server's state over time per level,
    // and the client's TTFT beside the server's.
    let html = std::fs::read_to_string(dir.path().join("report.html"))?;
    assert!(
        html.contains("Why: KV cache saturated"),
        "no explanation in report.html"
    );
    for plot in ["server_concurrency_64.svg", "client_vs_server_ttft.svg"] {
        let svg = std::fs::read_to_string(dir.path().join("plots").join(plot))?;
        assert!(svg.starts_with("<svg"), "{plot}");
    }
    let svg = std::fs::read_to_string(dir.path().join("plots/server_concurrency_64.svg"))?;
    assert!(svg.contains("waiting") && svg.contains("KV-cache usage (%)"));
    kneepoint_engine::rerender(dir.path())?;
    let again: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("sweep_summary.json"))?)?;
    assert_eq!(again["knee_explanation"], saved["knee_explanation"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compute_bound_engine_has_no_queue_at_its_knee() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let warnings = Arc::new(Warnings::default());
    let (report, _server) = sweep(
        compute_bound(),
        &[4, 16, 64, 128],
        16,
        vec![],
        dir.path(),
        warnings,
    )
    .await?;
    let e = report.knee_explanation.as_ref().expect("an explanation");
    assert_eq!(e.cause, KneeCause::Compute, "{e:?}");
    let at128 = report.rows.iter().find(|r| r.concurrency == 128).unwrap();
    let m = at128.server_metrics.as_ref().unwrap();
    // Requests that arrive during a step wait for the next one to be admitted: a brief queue,
    // a small fraction of the level on average, never the batch limit's standing one.
    // (Half the batch arriving during a step waits at most that step; measured: avg ~5-7.)
    assert!(m["server_waiting"]["avg"] < 0.1 * 128.0, "{m:?}");
    // No standing queue: waiting is zero for most of the level (what the cause logic reads).
    assert_eq!(m["server_waiting"]["p50"], 0.0, "{m:?}");
    assert!(m["server_kv_cache_usage"]["max"] < 0.01, "{m:?}");
    assert!(m["server_running"]["max"] > 64.0, "{m:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_requests_are_not_counted_in_the_levels_server_totals() -> anyhow::Result<()> {
    // 8 warm-up requests, then 16 measured: the scrape taken between the phases is the
    // counters' reference, so the server's TTFT histogram and token counter hold exactly the
    // measured requests (the simulator counts a request at its first token, before it ends).
    let dir = tempfile::tempdir()?;
    let warnings = Arc::new(Warnings::default());
    let (report, _server) = sweep_with_warmup(
        SimProfile::fast(),
        &[4],
        16,
        vec![],
        dir.path(),
        warnings,
        8,
    )
    .await?;
    let s = report.summaries[0]
        .server
        .as_ref()
        .expect("a server summary");
    assert_eq!(report.summaries[0].request_count, 16);
    assert_eq!(s.get("server_ttft", "count"), Some(16.0), "{s:?}");
    assert_eq!(
        s.get("server_generation_tokens", "total"),
        Some(16.0 * 16.0),
        "{s:?}"
    );
    // The jsonl keeps every scrape, warm-up included: baseline, the mark, the final one.
    let lines =
        std::fs::read_to_string(dir.path().join("concurrency_4/server_metrics_export.jsonl"))?;
    assert!(lines.lines().count() >= 3);
    Ok(())
}

/// A server that answers `/metrics` with HTML, and another that never answers in time.
async fn bad_endpoints() -> anyhow::Result<(String, String)> {
    use http_body_util::Full;
    use hyper::service::service_fn;
    async fn serve(slow: bool) -> anyhow::Result<String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let service = service_fn(move |_req| async move {
                        if slow {
                            tokio::time::sleep(Duration::from_secs(300)).await;
                        }
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            bytes::Bytes::from_static(b"<html><body>login</body></html>"),
                        )))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(format!("http://{addr}/metrics"))
    }
    Ok((serve(false).await?, serve(true).await?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_slow_and_malformed_endpoints_cost_one_warning_each() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let warnings = Arc::new(Warnings::default());
    let (html, slow) = bad_endpoints().await?;
    // Nothing listens on port 9 of loopback (discard): refused at once.
    let missing = "http://127.0.0.1:9/metrics".to_owned();
    let started = std::time::Instant::now();
    let (report, _server) = sweep(
        SimProfile::fast(),
        &[2, 4],
        16,
        vec![html.clone(), slow.clone(), missing.clone()],
        dir.path(),
        warnings.clone(),
    )
    .await?;
    // Without the per-scrape timeout the slow endpoint would hold the run for 300 s.
    assert!(started.elapsed() < Duration::from_secs(120));
    let w = warnings.0.lock().unwrap().clone();
    for url in [&html, &slow, &missing] {
        let n = w.iter().filter(|m| m.contains(url.as_str())).count();
        assert_eq!(n, 1, "{url}: {w:?}");
    }
    assert!(
        w.iter()
            .any(|m| m.contains(&html) && m.contains("not Prometheus text")),
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|m| m.contains(&slow) && m.contains("no answer within")),
        "{w:?}"
    );
    // Every request succeeded, and the good endpoint's view is there at every level.
    for s in &report.summaries {
        assert_eq!(s.error_count, 0);
        let v = s.server.as_ref().expect("the simulator's metrics");
        assert!(v.get("server_running", "max").is_some(), "{v:?}");
        let bad: Vec<_> = v.endpoints.iter().filter(|e| e.scrapes > 0).collect();
        assert_eq!(bad.len(), 1, "{:?}", v.endpoints);
    }
    Ok(())
}
