//! A multi-turn sweep against the simulator: every turn carries the conversation so far (checked
//! in `inputs.json`), records name their conversation and turn, think times follow the
//! configured distribution (a Kolmogorov-Smirnov test) and are honoured, and each level writes
//! its aggregates per turn position.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use kneepoint_engine::LevelSettings;
use kneepoint_sim::SimProfile;
use kneepoint_transport::Api;
use kneepoint_workload::{Conversations, LengthDist, SyntheticConfig};
use serde_json::Value;
use statrs::distribution::{ContinuousCDF, Normal};

const DELAY_MEAN_MS: f64 = 40.0;
const DELAY_STDDEV_MS: f64 = 10.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_turn_sweep_grows_the_history_and_honours_think_times() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (_server, transport) = support::simulator(SimProfile::fast(), Api::Chat).await?;
    let mut config = SyntheticConfig::new(LengthDist::Fixed(48), LengthDist::Fixed(12), 5);
    config.conversations = Some(Conversations {
        turns: LengthDist::Fixed(3),
        delay_ms_mean: DELAY_MEAN_MS,
        delay_ms_stddev: DELAY_STDDEV_MS,
        delay_ratio: 1.0,
    });
    let settings = LevelSettings::default();
    let report =
        support::sweep(transport, config, settings, &[(2, 60), (8, 90)], dir.path()).await?;
    assert_eq!(report.rows.len(), 2);
    let mut delays_ms = Vec::new();
    for row in &report.rows {
        let level = dir.path().join(&row.dir);
        // inputs.json: one entry per conversation, its turns as sent, each repeating the one
        // before it (questions and the server's replies) and adding a question
        let inputs = support::json(&level, "inputs.json")?;
        let sessions = inputs["data"].as_array().unwrap();
        assert_eq!(sessions.len() * 3, row.request_count);
        for s in sessions {
            let payloads = s["payloads"].as_array().unwrap();
            assert_eq!(payloads.len(), 3, "{s}");
            for (k, p) in payloads.iter().enumerate() {
                let messages = p["messages"].as_array().unwrap();
                assert_eq!(messages.len(), 2 * k + 1);
                if k > 0 {
                    let before = payloads[k - 1]["messages"].as_array().unwrap();
                    assert_eq!(&messages[..before.len()], &before[..]);
                    let reply = &messages[before.len()];
                    assert_eq!(reply["role"], "assistant");
                    assert!(!reply["content"].as_str().unwrap().is_empty());
                }
            }
        }
        // records: conversation and turn, a history that grows, think times honoured
        let records = support::records(&level)?;
        for turns in records.chunks(3) {
            let md: Vec<&Value> = turns.iter().map(|r| &r["metadata"]).collect();
            assert!(md
                .iter()
                .all(|m| m["conversation_id"] == md[0]["conversation_id"]));
            let idx: Vec<u64> = md
                .iter()
                .map(|m| m["turn_index"].as_u64().unwrap())
                .collect();
            assert_eq!(idx, vec![0, 1, 2]);
            let history: Vec<u64> = md
                .iter()
                .map(|m| m["history_tokens"].as_u64().unwrap())
                .collect();
            assert!(history[0] == 0 && history[0] < history[1] && history[1] < history[2]);
            let isl: Vec<f64> = turns
                .iter()
                .map(|r| {
                    r["metrics"]["input_sequence_length"]["value"]
                        .as_f64()
                        .unwrap()
                })
                .collect();
            assert!((isl[2] - (48.0 + history[2] as f64)).abs() < 0.5, "{isl:?}");
            for k in 1..3 {
                let think = md[k]["think_time_ms"].as_f64().unwrap();
                let gap_ns = md[k]["request_start_ns"].as_u64().unwrap()
                    - md[k - 1]["request_end_ns"].as_u64().unwrap();
                assert!(
                    gap_ns as f64 >= think * 1e6 - 1e3,
                    "waited {gap_ns} ns for {think} ms"
                );
                delays_ms.push(think);
            }
            assert!(md[0]["think_time_ms"].is_null());
        }
        // per-turn aggregates: the prompt grows with the turn
        let turns = support::json(&level, "turn_summary.json")?;
        let turns = turns["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 3);
        let isl_avg: Vec<f64> = turns
            .iter()
            .map(|t| {
                t["metrics"]["input_sequence_length"]["avg"]
                    .as_f64()
                    .unwrap()
            })
            .collect();
        assert!(
            isl_avg[0] < isl_avg[1] && isl_avg[1] < isl_avg[2],
            "{isl_avg:?}"
        );
        assert!(turns.iter().all(|t| t["error_count"] == 0));
        // outputs.json only when asked
        assert!(!level.join("outputs.json").exists());
    }
    // the think times drawn follow normal(40 ms, 10 ms): Kolmogorov-Smirnov at the 1 % level
    let n = delays_ms.len();
    assert!(n >= 90, "{n} think times");
    delays_ms.sort_by(f64::total_cmp);
    let normal = Normal::new(DELAY_MEAN_MS, DELAY_STDDEV_MS)?;
    let d = delays_ms
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let f = normal.cdf(*x);
            (f - i as f64 / n as f64)
                .abs()
                .max((f - (i + 1) as f64 / n as f64).abs())
        })
        .fold(0.0, f64::max);
    let critical = 1.628 / (n as f64).sqrt();
    assert!(
        d < critical,
        "KS distance {d:.3} ≥ {critical:.3} over {n} think times"
    );
    Ok(())
}
