//! Mooncake traces with `session_id`: records of one session become the turns of one
//! conversation (gathered where the session starts, think times from `delay`), read both ways:
//! `input_length` as the turn's new text, or as the whole context the server sees.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use kneepoint_core::Request;
use kneepoint_workload::dataset::SessionLength;
use kneepoint_workload::{load_tokenizer, DatasetConfig, DatasetWorkload, Workload};

/// Two sessions, interleaved with a single request: "s1" (three turns, no blocks) and 7 (two
/// turns sharing their first 64-token block).
const TRACE: &str = r#"{"session_id": "s1", "timestamp": 0, "input_length": 200, "output_length": 8}
{"session_id": 7, "timestamp": 10, "input_length": 150, "output_length": 6, "hash_ids": [1]}
{"session_id": "s1", "delay": 30, "input_length": 320, "output_length": 8}
{"timestamp": 20, "input_length": 90, "output_length": 5}
{"session_id": "s1", "delay": 50, "input_length": 500, "output_length": 8}
{"session_id": 7, "delay": 20, "input_length": 260, "output_length": 6, "hash_ids": [1, 2]}
"#;

fn load(reading: SessionLength) -> (Vec<Request>, DatasetWorkload) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.jsonl");
    std::fs::write(&path, TRACE).unwrap();
    let mut cfg = DatasetConfig::new(&path);
    cfg.trace_block_tokens = 64;
    cfg.session_length = reading;
    let mut w = DatasetWorkload::load(load_tokenizer("builtin").unwrap(), cfg).unwrap();
    (w.requests(6).unwrap(), w)
}

fn text(r: &Request) -> String {
    r.prompt.text()
}

#[test]
fn sessions_become_conversations_with_the_traces_think_times() {
    for reading in [SessionLength::Turn, SessionLength::Context] {
        let (rs, w) = load(reading);
        assert_eq!(w.multi_turn_conversations(), 2);
        // later turns carry a delay, not a timestamp: nothing to replay
        assert_eq!(w.timestamps_ms(), None);
        assert_eq!(rs.len(), 6);
        let lengths: Vec<u32> = rs.iter().map(|r| r.input_tokens.unwrap()).collect();
        assert_eq!(lengths, vec![200, 320, 500, 150, 260, 90]);
        let turns: Vec<Option<(String, u32, Duration)>> = rs
            .iter()
            .map(|r| {
                r.turn
                    .as_ref()
                    .map(|t| (t.conversation_id.clone(), t.turn_index, t.delay))
            })
            .collect();
        let ms = Duration::from_millis;
        let c0 = "conversation_0".to_owned();
        let c1 = "conversation_1".to_owned();
        assert_eq!(
            turns,
            vec![
                Some((c0.clone(), 0, ms(0))),
                Some((c0.clone(), 1, ms(30))),
                Some((c0, 2, ms(50))),
                Some((c1.clone(), 0, ms(0))),
                Some((c1, 1, ms(20))),
                None,
            ],
            "{reading:?}"
        );
    }
}

#[test]
fn turn_reading_sends_each_turn_as_its_new_text_after_the_history() {
    let tok = load_tokenizer("builtin").unwrap();
    let (rs, _) = load(SessionLength::Turn);
    for r in &rs {
        // each prompt is the turn's own text, of exactly its length; the runner adds the
        // conversation so far when it sends it
        assert_eq!(tok.count(&text(r)).unwrap() as u32, r.input_tokens.unwrap());
        assert_eq!(r.turn.as_ref().and_then(|t| t.history_in_prompt), None);
    }
    assert!(!text(&rs[1]).starts_with(text(&rs[0]).trim_end()));
}

#[test]
fn context_reading_builds_each_turn_to_its_whole_length_on_the_turn_before() {
    let tok = load_tokenizer("builtin").unwrap();
    let (rs, _) = load(SessionLength::Context);
    for r in &rs {
        assert_eq!(tok.count(&text(r)).unwrap() as u32, r.input_tokens.unwrap());
    }
    let carried: Vec<Option<u32>> = rs
        .iter()
        .map(|r| r.turn.as_ref().and_then(|t| t.history_in_prompt))
        .collect();
    // "s1": each turn repeats the whole turn before it; 7: one shared 64-token block; the
    // single request is no turn
    assert_eq!(
        carried,
        vec![Some(0), Some(200), Some(320), Some(0), Some(64), None]
    );
    assert!(text(&rs[1]).starts_with(text(&rs[0]).trim_end()));
    assert!(text(&rs[2]).starts_with(text(&rs[1]).trim_end()));
    // the shared block: the first 64 tokens' text is the same in both turns of session 7
    let ids = |s: &str| tok.encode(s).unwrap();
    assert_eq!(ids(&text(&rs[3]))[..64], ids(&text(&rs[4]))[..64]);
    assert_ne!(ids(&text(&rs[3]))[64..70], ids(&text(&rs[4]))[64..70]);
}

#[test]
fn a_delay_without_a_session_and_conversations_from_a_plain_trace_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(
        &path,
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\n\
         {\"delay\": 5, \"input_length\": 10, \"output_length\": 2}\n",
    )
    .unwrap();
    let tok = load_tokenizer("builtin").unwrap();
    let e = DatasetWorkload::load(tok.clone(), DatasetConfig::new(&path))
        .unwrap_err()
        .to_string();
    assert!(e.contains(":2") && e.contains("session_id"), "{e}");

    std::fs::write(
        &path,
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\n",
    )
    .unwrap();
    let mut cfg = DatasetConfig::new(&path);
    cfg.conversations = Some(kneepoint_workload::Conversations {
        turns: kneepoint_workload::LengthDist::Fixed(2),
        delay_ms_mean: 0.0,
        delay_ms_stddev: 0.0,
        delay_ratio: 1.0,
    });
    let e = DatasetWorkload::load(tok, cfg).unwrap_err().to_string();
    assert!(e.contains("no session_id"), "{e}");
    std::fs::write(
        &path,
        "{\"session_id\": [1], \"input_length\": 10, \"output_length\": 2}\n",
    )
    .unwrap();
    let e = DatasetWorkload::load(
        load_tokenizer("builtin").unwrap(),
        DatasetConfig::new(&path),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("string or a number"), "{e}");
}
