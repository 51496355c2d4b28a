//! Prompts have exactly the asked token count, for every target from 1 to 32k, with both the
//! built-in tokenizer and a Hugging Face tokenizer.json; shared prefixes; determinism.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;

use kneepoint_workload::tokenizer::HfTokenizer;
use kneepoint_workload::{
    load_tokenizer, LengthDist, PromptBuilder, SharedPrefix, SyntheticConfig, SyntheticWorkload,
    Tokenizer, Workload,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer.json")
}

fn tokenizers() -> Vec<Arc<dyn Tokenizer>> {
    vec![
        load_tokenizer("builtin").unwrap(),
        Arc::new(HfTokenizer::from_file(&fixture()).unwrap()),
    ]
}

#[test]
fn random_targets_up_to_32k_are_exact_with_both_tokenizers() {
    let mut targets: Vec<u32> = vec![1, 2, 3, 4, 7, 16, 1023, 1024, 1025, 4096, 8192, 32_768];
    let mut pick = StdRng::seed_from_u64(2026);
    targets.extend((0..60).map(|_| pick.random_range(1..=32_768u32)));
    for tok in tokenizers() {
        let mut b = PromptBuilder::new(tok.clone()).unwrap();
        assert!(
            b.is_fast(),
            "{}: prompts are joined from learnt chunks",
            tok.name()
        );
        let mut rng = StdRng::seed_from_u64(5);
        for &n in &targets {
            let text = b.exact("", n, &mut rng).unwrap();
            assert_eq!(
                tok.count(&text).unwrap(),
                n as usize,
                "{} target {n}",
                tok.name()
            );
        }
    }
}

#[test]
fn shared_prefixes_start_every_prompt_and_keep_the_length_exact() {
    for tok in tokenizers() {
        let mut cfg = SyntheticConfig::new(
            LengthDist::mean_stddev(600.0, 150.0),
            LengthDist::Fixed(8),
            9,
        );
        cfg.prefix = Some(SharedPrefix {
            tokens: 200,
            pool: 1,
        });
        let mut w = SyntheticWorkload::from_config(tok.clone(), cfg.clone()).unwrap();
        let prefix_ids = tok.encode(&w.prefixes()[0]).unwrap();
        assert_eq!(prefix_ids.len(), 200);
        for r in w.requests(40).unwrap() {
            let ids = tok.encode(&r.prompt.text()).unwrap();
            assert_eq!(ids.len() as u32, r.input_tokens.unwrap(), "{}", tok.name());
            assert_eq!(
                &ids[..200],
                &prefix_ids[..],
                "{}: same first 200 tokens",
                tok.name()
            );
        }
        cfg.prefix = Some(SharedPrefix {
            tokens: 64,
            pool: 4,
        });
        let mut w = SyntheticWorkload::from_config(tok.clone(), cfg).unwrap();
        let distinct: std::collections::HashSet<&String> = w.prefixes().iter().collect();
        assert_eq!(distinct.len(), 4);
        let prefixes = w.prefixes().to_vec();
        for r in w.requests(20).unwrap() {
            let text = r.prompt.text();
            assert!(prefixes.iter().any(|p| text.starts_with(p.as_str())));
            assert_eq!(tok.count(&text).unwrap() as u32, r.input_tokens.unwrap());
        }
    }
}

#[test]
fn a_prefix_longer_than_the_input_is_clamped_or_rejected() {
    let tok = load_tokenizer("builtin").unwrap();
    let mut cfg = SyntheticConfig::new(LengthDist::Fixed(50), LengthDist::Fixed(8), 1);
    cfg.prefix = Some(SharedPrefix {
        tokens: 80,
        pool: 1,
    });
    let mut w = SyntheticWorkload::from_config(tok.clone(), cfg.clone()).unwrap();
    let r = &w.requests(1).unwrap()[0];
    assert_eq!(
        r.input_tokens,
        Some(80),
        "the input length never drops below the prefix"
    );
    assert_eq!(tok.count(&r.prompt.text()).unwrap(), 80);
    cfg.prefix = Some(SharedPrefix {
        tokens: 10,
        pool: 0,
    });
    assert!(SyntheticWorkload::from_config(tok, cfg).is_err());
}

