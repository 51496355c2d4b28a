//! Datasets: single-turn JSONL, ShareGPT, traces with shared blocks; sampling; clear errors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use kneepoint_core::Prompt;
use kneepoint_workload::{
    load_tokenizer, DatasetConfig, DatasetFormat, DatasetWorkload, Sampling, Workload,
};

fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn single_turn_jsonl() {
    let d = tempfile::tempdir().unwrap();
    let p = file(
        &d,
        "d.jsonl",
        r#"{"text": "Summarise the report on river traffic.", "output_length": 64}

{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}], "extra": {"temperature": 0.2}}
"#,
    );
    let tok = load_tokenizer("builtin").unwrap();
    let mut w = DatasetWorkload::load(tok.clone(), DatasetConfig::new(&p)).unwrap();
    assert_eq!(w.format(), DatasetFormat::Jsonl);
    assert_eq!(w.len(), 2);
    let r = w.requests(3).unwrap();
    assert_eq!(
        r[0].prompt,
        Prompt::Text("Summarise the report on river traffic.".into())
    );
    assert_eq!(
        r[0].input_tokens,
        Some(tok.count("Summarise the report on river traffic.").unwrap() as u32)
    );
    assert_eq!(r[0].max_output_tokens, Some(64));
    assert!(r[0].ignore_eos);
    assert!(matches!(&r[1].prompt, Prompt::Messages(m) if m.len() == 2));
    assert_eq!(
        r[1].max_output_tokens,
        Some(256),
        "the default output length"
    );
    assert!(!r[1].ignore_eos);
    assert_eq!(r[1].extra_body["temperature"], 0.2);
    assert_eq!(r[2].prompt, r[0].prompt, "sequential sampling wraps around");
    assert_eq!(r[2].id, 2);
}

#[test]
fn malformed_lines_name_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let tok = load_tokenizer("builtin").unwrap();
    for (text, line, what) in [
        (
            "{\"text\": \"ok\"}\n{\"text\": broken}\n",
            2,
            "expected value",
        ),
        (
            "{\"text\": \"ok\"}\n\n{\"nothing\": 1}\n",
            3,
            "unknown field",
        ),
        ("{\"messages\": []}\n", 1, "non-empty"),
        ("{\"text\": \"a\", \"output_length\": 0}\n", 1, "at least 1"),
    ] {
        let p = file(&d, "bad.jsonl", text);
        let e = DatasetWorkload::load(tok.clone(), DatasetConfig::new(&p))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("bad.jsonl:{line}")), "{e}");
        assert!(e.contains(what), "{e}");
    }
    let e =
        DatasetWorkload::load(tok, DatasetConfig::new(d.path().join("missing.jsonl"))).unwrap_err();
    assert!(e.to_string().contains("missing.jsonl"));
}

/// Issue 34, item 5: bytes that are not UTF-8 gave "stream did not contain valid UTF-8" with
/// no line, in a JSONL dataset and a ShareGPT file alike.
#[test]
fn invalid_utf8_names_the_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let tok = load_tokenizer("builtin").unwrap();
    for (name, bytes, at) in [
        (
            "bad.jsonl",
            &b"{\"text\": \"one\"}\n{\"text\": \"two\"}\n{\"text\": \"bad \xff here\"}\n"[..],
            "bad.jsonl:3: invalid UTF-8 at column 15",
        ),
        (
            "bad.json",
            &b"[{\"id\": \"a\",\n \"conversations\": [{\"from\": \"human\", \"value\": \"\xfe\"}]}]"[..],
            "bad.json:2: invalid UTF-8 at column 48",
        ),
    ] {
        let p = d.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let e = DatasetWorkload::load(tok.clone(), DatasetConfig::new(&p))
            .unwrap_err()
            .to_string();
        assert!(e.contains(at), "{e}");
    }
}

