//! One test run per injected fault class: every request ends in exactly one record with the
//! expected error class, and sent = successes + failures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use kneepoint_core::{Request, Transport};
use kneepoint_runner::{run_level, LevelConfig};
use kneepoint_sim::{Fault, FaultPlan, SimProfile, SimServer};
use kneepoint_transport::{OpenAiConfig, OpenAiTransport};

fn requests(n: u64) -> Vec<Request> {
    (0..n)
        .map(|i| {
            let mut r = Request::text(i, "tell me about the harbor and the river");
            r.max_output_tokens = Some(8);
            r.ignore_eos = true;
            r
        })
        .collect()
}

async fn run(fault: Fault, rate: f64, n: u64) -> (Vec<Option<String>>, Vec<Option<u16>>) {
    let mut profile = SimProfile::fast();
    let mut plan = FaultPlan::new(rate, vec![fault]);
    // A stall far past the idle deadline, which is far past a busy machine's pauses.
    plan.stall_ms = 3_000;
    profile.faults = Some(plan);
    let server = SimServer::start_local(profile).await.unwrap();
    let t: Arc<dyn Transport> =
        Arc::new(OpenAiTransport::new(OpenAiConfig::new(server.base_url(), "m")).unwrap());
    let mut cfg = LevelConfig::new(3);
    cfg.require_finish_reason = true;
    cfg.deadlines.idle = Some(Duration::from_millis(1_000));
    cfg.deadlines.request = Some(Duration::from_secs(10));
    let run = run_level(t, &cfg, requests(n), vec![], vec![], None)
        .await
        .unwrap();
    assert_eq!(
        run.records.len() as u64,
        n,
        "{fault:?}: one record per request"
    );
    let kinds = run
        .records
        .iter()
        .map(|r| r.error.as_ref().map(|e| e.kind.to_string()))
        .collect();
    let codes = run
        .records
        .iter()
        .map(|r| r.error.as_ref().and_then(|e| e.code))
        .collect();
    (kinds, codes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_class_is_recorded_with_its_error_class() {
    let expected = [
        (Fault::Http429, "http_status", Some(429)),
        (Fault::Http500, "http_status", Some(500)),
        (Fault::Http503, "http_status", Some(503)),
        (Fault::ResetBeforeHeaders, "disconnected", None),
        (Fault::ResetMidStream, "disconnected", None),
        (Fault::Stall, "timeout", None),
        (Fault::InvalidJson, "malformed_response", None),
        (Fault::InvalidUtf8, "malformed_response", None),
        (Fault::OverlongLine, "malformed_response", None),
        (Fault::WrongContentType, "malformed_response", None),
        (Fault::NoDone, "malformed_response", None),
        (Fault::DoneWithoutFinish, "incomplete", None),
    ];
    assert_eq!(expected.len(), Fault::ALL.len());
    for (fault, kind, code) in expected {
        let (kinds, codes) = run(fault, 1.0, 6).await;
        for (k, c) in kinds.iter().zip(&codes) {
            assert_eq!(k.as_deref(), Some(kind), "{fault:?}");
            assert_eq!(*c, code, "{fault:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_fault_rate_is_counted_not_crashed() {
    let mut profile = SimProfile::fast();
    profile.faults = Some(FaultPlan::new(
        0.3,
        vec![Fault::Http503, Fault::ResetMidStream, Fault::InvalidJson],
    ));
    profile.seed = 11;
    let server = SimServer::start_local(profile).await.unwrap();
    let t: Arc<dyn Transport> =
        Arc::new(OpenAiTransport::new(OpenAiConfig::new(server.base_url(), "m")).unwrap());
    let run = run_level(t, &LevelConfig::new(8), requests(120), vec![], vec![], None)
        .await
        .unwrap();
    let failed = run.records.iter().filter(|r| !r.is_ok()).count();
    assert_eq!(run.records.len(), 120);
    assert!(
        (15..=60).contains(&failed),
        "{failed} of 120 failed at a 30 % rate"
    );
    // the simulator keeps serving the others
    assert!(run.records.iter().filter(|r| r.is_ok()).count() >= 60);
}