#[test]
fn same_seed_same_requests_different_seed_different_prompts() {
    let tok = load_tokenizer("builtin").unwrap();
    let mk = |seed| {
        SyntheticWorkload::new(
            tok.clone(),
            LengthDist::mean_stddev(300.0, 50.0),
            LengthDist::Fixed(8),
            seed,
        )
        .unwrap()
        .requests(30)
        .unwrap()
    };
    let (a, b, c) = (mk(42), mk(42), mk(43));
    assert_eq!(
        serde_json::to_vec(&a).unwrap(),
        serde_json::to_vec(&b).unwrap()
    );
    assert!(a.iter().zip(&c).all(|(x, y)| x.prompt != y.prompt));
    // no two prompts of a run start alike (no accidental prefix-cache hits)
    let starts: std::collections::HashSet<Vec<u32>> = a
        .iter()
        .map(|r| tok.encode(&r.prompt.text()).unwrap()[..16].to_vec())
        .collect();
    assert_eq!(starts.len(), a.len());
}

#[test]
fn model_ids_resolve_offline_from_the_hugging_face_cache() {
    let cache = tempfile::tempdir().unwrap();
    let snap = cache
        .path()
        .join("models--acme--tiny-llm/snapshots/0123abcd");
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::copy(fixture(), snap.join("tokenizer.json")).unwrap();
    // Only this test touches the variable.
    std::env::set_var("HF_HUB_CACHE", cache.path());
    let tok = load_tokenizer("acme/tiny-llm").unwrap();
    assert_eq!(tok.name(), "acme/tiny-llm");
    assert!(tok.count("the river").unwrap() > 0);
    let err = load_tokenizer("acme/missing").err().unwrap().to_string();
    assert!(err.contains("models--acme--missing"), "{err}");
    assert!(err.contains(&cache.path().display().to_string()), "{err}");
    // a path to a file or a folder holding tokenizer.json
    assert!(load_tokenizer(fixture().to_str().unwrap()).is_ok());
    assert!(load_tokenizer(snap.to_str().unwrap()).is_ok());
    let bad = cache.path().join("broken.json");
    std::fs::write(&bad, "{not json").unwrap();
    assert!(load_tokenizer(bad.to_str().unwrap()).is_err());
}

#[test]
fn the_counter_adapter_counts_with_the_tokenizer() {
    use kneepoint_core::TokenCounter;
    let tok = load_tokenizer("builtin").unwrap();
    let c = kneepoint_workload::TokenizerCounter(tok.clone());
    assert_eq!(c.count("hello world"), tok.count("hello world").unwrap());
    assert_eq!(c.name(), "builtin:o200k_base");
}

#[test]
fn a_tokenizer_json_that_truncates_and_pads_counts_without_either() {
    // sentence-transformers' tokenizer.json files truncate and pad to the model's context
    // (all-MiniLM-L6-v2: 128): loaded as they are, every text would count 128 tokens.
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture()).unwrap()).unwrap();
    doc["truncation"] =
        serde_json::json!({"max_length": 8, "strategy": "LongestFirst", "stride": 0});
    doc["padding"] = serde_json::json!({"strategy": {"Fixed": 16}, "direction": "Right",
        "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "<pad>"});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let (capped, plain) = (
        HfTokenizer::from_file(&path).unwrap(),
        HfTokenizer::from_file(&fixture()).unwrap(),
    );
    let long = "The quick brown fox jumps over the lazy dog, again and again and again.";
    assert!(plain.count(long).unwrap() > 16);
    for text in [long, "Hi", ""] {
        assert_eq!(
            capped.count(text).unwrap(),
            plain.count(text).unwrap(),
            "{text:?}"
        );
    }
    // And prompts of exact lengths come out of it.
    let mut b = PromptBuilder::new(Arc::new(capped)).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    for n in [1u32, 9, 100, 1000] {
        let p = b.exact("", n, &mut rng).unwrap();
        assert_eq!(plain.count(&p).unwrap(), n as usize);
    }
}