#[test]
fn sharegpt_takes_the_first_human_turn_and_the_reply_length() {
    let d = tempfile::tempdir().unwrap();
    let p = file(
        &d,
        "sg.json",
        r#"[
 {"id": "a", "conversations": [{"from": "human", "value": "What is a river?"}, {"from": "gpt", "value": "A river is a natural stream of water."}]},
 {"id": "b", "conversations": [{"from": "system", "value": "You are terse."}, {"from": "human", "value": "Hi"}]},
 {"id": "c", "conversations": [{"from": "gpt", "value": "orphan reply"}]}
]"#,
    );
    let tok = load_tokenizer("builtin").unwrap();
    let mut w = DatasetWorkload::load(tok.clone(), DatasetConfig::new(&p)).unwrap();
    assert_eq!(w.format(), DatasetFormat::ShareGpt);
    assert_eq!(
        w.len(),
        2,
        "the conversation without a human turn is skipped"
    );
    let r = w.requests(2).unwrap();
    assert_eq!(r[0].prompt, Prompt::Text("What is a river?".into()));
    assert_eq!(
        r[0].max_output_tokens,
        Some(tok.count("A river is a natural stream of water.").unwrap() as u32)
    );
    assert!(matches!(&r[1].prompt, Prompt::Messages(m) if m[0].role == "system"));
    let p = file(&d, "bad.json", "[{\"conversations\": 5}]");
    assert!(DatasetWorkload::load(tok, DatasetConfig::new(&p))
        .unwrap_err()
        .to_string()
        .contains("bad.json:1"));
}

#[test]
fn traces_share_blocks_where_hash_ids_repeat_and_keep_exact_lengths() {
    let d = tempfile::tempdir().unwrap();
    let p = file(
        &d,
        "trace.jsonl",
        r#"{"timestamp": 0, "input_length": 300, "output_length": 20, "hash_ids": [1, 2]}
{"timestamp": 10, "input_length": 260, "output_length": 30, "hash_ids": [1, 3]}
{"timestamp": 25, "input_length": 90, "output_length": 5}
{"timestamp": 40, "input_length": 150, "output_length": 5, "hash_ids": [1, 2, 9]}
"#,
    );
    let tok = load_tokenizer("builtin").unwrap();
    let mut cfg = DatasetConfig::new(&p);
    cfg.trace_block_tokens = 64;
    let mut w = DatasetWorkload::load(tok.clone(), cfg).unwrap();
    assert_eq!(w.format(), DatasetFormat::Trace);
    let r = w.requests(4).unwrap();
    let ids: Vec<Vec<u32>> = r
        .iter()
        .map(|r| tok.encode(&r.prompt.text()).unwrap())
        .collect();
    for (req, (ids, want)) in r.iter().zip(ids.iter().zip([300, 260, 90, 150])) {
        assert_eq!(ids.len(), want, "exact input length");
        assert_eq!(req.input_tokens, Some(want as u32));
    }
    assert_eq!(r[0].max_output_tokens, Some(20));
    assert_eq!(ids[0][..64], ids[1][..64], "block 1 shared");
    assert_ne!(ids[0][64..128], ids[1][64..128], "blocks 2 and 3 differ");
    assert_eq!(ids[0][..128], ids[3][..128], "blocks 1 and 2 shared");
    assert_ne!(ids[2][..64], ids[0][..64], "no hash ids, no sharing");
    let bad = file(
        &d,
        "t2.jsonl",
        "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 5}\n",
    );
    let mut cfg = DatasetConfig::new(&bad);
    cfg.format = Some(DatasetFormat::Trace);
    assert!(DatasetWorkload::load(tok, cfg)
        .unwrap_err()
        .to_string()
        .contains("t2.jsonl:1"));
}

