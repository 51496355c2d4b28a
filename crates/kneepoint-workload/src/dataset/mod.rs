//! Datasets: single-turn JSONL, ShareGPT JSON, and timestamped trace JSONL (lengths and shared
//! blocks, prompts generated to match), sampled sequentially, at random or shuffled under a seed.

mod burstgpt;
mod parse;
mod sessions;
mod trace;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kneepoint_core::{Prompt, Request};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

pub use burstgpt::parse_burstgpt;
pub use parse::{parse_jsonl, parse_sharegpt, parse_trace, DatasetEntry, TraceEntry};
pub use sessions::SessionLength;

use crate::prompt::PromptBuilder;
use crate::tokenizer::Tokenizer;
use crate::{Error, Workload};

/// The file formats understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetFormat {
    /// One JSON object per line: `text` or `messages`, optional `output_length`, `extra`.
    Jsonl,
    /// A JSON array of `{"conversations": [{"from": "human"|"gpt"|"system", "value"}]}`.
    ShareGpt,
    /// One JSON object per line (Mooncake's trace): `input_length`, `output_length`, optional
    /// `timestamp` (ms), `hash_ids` (blocks shared by every request that lists the same id),
    /// `session_id` and `delay` (turns of a conversation and the think time before each).
    Trace,
    /// BurstGPT's CSV (`Timestamp` in seconds, `Model`, `Request tokens`, `Response tokens`,
    /// `Total tokens`, `Log Type`): read as a trace without shared blocks; rows the original
    /// service failed (no response tokens) are left out.
    BurstGpt,
}

impl DatasetFormat {
    /// Parses `jsonl`, `sharegpt`, `trace` (`mooncake_trace`) or `burstgpt`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "jsonl" | "single_turn" | "single-turn" => DatasetFormat::Jsonl,
            "sharegpt" | "share_gpt" => DatasetFormat::ShareGpt,
            "trace" | "mooncake_trace" => DatasetFormat::Trace,
            "burstgpt" | "burst_gpt" => DatasetFormat::BurstGpt,
            _ => return None,
        })
    }

    /// A guess from the file: `.json` is ShareGPT, `.csv` BurstGPT; a JSONL whose first record
    /// has `input_length` is a trace; other JSONL is single-turn.
    pub fn detect(path: &Path) -> Result<Self, Error> {
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
        {
            return Ok(DatasetFormat::BurstGpt);
        }
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            return Ok(DatasetFormat::ShareGpt);
        }
        let text = read_text(path)?;
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        Ok(if first.contains("\"input_length\"") {
            DatasetFormat::Trace
        } else {
            DatasetFormat::Jsonl
        })
    }
}

/// In which order entries are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sampling {
    /// In file order, wrapping around.
    #[default]
    Sequential,
    /// Uniformly at random, with replacement.
    Random,
    /// A fresh random permutation for every pass over the file.
    Shuffle,
}

impl Sampling {
    /// Parses `sequential`, `random` or `shuffle`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "sequential" => Sampling::Sequential,
            "random" => Sampling::Random,
            "shuffle" => Sampling::Shuffle,
            _ => return None,
        })
    }
}

impl std::str::FromStr for Sampling {
    type Err = kneepoint_core::UnknownName;

    /// `sequential`, `random` or `shuffle`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| {
            kneepoint_core::UnknownName::new("sampling", s, &["sequential", "random", "shuffle"])
        })
    }
}

impl std::str::FromStr for DatasetFormat {
    type Err = kneepoint_core::UnknownName;

    /// `jsonl`, `sharegpt`, `trace` or `burstgpt` (see [`DatasetFormat::parse`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| {
            kneepoint_core::UnknownName::new(
                "the dataset format",
                s,
                &["jsonl", "sharegpt", "trace", "burstgpt"],
            )
        })
    }
}

/// How to read and use a dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetConfig {
    /// The file.
    pub path: PathBuf,
    /// Its format (None: detect).
    pub format: Option<DatasetFormat>,
    /// Entry order.
    pub sampling: Sampling,
    /// Seed for sampling and generated trace prompts.
    pub seed: u64,
    /// Output length for entries without one.
    pub default_output_tokens: u32,
    /// Tokens per trace block (`hash_ids`); AIPerf's default is 512.
    pub trace_block_tokens: u32,
    /// Send `ignore_eos` (and `min_tokens`) when an entry gives its output length.
    pub output_control: bool,
    /// Multi-turn (ShareGPT): every human turn of a conversation, sent as a conversation with
    /// these think times (their `turns` is not used: the file gives the turns). None: the
    /// first human turn of each conversation only.
    #[serde(default)]
    pub conversations: Option<crate::Conversations>,
    /// A trace with `session_id`s: what a turn's `input_length` counts.
    #[serde(default)]
    pub session_length: SessionLength,
}

