//! What the runner asks a transport to send.

use serde::{Deserialize, Serialize};

/// The prompt of a request: plain text (completions) or chat messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    /// A plain text prompt. Chat transports send it as one user message.
    Text(String),
    /// Chat messages. Completion transports join their contents with newlines.
    Messages(Vec<Message>),
    /// A batch of inputs for an embeddings endpoint, each embedded on its own.
    Batch(Vec<String>),
    /// A query and the documents to rank against it (rerank and score endpoints).
    Rank {
        /// The query.
        query: String,
        /// The documents.
        documents: Vec<String>,
    },
}

impl Prompt {
    /// The prompt as one string (messages joined by newlines).
    pub fn text(&self) -> String {
        match self {
            Prompt::Text(t) => t.clone(),
            Prompt::Messages(m) => m
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            Prompt::Batch(b) => b.join("\n"),
            Prompt::Rank { query, documents } => std::iter::once(query.as_str())
                .chain(documents.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// The inputs a pooling endpoint scores or embeds (a batch's inputs, a ranking's
    /// documents; one for any other prompt).
    pub fn items(&self) -> usize {
        match self {
            Prompt::Batch(b) => b.len(),
            Prompt::Rank { documents, .. } => documents.len(),
            _ => 1,
        }
    }

    /// The prompt as chat messages (a text prompt becomes one user message).
    pub fn messages(&self) -> Vec<Message> {
        match self {
            Prompt::Text(t) => vec![Message::user(t.clone())],
            Prompt::Messages(m) => m.clone(),
            Prompt::Batch(_) | Prompt::Rank { .. } => vec![Message::user(self.text())],
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: "user".into(),
            content: content.into(),
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: "system".into(),
            content: content.into(),
        }
    }
}

/// One request, prepared before timing starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Request {
    /// Unique within a run; also the record's id.
    pub id: u64,
    /// What to send.
    pub prompt: Prompt,
    /// The workload's count of prompt tokens, when known.
    pub input_tokens: Option<u32>,
    /// The output length to ask for (`max_tokens` or `max_completion_tokens`).
    pub max_output_tokens: Option<u32>,
    /// Minimum output length (`min_tokens`, for servers that support it).
    pub min_output_tokens: Option<u32>,
    /// Ask the server to ignore end-of-sequence so that exactly `max_output_tokens` are generated.
    pub ignore_eos: bool,
    /// Extra fields merged into the request body.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// A turn of a multi-turn conversation: `prompt` then holds only this turn's new messages,
    /// and the runner sends them after the conversation so far (every earlier turn's messages
    /// and the server's replies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<Turn>,
    /// Images sent with the (last) user message, as OpenAI content parts (chat only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    /// Audio clips sent with the (last) user message, as OpenAI `input_audio` content parts
    /// (chat only), after any images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audio: Vec<Audio>,
}

/// An audio clip for a chat request (OpenAI's `input_audio` part).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Audio {
    /// The container, as the `input_audio.format` field names it (`wav`).
    pub format: std::sync::Arc<str>,
    /// Length in milliseconds.
    pub duration_ms: u32,
    /// The file's bytes, base64-encoded (`input_audio.data`).
    pub data: std::sync::Arc<str>,
}

/// An image for a chat request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// Pixels across.
    pub width: u32,
    /// Pixels down.
    pub height: u32,
    /// A `data:image/png;base64,...` URL (or any URL the server can fetch).
    pub url: std::sync::Arc<str>,
}

/// Where a request sits in a multi-turn conversation. A workload emits a conversation's turns
/// consecutively, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The conversation's id, shared by its turns.
    pub conversation_id: String,
    /// 0-based position in the conversation.
    pub turn_index: u32,
    /// The user's think time: how long after the previous turn's response ended this turn is
    /// sent (zero for the first turn).
    #[serde(default, with = "millis")]
    pub delay: std::time::Duration,
    /// None: the turn's prompt is its new message only, and the runner sends it after the
    /// conversation so far (earlier turns and the server's replies). Some(n): the prompt
    /// already holds the whole context, `n` tokens of it repeated from the conversation so far
    /// (a trace read with its lengths counting the history); it is sent as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_in_prompt: Option<u32>,
}

/// A duration as (fractional) milliseconds, the unit traces and AIPerf use.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Duration::try_from_secs_f64(ms / 1000.0).map_err(serde::de::Error::custom)
    }
}

impl Request {
    /// A request with a text prompt and nothing else set.
    pub fn text(id: u64, prompt: impl Into<String>) -> Self {
        Request {
            id,
            prompt: Prompt::Text(prompt.into()),
            input_tokens: None,
            max_output_tokens: None,
            min_output_tokens: None,
            ignore_eos: false,
            extra_body: serde_json::Map::new(),
            turn: None,
            images: Vec::new(),
            audio: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_views() {
        let p = Prompt::Messages(vec![Message::system("be brief"), Message::user("hi")]);
        assert_eq!(p.text(), "be brief\nhi");
        assert_eq!(p.messages().len(), 2);
        let t = Prompt::Text("hello".into());
        assert_eq!(t.messages(), vec![Message::user("hello")]);
    }
}