#[test]
fn sampling_orders_are_deterministic_under_a_seed() {
    let d = tempfile::tempdir().unwrap();
    let lines: String = (0..20)
        .map(|i| format!("{{\"text\": \"prompt number {i}\"}}\n"))
        .collect();
    let p = file(&d, "many.jsonl", &lines);
    let tok = load_tokenizer("builtin").unwrap();
    let run = |sampling, seed| {
        let mut cfg = DatasetConfig::new(&p);
        cfg.sampling = sampling;
        cfg.seed = seed;
        let mut w = DatasetWorkload::load(tok.clone(), cfg).unwrap();
        w.requests(40)
            .unwrap()
            .into_iter()
            .map(|r| r.prompt.text())
            .collect::<Vec<_>>()
    };
    let seq = run(Sampling::Sequential, 1);
    assert_eq!(seq[0], "prompt number 0");
    assert_eq!(seq[21], "prompt number 1");
    let shuffled = run(Sampling::Shuffle, 1);
    assert_eq!(shuffled, run(Sampling::Shuffle, 1));
    assert_ne!(shuffled, run(Sampling::Shuffle, 2));
    let first_pass: std::collections::HashSet<&String> = shuffled[..20].iter().collect();
    assert_eq!(
        first_pass.len(),
        20,
        "a shuffle uses every record once per pass"
    );
    assert_ne!(shuffled[..20], seq[..20]);
    let random = run(Sampling::Random, 3);
    assert_eq!(random, run(Sampling::Random, 3));
    assert_eq!(Sampling::parse("shuffle"), Some(Sampling::Shuffle));
    assert_eq!(
        DatasetFormat::parse("sharegpt"),
        Some(DatasetFormat::ShareGpt)
    );
}

#[test]
fn sharegpt_with_every_turn_makes_whole_conversations() {
    let d = tempfile::tempdir().unwrap();
    let p = file(
        &d,
        "sg.json",
        r#"[
 {"id": "a", "conversations": [
   {"from": "system", "value": "You are terse."},
   {"from": "human", "value": "What is a river?"}, {"from": "gpt", "value": "Moving water."},
   {"from": "human", "value": "And a lake?"}, {"from": "gpt", "value": "Still water, in a basin of land."},
   {"from": "human", "value": "Thanks"}]},
 {"id": "b", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello."}]}
]"#,
    );
    let tok = load_tokenizer("builtin").unwrap();
    let mut config = DatasetConfig::new(&p);
    config.conversations = Some(kneepoint_workload::Conversations {
        delay_ms_mean: 500.0,
        ..kneepoint_workload::Conversations::new(kneepoint_workload::LengthDist::Fixed(1))
    });
    let mut w = DatasetWorkload::load(tok.clone(), config.clone()).unwrap();
    assert_eq!(w.len(), 4, "three turns and one");
    // one request asked for: the whole first conversation
    let r = w.requests(1).unwrap();
    assert_eq!(r.len(), 3);
    for (k, req) in r.iter().enumerate() {
        let t = req.turn.as_ref().unwrap();
        assert_eq!(t.turn_index as usize, k);
        assert_eq!(t.conversation_id, "conversation_0");
        let expect = if k == 0 { 0 } else { 500 };
        assert_eq!(t.delay.as_millis(), expect);
    }
    // the system message opens the conversation only; each turn is its new question
    assert_eq!(r[0].prompt.messages().len(), 2);
    assert_eq!(r[0].prompt.messages()[0].role, "system");
    assert_eq!(r[1].prompt.messages().len(), 1);
    assert_eq!(r[1].prompt.messages()[0].content, "And a lake?");
    // each turn's output length is its reply's; the last turn has none (the default)
    assert_eq!(
        r[1].max_output_tokens,
        Some(tok.count("Still water, in a basin of land.").unwrap() as u32)
    );
    assert_eq!(r[2].max_output_tokens, Some(256));
    let next = w.requests(1).unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(
        next[0].turn.as_ref().unwrap().conversation_id,
        "conversation_1"
    );
    // single-turn JSONL cannot be read as conversations
    let j = file(&d, "d.jsonl", "{\"text\": \"hi\"}\n");
    let mut c = config;
    c.path = j;
    let e = DatasetWorkload::load(tok, c).unwrap_err().to_string();
    assert!(e.contains("ShareGPT"), "{e}");
}
