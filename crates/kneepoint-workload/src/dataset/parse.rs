//! Parsing dataset files. Every error names the file and, for line formats, the line.

use std::path::Path;

use kneepoint_core::{Message, Prompt};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::tokenizer::Tokenizer;
use crate::Error;

/// A record: a single-turn request, or one turn of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetEntry {
    /// For a turn of a conversation: the conversation's position in the file and the turn's
    /// position in it.
    pub turn: Option<(usize, u32)>,
    /// The prompt.
    pub prompt: Prompt,
    /// The output length to ask for, if the record gives one.
    pub output_length: Option<u32>,
    /// Extra body fields for this request.
    pub extra: Map<String, Value>,
}

/// A trace record.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceEntry {
    /// When the request was sent, ms from the trace start (needed to replay the trace's
    /// arrival times; a session's later turns have a `delay` instead).
    #[serde(default)]
    pub timestamp: Option<u64>,
    /// The session (conversation) the record is a turn of: records sharing an id are its
    /// turns, in file order. A string or a number.
    #[serde(default, deserialize_with = "session_id")]
    pub session_id: Option<String>,
    /// A session's think time before this turn: ms after the previous turn's reply ended.
    #[serde(default)]
    pub delay: Option<u64>,
    /// Input tokens.
    pub input_length: u32,
    /// Output tokens.
    pub output_length: u32,
    /// Ids of the prompt's blocks; equal ids are equal content.
    #[serde(default)]
    pub hash_ids: Vec<u64>,
}

/// A session id written as a string or a number.
fn session_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => {
            return Err(serde::de::Error::custom(format!(
                "session_id must be a string or a number, not {other}"
            )))
        }
    })
}

