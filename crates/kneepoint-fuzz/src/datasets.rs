//! Dataset files: single-turn JSONL, ShareGPT JSON and timestamped traces.

use std::path::Path;

use kneepoint_workload::dataset::{parse_jsonl, parse_sharegpt, parse_trace};
use kneepoint_workload::{Error, Tokenizer};

/// A tokenizer that counts words, so the target spends its time in the parsers.
struct Words;

impl Tokenizer for Words {
    fn encode(&self, text: &str) -> Result<Vec<u32>, Error> {
        Ok(text.split_whitespace().map(|w| w.len() as u32).collect())
    }
    fn decode(&self, ids: &[u32]) -> Result<String, Error> {
        Ok(ids
            .iter()
            .map(|n| "x".repeat(*n as usize))
            .collect::<Vec<_>>()
            .join(" "))
    }
    fn name(&self) -> &str {
        "words"
    }
}

/// Reads the text with each dataset parser; each returns entries or an error naming the line.
pub fn datasets(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.jsonl");
    if let Ok(entries) = parse_jsonl(path, text) {
        assert!(entries.len() <= text.lines().count());
    }
    if let Ok(entries) = parse_trace(path, text) {
        assert!(entries.len() <= text.lines().count());
    }
    let _ = parse_sharegpt(path, text, &Words);
}
