//! The one record every request ends in.

use serde::{Deserialize, Serialize};

use crate::ErrorKind;

/// Whether a request counts towards the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Warm-up: sent and recorded, excluded from metrics.
    Warmup,
    /// Measured.
    Profiling,
}

/// Where an output token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's `usage` field.
    Usage,
    /// A tokenizer's count of the whole text.
    Tokenizer,
    /// An approximation (whitespace words), used when neither of the above is available.
    Estimate,
    /// Per-chunk token counts reported by the server.
    Chunks,
}

/// A failed request's error, as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorRecord {
    /// The class of failure.
    pub kind: ErrorKind,
    /// The HTTP status, when the failure was one.
    pub code: Option<u16>,
    /// A human-readable message (never containing credentials).
    pub message: String,
}

impl From<&crate::Error> for ErrorRecord {
    fn from(e: &crate::Error) -> Self {
        ErrorRecord {
            kind: e.kind(),
            code: e.numeric_code(),
            message: e.to_string(),
        }
    }
}

/// Everything measured about one request. Times are nanoseconds on the run's monotonic clock,
/// relative to the level's origin; `origin_unix_ns` anchors them to wall-clock time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RequestRecord {
    /// The request's id.
    pub request_id: u64,
    /// The id the server was given for it ([`crate::Transport::request_id`]); `None` means
    /// `request_id` in decimal.
    #[serde(default)]
    pub x_request_id: Option<String>,
    /// Which closed-loop slot (worker) sent it.
    pub worker: u32,
    /// Warm-up or measured.
    pub phase: Phase,
    /// Wall-clock time of the level origin, in Unix nanoseconds.
    pub origin_unix_ns: u64,
    /// When the request was handed to the transport.
    pub start_ns: u64,
    /// When the response headers arrived (the transport's `send` resolved).
    pub response_ns: Option<u64>,
    /// Arrival times of the token-bearing chunks, in order.
    pub chunk_ns: Vec<u64>,
    /// Arrival of the first chunk with answer (non-reasoning) text.
    pub first_content_ns: Option<u64>,
    /// When the response ended (stream closed, or the failure was seen).
    pub end_ns: u64,
    /// Prompt tokens as counted by the client's workload.
    pub input_tokens: Option<u32>,
    /// Prompt tokens as counted by the server.
    pub server_input_tokens: Option<u32>,
    /// Output tokens: the server's count when present, else the client's.
    pub output_tokens: Option<u32>,
    /// Where `output_tokens` came from.
    pub output_tokens_source: Option<TokenSource>,
    /// The client's own count of the generated text (to cross-check the server).
    pub client_output_tokens: Option<u32>,
    /// Bytes of generated text (answer and reasoning).
    pub output_bytes: u64,
    /// The output length asked for.
    pub requested_output_tokens: Option<u32>,
    /// The server's finish reason.
    pub finish_reason: Option<String>,
    /// Set when the request failed.
    pub error: Option<ErrorRecord>,
    /// Attempts made (1 without retries); the times span all of them.
    #[serde(default = "one")]
    pub attempts: u32,
    /// Open loop: when the schedule meant the request to start, ns from the origin (`None`
    /// in a closed loop). `start_ns − intended_start_ns` is the schedule lag.
    #[serde(default)]
    pub intended_start_ns: Option<u64>,
    /// The server's `completion_tokens` when it was set aside as implausible (zero tokens for
    /// generated text, or far more tokens than the chunks and text could hold); the client's
    /// count is then `output_tokens`.
    #[serde(default)]
    pub rejected_usage_tokens: Option<u32>,
    /// Reasoning tokens (`reasoning_content` deltas) as the client counts them; `None` when the
    /// response carried no reasoning text. `output_tokens` includes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
    /// Reasoning tokens as the server counts them (`usage.completion_tokens_details.
    /// reasoning_tokens`), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_reasoning_tokens: Option<u32>,
    /// The generated answer text, kept only when asked (`LevelConfig::keep_outputs`; never in
    /// `profile_export.jsonl`, only in `outputs.json`).
    #[serde(skip)]
    pub response_text: Option<String>,
    /// The generated reasoning text, kept with `response_text`.
    #[serde(skip)]
    pub reasoning_text: Option<String>,
    /// A pooling endpoint's answer: how many embeddings, ranked documents or scores came
    /// back (`None` for generation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooled_items: Option<u32>,
    /// Images the request carried (none: `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_count: Option<u32>,
    /// How the request's connection was set up, when the transport says (`None`: not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<crate::ConnectionTimings>,
    /// Audio clips the request carried (none: `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_count: Option<u32>,
    /// Their total length in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_ms: Option<u64>,
    /// The model the request was sent to, when the transport spreads requests over several
    /// models or endpoints ([`crate::Transport::route`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The endpoint the request was sent to, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Multi-turn: the conversation this request is a turn of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// Multi-turn: the turn's 0-based position in its conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_index: Option<u32>,
    /// Multi-turn: prompt tokens that repeat the conversation so far (earlier turns and the
    /// server's replies), the prefix a server can cache; `input_tokens` includes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_tokens: Option<u32>,
    /// Multi-turn: the think time the user waited after the previous turn's reply before
    /// this turn was sent, ns (`start_ns` − the previous turn's `end_ns` is at least this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time_ns: Option<u64>,
}

fn one() -> u32 {
    1
}

impl RequestRecord {
    /// A record of request `request_id` in `phase` with nothing measured yet (every time 0,
    /// every count absent, one attempt): set the fields that were measured.
    pub fn new(request_id: u64, phase: Phase) -> Self {
        RequestRecord {
            request_id,
            x_request_id: None,
            worker: 0,
            phase,
            origin_unix_ns: 0,
            start_ns: 0,
            response_ns: None,
            chunk_ns: Vec::new(),
            first_content_ns: None,
            end_ns: 0,
            input_tokens: None,
            server_input_tokens: None,
            output_tokens: None,
            output_tokens_source: None,
            client_output_tokens: None,
            output_bytes: 0,
            requested_output_tokens: None,
            finish_reason: None,
            error: None,
            attempts: 1,
            intended_start_ns: None,
            rejected_usage_tokens: None,
            reasoning_tokens: None,
            usage_reasoning_tokens: None,
            response_text: None,
            reasoning_text: None,
            pooled_items: None,
            image_count: None,
            connection: None,
            audio_count: None,
            audio_ms: None,
            model: None,
            url: None,
            conversation_id: None,
            turn_index: None,
            history_tokens: None,
            think_time_ns: None,
        }
    }

    /// True when the request succeeded.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_objects_numeric_code_is_the_records_code() {
        // an `event: error` payload's code reaches the record's `error.code`
        let e = crate::Error::Server {
            code: Some("503".into()),
            message: "overloaded".into(),
        };
        let rec = ErrorRecord::from(&e);
        assert_eq!((rec.code, rec.kind), (Some(503), crate::ErrorKind::Server));
    }
}
