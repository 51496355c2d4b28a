//! Measurement fidelity: at concurrency 1 the client's TTFT and ITL match the simulator's own
//! server-side ground truth within 5 %.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;

use kneepoint_core::Transport;
use kneepoint_metrics::RequestMetrics;
use kneepoint_runner::{run_level, LevelConfig};
use kneepoint_sim::{SimProfile, SimServer};
use kneepoint_transport::{OpenAiConfig, OpenAiTransport};
use kneepoint_workload::{LengthDist, SyntheticWorkload, Workload};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_and_itl_match_server_truth_at_concurrency_one() {
    let mut p = SimProfile::fast();
    p.step_base_ms = 10.0;
    p.prefill_per_token_us = 40.0; // 256 prompt tokens: ~10 ms of prefill
    let tok = kneepoint_workload::load_tokenizer("builtin").unwrap();
    let counter = std::sync::Arc::new(kneepoint_workload::TokenizerCounter(tok.clone()));
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let server = SimServer::start_with_counter(p, addr, counter)
        .await
        .unwrap();
    let transport: Arc<dyn Transport> =
        Arc::new(OpenAiTransport::new(OpenAiConfig::new(server.base_url(), "m")).unwrap());
    let mut w =
        SyntheticWorkload::new(tok, LengthDist::Fixed(256), LengthDist::Fixed(16), 3).unwrap();
    let warmup = w.requests(2).unwrap();
    let requests = w.requests(25).unwrap();
    let run = run_level(
        transport,
        &LevelConfig::new(1),
        requests,
        warmup,
        vec![],
        None,
    )
    .await
    .unwrap();
    assert_eq!(run.records.len(), 25);
    let truth: HashMap<String, _> = server
        .truth()
        .into_iter()
        .filter_map(|t| t.client_request_id.clone().map(|id| (id, t)))
        .collect();
    let (mut c_ttft, mut s_ttft, mut c_itl, mut s_itl) = (0.0, 0.0, 0.0, 0.0);
    for r in &run.records {
        assert!(r.is_ok(), "{:?}", r.error);
        let m = RequestMetrics::of(r);
        let t = &truth[r.x_request_id.as_ref().unwrap()];
        c_ttft += m.ttft_ms.unwrap();
        s_ttft += t.ttft_ms;
        c_itl += m.itl_ms.unwrap();
        s_itl += t.itl_ms.unwrap();
        // the server counted the prompt with the same tokenizer
        assert_eq!(t.prompt_tokens, 256);
        assert_eq!(r.server_input_tokens, Some(256));
    }
    let n = run.records.len() as f64;
    let (c_ttft, s_ttft, c_itl, s_itl) = (c_ttft / n, s_ttft / n, c_itl / n, s_itl / n);
    eprintln!("TTFT client {c_ttft:.3} ms vs server {s_ttft:.3} ms; ITL client {c_itl:.3} vs server {s_itl:.3}");
    assert!(
        (c_ttft - s_ttft).abs() / s_ttft < 0.05,
        "TTFT {c_ttft} vs {s_ttft}"
    );
    assert!(
        (c_itl - s_itl).abs() / s_itl < 0.05,
        "ITL {c_itl} vs {s_itl}"
    );
    // and the truth itself is what the profile says: ~20 ms TTFT (10 ms of prefill and a
    // 10 ms step), ~10 ms per token. The model sets the floor; the ceiling is wide because on a
    // busy machine the simulator's engine thread, and its tokenizing of each prompt (a debug
    // build, on the CPU the client shares), run late: 23.1 ms was seen once on CI's machine.
    assert!((18.2..30.0).contains(&s_ttft), "{s_ttft}");
    assert!((9.0..15.0).contains(&s_itl), "{s_itl}");
}
