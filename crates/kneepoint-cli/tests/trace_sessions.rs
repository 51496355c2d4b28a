//! A Mooncake trace with sessions (issue 31), swept on the simulator both ways: read with
//! `input_length` as each turn's new text, the server sees the history grow by the earlier
//! turns and its own replies; read as the whole context, it sees exactly `input_length`, each
//! turn repeating the one before. Think times come from the trace's `delay`s in both.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;

use clap::Parser;
use kneepoint_cli::{run_sweep, Cli, Command, SweepSettings};
use serde_json::Value;

const TRACE: &str = r#"{"session_id": "a", "timestamp": 0, "input_length": 120, "output_length": 8}
{"session_id": "b", "timestamp": 5, "input_length": 100, "output_length": 8}
{"session_id": "a", "delay": 40, "input_length": 200, "output_length": 8}
{"session_id": "b", "delay": 25, "input_length": 180, "output_length": 8}
{"session_id": "a", "delay": 30, "input_length": 300, "output_length": 8}
{"session_id": "b", "delay": 60, "input_length": 260, "output_length": 8}
"#;

/// (input_length, delay ms) of each session's turns, as written above.
const TURNS: [[(f64, f64); 3]; 2] = [
    [(120.0, 0.0), (200.0, 40.0), (300.0, 30.0)],
    [(100.0, 0.0), (180.0, 25.0), (260.0, 60.0)],
];

fn settings(trace: &Path, dir: &Path, extra: &[&str]) -> anyhow::Result<SweepSettings> {
    let mut args = vec![
        "kneepoint",
        "sweep",
        "--sim-profile",
        "fast",
        "--dataset",
        trace.to_str().unwrap(),
        "--concurrency",
        "2",
        "--request-count",
        "6",
        "--quiet",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let Command::Sweep(a) = Cli::try_parse_from(args)?.command else {
        panic!("not a sweep")
    };
    Ok(SweepSettings::resolve(&a)?)
}

/// Each conversation's records in turn order, by conversation id.
fn conversations(level: &Path) -> BTreeMap<String, Vec<Value>> {
    let text = std::fs::read_to_string(level.join("profile_export.jsonl")).unwrap();
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for line in text.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        let id = r["metadata"]["conversation_id"]
            .as_str()
            .unwrap()
            .to_owned();
        out.entry(id).or_default().push(r);
    }
    for turns in out.values_mut() {
        turns.sort_by_key(|r| r["metadata"]["turn_index"].as_u64().unwrap());
    }
    out
}

fn isl(r: &Value) -> f64 {
    r["metrics"]["input_sequence_length"]["value"]
        .as_f64()
        .unwrap()
}

fn md(r: &Value, key: &str) -> f64 {
    r["metadata"][key].as_f64().unwrap()
}

/// Checks what both readings share: two conversations of three turns, none failed, each turn
/// sent at least its `delay` after the previous reply ended and recorded with it.
fn check_turns_and_think_times(convs: &BTreeMap<String, Vec<Value>>) {
    assert_eq!(convs.len(), 2, "{:?}", convs.keys());
    for (c, turns) in convs.values().enumerate() {
        assert_eq!(turns.len(), 3);
        for (k, r) in turns.iter().enumerate() {
            assert!(r["error"].is_null(), "{r}");
            assert_eq!(r["metadata"]["turn_index"], k as u64);
            if k == 0 {
                assert!(r["metadata"]["think_time_ms"].is_null());
                continue;
            }
            let think = md(r, "think_time_ms");
            assert_eq!(think, TURNS[c][k].1);
            let gap_ns = md(r, "request_start_ns") - md(&turns[k - 1], "request_end_ns");
            assert!(
                gap_ns >= think * 1e6 - 1e3,
                "waited {gap_ns} ns, not {think} ms"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turn_lengths_grow_with_the_history_and_context_lengths_are_exact() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let trace = tmp.path().join("sessions.jsonl");
    std::fs::write(&trace, TRACE)?;

    // input_length is the turn's new text: the server sees the history as well
    let turn_dir = tmp.path().join("turn");
    run_sweep(&settings(&trace, &turn_dir, &[])?, false).await?;
    let convs = conversations(&turn_dir.join("concurrency_2"));
    check_turns_and_think_times(&convs);
    for (c, turns) in convs.values().enumerate() {
        let mut history = 0.0;
        for (k, r) in turns.iter().enumerate() {
            assert_eq!(md(r, "history_tokens"), history, "turn {k}");
            assert_eq!(isl(r), TURNS[c][k].0 + history, "turn {k}");
            // the next turn's history: this turn's question and the server's 8-token reply
            history += TURNS[c][k].0
                + r["metrics"]["output_sequence_length"]["value"]
                    .as_f64()
                    .unwrap();
        }
        assert!(history > TURNS[c].iter().map(|t| t.0).sum::<f64>());
    }
    // inputs.json: the later turns carry the conversation as messages
    let inputs: Value = serde_json::from_slice(&std::fs::read(
        turn_dir.join("concurrency_2").join("inputs.json"),
    )?)?;
    for s in inputs["data"].as_array().unwrap() {
        let last = &s["payloads"][2]["messages"];
        assert_eq!(last.as_array().unwrap().len(), 5, "{s}");
    }

    // input_length is the whole context: each turn is exactly that, repeating the one before
    let ctx_dir = tmp.path().join("context");
    let s = settings(&trace, &ctx_dir, &["--session-input-length", "context"])?;
    run_sweep(&s, false).await?;
    let convs = conversations(&ctx_dir.join("concurrency_2"));
    check_turns_and_think_times(&convs);
    for (c, turns) in convs.values().enumerate() {
        for (k, r) in turns.iter().enumerate() {
            assert_eq!(isl(r), TURNS[c][k].0, "turn {k}");
            let carried = if k == 0 { 0.0 } else { TURNS[c][k - 1].0 };
            assert_eq!(md(r, "history_tokens"), carried, "turn {k}");
        }
    }
    let inputs: Value = serde_json::from_slice(&std::fs::read(
        ctx_dir.join("concurrency_2").join("inputs.json"),
    )?)?;
    for s in inputs["data"].as_array().unwrap() {
        let text = |k: usize| {
            let m = &s["payloads"][k]["messages"];
            assert_eq!(m.as_array().unwrap().len(), 1, "{s}");
            m[0]["content"].as_str().unwrap().to_owned()
        };
        assert!(text(1).starts_with(text(0).trim_end()));
        assert!(text(2).starts_with(text(1).trim_end()));
    }
    Ok(())
}

#[test]
fn sessions_are_refused_with_a_request_rate_or_a_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("sessions.jsonl");
    std::fs::write(&trace, TRACE).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for flags in [
        &["--request-rate", "5"][..],
        &["--replay-speedup", "1"][..],
        &["--duration-s", "2"][..],
    ] {
        let dir = tmp.path().join("refused");
        let run = settings(&trace, &dir, flags)
            .and_then(|s| rt.block_on(run_sweep(&s, false)).map(|_| ()));
        let e = format!("{:#}", run.unwrap_err());
        assert!(
            e.contains("conversations") || e.contains("timestamp"),
            "{flags:?}: {e}"
        );
        assert!(!dir.join("concurrency_2").exists(), "{flags:?}");
    }
}