fn err(path: &Path, line: Option<usize>, reason: impl Into<String>) -> Error {
    Error::Dataset {
        path: path.to_owned(),
        line,
        reason: reason.into(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonlRecord {
    text: Option<String>,
    messages: Option<Vec<Message>>,
    output_length: Option<u32>,
    #[serde(default)]
    extra: Map<String, Value>,
}

/// Single-turn JSONL: `{"text": ...}` or `{"messages": [...]}`, optional `output_length` and
/// `extra`. Blank lines are skipped.
pub fn parse_jsonl(path: &Path, text: &str) -> Result<Vec<DatasetEntry>, Error> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let r: JsonlRecord =
            serde_json::from_str(line).map_err(|e| err(path, Some(n), e.to_string()))?;
        let prompt = match (r.text, r.messages) {
            (Some(t), None) => Prompt::Text(t),
            (None, Some(m)) if !m.is_empty() => Prompt::Messages(m),
            (Some(_), Some(_)) => {
                return Err(err(path, Some(n), "give `text` or `messages`, not both"))
            }
            _ => {
                return Err(err(
                    path,
                    Some(n),
                    "a record needs `text` or a non-empty `messages`",
                ))
            }
        };
        if let Some(o) = r
            .output_length
            .filter(|o| *o == 0 || *o > crate::MAX_TOKENS)
        {
            return Err(err(
                path,
                Some(n),
                format!(
                    "`output_length` must be at least 1 and at most {} tokens, not {o}",
                    crate::MAX_TOKENS
                ),
            ));
        }
        out.push(DatasetEntry {
            turn: None,
            prompt,
            output_length: r.output_length,
            extra: r.extra,
        });
    }
    Ok(out)
}

#[derive(Deserialize)]
struct ShareGptConversation {
    #[serde(default)]
    conversations: Vec<ShareGptTurn>,
}

#[derive(Deserialize)]
struct ShareGptTurn {
    from: String,
    value: String,
}

/// ShareGPT JSON: the first human turn is the prompt (after any system turn), and the reply
/// that follows it sets the output length (counted with `tokenizer`). Conversations without a
/// human turn are skipped.
pub fn parse_sharegpt(
    path: &Path,
    text: &str,
    tokenizer: &dyn Tokenizer,
) -> Result<Vec<DatasetEntry>, Error> {
    Ok(parse_sharegpt_turns(path, text, tokenizer)?
        .into_iter()
        .filter(|e| e.turn.is_some_and(|(_, k)| k == 0))
        .map(|mut e| {
            e.turn = None;
            // a lone question is sent as plain text
            if let Prompt::Messages(m) = &e.prompt {
                if let [only] = m.as_slice() {
                    e.prompt = Prompt::Text(only.content.clone());
                }
            }
            e
        })
        .collect())
}

/// ShareGPT JSON with every turn: each human turn of a conversation is a turn (the first one
/// after any system turn, which opens it), and the reply that follows sets its output length.
/// The replies themselves are not sent: the server's own replies make the history.
pub fn parse_sharegpt_turns(
    path: &Path,
    text: &str,
    tokenizer: &dyn Tokenizer,
) -> Result<Vec<DatasetEntry>, Error> {
    let convs: Vec<ShareGptConversation> =
        serde_json::from_str(text).map_err(|e| err(path, Some(e.line()), e.to_string()))?;
    let mut out = Vec::new();
    for (ci, c) in convs.iter().enumerate() {
        let system = c
            .conversations
            .iter()
            .take_while(|t| t.from != "human" && t.from != "user")
            .find(|t| t.from == "system");
        let mut k = 0u32;
        for (i, t) in c.conversations.iter().enumerate() {
            if t.from != "human" && t.from != "user" {
                continue;
            }
            let reply = c
                .conversations
                .get(i + 1)
                .filter(|r| r.from == "gpt" || r.from == "assistant");
            let output_length = match reply {
                Some(r) => Some(
                    u32::try_from(tokenizer.count(&r.value)?)
                        .unwrap_or(u32::MAX)
                        .max(1),
                ),
                None => None,
            };
            let mut messages = Vec::new();
            if let (0, Some(s)) = (k, system) {
                messages.push(Message::system(s.value.clone()));
            }
            messages.push(Message::user(t.value.clone()));
            out.push(DatasetEntry {
                turn: Some((ci, k)),
                prompt: Prompt::Messages(messages),
                output_length,
                extra: Map::new(),
            });
            k += 1;
        }
    }
    Ok(out)
}

/// The longest think time a trace's `delay` may give: a day, in ms (`1e15` would hang a run).
pub const MAX_DELAY_MS: u64 = 86_400_000;

/// Trace JSONL (Mooncake's form, as AIPerf reads it): `input_length`, `output_length`, and
/// optional `timestamp`, `hash_ids`, `session_id` and `delay`.
pub fn parse_trace(path: &Path, text: &str) -> Result<Vec<TraceEntry>, Error> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: TraceEntry =
            serde_json::from_str(line).map_err(|e| err(path, Some(i + 1), e.to_string()))?;
        if e.input_length == 0 || e.output_length == 0 {
            return Err(err(
                path,
                Some(i + 1),
                "input_length and output_length must be at least 1",
            ));
        }
        if e.input_length.max(e.output_length) > crate::MAX_TOKENS {
            return Err(err(
                path,
                Some(i + 1),
                format!(
                    "input_length {} / output_length {}: at most {} tokens each",
                    e.input_length,
                    e.output_length,
                    crate::MAX_TOKENS
                ),
            ));
        }
        if let Some(d) = e.delay.filter(|d| *d > MAX_DELAY_MS) {
            return Err(err(
                path,
                Some(i + 1),
                format!(
                    "`delay` {d} ms is more than a day of think time (at most {MAX_DELAY_MS} ms)"
                ),
            ));
        }
        if e.delay.is_some() && e.session_id.is_none() {
            return Err(err(
                path,
                Some(i + 1),
                "`delay` is a session's think time between turns: give the record a `session_id` (or a `timestamp` to replay)",
            ));
        }
        out.push(e);
    }
    Ok(out)
}