impl DatasetConfig {
    /// Defaults: detect the format, sequential, 256 output tokens, 512-token trace blocks.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        DatasetConfig {
            path: path.into(),
            format: None,
            sampling: Sampling::Sequential,
            seed: 0,
            default_output_tokens: 256,
            trace_block_tokens: 512,
            output_control: true,
            conversations: None,
            session_length: SessionLength::Turn,
        }
    }
}

/// Prepared entries: prompts ready to send.
#[derive(Debug, Clone, PartialEq)]
struct Prepared {
    prompt: Prompt,
    input_tokens: u32,
    output_tokens: Option<u32>,
    extra: serde_json::Map<String, serde_json::Value>,
    /// Trace records: when the request was sent, ms from the trace start.
    timestamp_ms: Option<u64>,
    /// A turn of a conversation: the conversation's position in the file.
    conversation: Option<usize>,
    /// A trace session's think time before this turn, ms.
    delay_ms: Option<u64>,
    /// A trace session read with lengths counting the history: the tokens this turn's prompt
    /// repeats from the turn before it.
    history_in_prompt: Option<u32>,
}

/// Requests drawn from a dataset.
pub struct DatasetWorkload {
    config: DatasetConfig,
    entries: Vec<Prepared>,
    /// The entries of each conversation (one entry each without conversations): what is
    /// sampled.
    groups: Vec<std::ops::Range<usize>>,
    order: Vec<usize>,
    next_conversation: u64,
    cursor: usize,
    rng: StdRng,
    next_id: u64,
    format: DatasetFormat,
    tokenizer: Arc<dyn Tokenizer>,
}

impl std::fmt::Debug for DatasetWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetWorkload")
            .field("config", &self.config)
            .field("entries", &self.entries.len())
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

/// A trace's (or BurstGPT log's) records as prompts of their exact lengths, their sessions
/// grouped into conversations.
fn trace_entries(
    config: &DatasetConfig,
    format: DatasetFormat,
    text: &str,
    tokenizer: &Arc<dyn Tokenizer>,
) -> Result<Vec<Prepared>, Error> {
    let raw = match format {
        DatasetFormat::BurstGpt => parse_burstgpt(&config.path, text)?,
        _ => parse_trace(&config.path, text)?,
    };
    let grouped = sessions::group(raw);
    if config.conversations.is_some() && grouped.sessions() == 0 {
        return Err(Error::Dataset {
            path: config.path.clone(),
            line: None,
            reason: "this trace has no session_id: its records are single requests (conversations come from a trace's sessions or a ShareGPT file's turns)".into(),
        });
    }
    let previous =
        (config.session_length == SessionLength::Context).then_some(grouped.previous.as_slice());
    let mut builder = PromptBuilder::new(tokenizer.clone())?;
    let seed = config.seed;
    Ok(trace::prompts(
        &mut builder,
        &grouped.entries,
        config.trace_block_tokens,
        seed,
        previous,
    )?
    .into_iter()
    .zip(grouped.entries)
    .zip(grouped.conversation.iter().copied())
    .map(|(((text, shared), e), conversation)| Prepared {
        prompt: Prompt::Text(text),
        input_tokens: e.input_length,
        output_tokens: Some(e.output_length),
        extra: serde_json::Map::new(),
        timestamp_ms: e.timestamp,
        conversation,
        delay_ms: e.delay,
        history_in_prompt: (conversation.is_some() && previous.is_some()).then_some(shared),
    })
    .collect())
}

impl DatasetWorkload {
    /// Reads and prepares the whole dataset (trace prompts are generated here, before any
    /// timing). A malformed record is an error naming the file and line.
    pub fn load(tokenizer: Arc<dyn Tokenizer>, config: DatasetConfig) -> Result<Self, Error> {
        let format = match config.format {
            Some(f) => f,
            None => DatasetFormat::detect(&config.path)?,
        };
        let text = read_text(&config.path)?;
        let entries: Vec<Prepared> = match format {
            DatasetFormat::Jsonl | DatasetFormat::ShareGpt => {
                let raw = match (format, &config.conversations) {
                    (DatasetFormat::Jsonl, None) => parse_jsonl(&config.path, &text)?,
                    (DatasetFormat::ShareGpt, None) => {
                        parse_sharegpt(&config.path, &text, tokenizer.as_ref())?
                    }
                    (DatasetFormat::ShareGpt, Some(_)) => {
                        parse::parse_sharegpt_turns(&config.path, &text, tokenizer.as_ref())?
                    }
                    _ => {
                        return Err(Error::Dataset {
                            path: config.path.clone(),
                            line: None,
                            reason: "multi-turn conversations are read from ShareGPT files (every human turn); this file is single-turn JSONL".into(),
                        })
                    }
                };
                raw.into_iter()
                    .map(|e| {
                        let n = e
                            .prompt
                            .messages()
                            .iter()
                            .map(|m| tokenizer.count(&m.content))
                            .sum::<Result<usize, Error>>()?;
                        Ok(Prepared {
                            prompt: e.prompt,
                            input_tokens: u32::try_from(n).unwrap_or(u32::MAX),
                            output_tokens: e.output_length,
                            extra: e.extra,
                            timestamp_ms: None,
                            conversation: e.turn.map(|(c, _)| c),
                            delay_ms: None,
                            history_in_prompt: None,
                        })
                    })
                    .collect::<Result<_, Error>>()?
            }
            DatasetFormat::Trace | DatasetFormat::BurstGpt => {
                trace_entries(&config, format, &text, &tokenizer)?
            }
        };
        if entries.is_empty() {
            return Err(Error::Dataset {
                path: config.path.clone(),
                line: None,
                reason: "no usable records".into(),
            });
        }
        let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            match groups.last_mut() {
                Some(g)
                    if e.conversation.is_some()
                        && entries[g.start].conversation == e.conversation =>
                {
                    g.end = i + 1
                }
                _ => groups.push(i..i + 1),
            }
        }
        let order = (0..groups.len()).collect();
        let mut w = DatasetWorkload {
            tokenizer,
            rng: StdRng::seed_from_u64(config.seed),
            config,
            entries,
            groups,
            order,
            next_conversation: 0,
            cursor: 0,
            next_id: 0,
            format,
        };
        if w.config.sampling == Sampling::Shuffle {
            w.order.shuffle(&mut w.rng);
        }
        Ok(w)
    }

    /// Records in the dataset.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the dataset has no records (never, once loaded).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A trace's send times in record order, ms from its start (`None` for other formats and
    /// for a trace some of whose records have no `timestamp`). Replaying them needs sequential
    /// sampling, so requests come in the same order.
    pub fn timestamps_ms(&self) -> Option<Vec<u64>> {
        self.entries.iter().map(|e| e.timestamp_ms).collect()
    }

    /// Conversations of more than one turn (ShareGPT turns or a trace's sessions): such a
    /// dataset runs in a closed loop, concurrency counting conversations.
    pub fn multi_turn_conversations(&self) -> usize {
        self.groups.iter().filter(|g| g.len() > 1).count()
    }

    /// The format read.
    pub fn format(&self) -> DatasetFormat {
        self.format
    }

    fn next_index(&mut self) -> usize {
        match self.config.sampling {
            Sampling::Random => self.rng.random_range(0..self.groups.len()),
            Sampling::Sequential | Sampling::Shuffle => {
                if self.cursor == self.order.len() {
                    self.cursor = 0;
                    if self.config.sampling == Sampling::Shuffle {
                        self.order.shuffle(&mut self.rng);
                    }
                }
                let i = self.order[self.cursor];
                self.cursor += 1;
                i
            }
        }
    }
}

impl Workload for DatasetWorkload {
    fn token_counter(&self) -> Option<Arc<dyn kneepoint_core::TokenCounter>> {
        Some(Arc::new(crate::TokenizerCounter(self.tokenizer.clone())))
    }

    /// `count` requests; with conversations, whole conversations until at least `count`
    /// turns (never split between two calls).
    fn requests(&mut self, count: usize) -> Result<Vec<Request>, Error> {
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let next = self.next_index();
            let g = self.groups[next].clone();
            let id = format!("conversation_{}", self.next_conversation);
            self.next_conversation += 1;
            for (k, i) in g.enumerate() {
                let e = self.entries[i].clone();
                let mut r = Request::text(self.next_id, "");
                self.next_id += 1;
                r.prompt = e.prompt;
                r.input_tokens = Some(e.input_tokens);
                r.max_output_tokens =
                    Some(e.output_tokens.unwrap_or(self.config.default_output_tokens));
                if e.output_tokens.is_some() && self.config.output_control {
                    r.ignore_eos = true;
                    r.min_output_tokens = e.output_tokens;
                }
                r.extra_body = e.extra;
                if e.conversation.is_some() {
                    // a trace's own delay, else the configured think times, else none
                    let delay = match (k, e.delay_ms, self.config.conversations) {
                        (0, _, _) => std::time::Duration::ZERO,
                        (_, Some(ms), _) => std::time::Duration::from_millis(ms),
                        (_, None, Some(c)) => c.delay(&mut self.rng),
                        (_, None, None) => std::time::Duration::ZERO,
                    };
                    r.turn = Some(kneepoint_core::Turn {
                        conversation_id: id.clone(),
                        turn_index: k as u32,
                        delay,
                        history_in_prompt: e.history_in_prompt,
                    });
                }
                out.push(r);
            }
        }
        Ok(out)
    }
}

/// A dataset file's text; bytes that are not UTF-8 are refused with the line and column of
/// the first of them.
fn read_text(path: &std::path::Path) -> Result<String, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::Dataset {
        path: path.to_owned(),
        line: None,
        reason: e.to_string(),
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        let column = good.len() - good.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1) + 1;
        Error::Dataset {
            path: path.to_owned(),
            line: Some(line),
            reason: format!(
                "invalid UTF-8 at column {column} (byte {}): a dataset must be UTF-8 text",
                good.len()
            ),
        }
    })
}
