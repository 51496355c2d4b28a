//! The general reader of OpenAI-compatible JSON: every document through `serde_json`, for what
//! the one-pass readers of the common chunk decline.

use std::borrow::Cow;

use kneepoint_core::{Chunk, Error, ResponseEvent, Usage};
use serde::Deserialize;

use crate::sse::excerpt;

// Only the fields the metrics use are decoded; strings borrow from the event's data unless
// they hold escapes (`Cow`), and every other field (ids, model, logprobs...) is skipped unread.
#[derive(Deserialize)]
struct Body<'a> {
    /// `null` is taken as none, like an absent field (a usage-only chunk may say so).
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    usage: Option<UsageJson>,
    /// Embeddings (`data[].embedding`) or scores (`data[].score`): a pooling answer.
    data: Option<Vec<serde::de::IgnoredAny>>,
    /// Ranked documents (rerank).
    results: Option<Vec<serde::de::IgnoredAny>>,
    error: Option<ErrorJson>,
    #[serde(borrow)]
    object: Option<Cow<'a, str>>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow)]
    delta: Option<Delta<'a>>,
    #[serde(borrow)]
    message: Option<Delta<'a>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reasoning: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct UsageJson {
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u32>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorJson {
    Object {
        message: Option<String>,
        #[serde(rename = "type")]
        kind: Option<String>,
        code: Option<serde_json::Value>,
    },
    Text(String),
}

/// `data` (a JSON `what`: chunk, payload) that serde could not read, with serde's reason.
/// Well-formed JSON of another shape (a number for a text, a repeated key) is not called
/// invalid JSON.
pub(crate) fn unreadable(what: &str, data: &str, e: serde_json::Error) -> Error {
    let kind = if e.is_data() {
        format!("a JSON {what} of an unexpected shape")
    } else {
        format!("invalid JSON {what}")
    };
    Error::MalformedResponse {
        message: format!("{kind} ({e}): {}", excerpt(data.as_bytes())),
        source: Some(Box::new(e)),
    }
}

/// An error's message, or when the server gave none (or an empty one), what it sent.
fn or_excerpt(message: Option<String>, data: &str) -> String {
    match message {
        Some(m) if !m.trim().is_empty() => m,
        _ => format!(
            "the server answered an error without a message: {}",
            excerpt(data.as_bytes())
        ),
    }
}

/// [`parse_body`](crate::parse_body) without the fast path: every document through `serde_json`.
pub(crate) fn parse_with_serde(data: &str, out: &mut Vec<ResponseEvent>) -> Result<(), Error> {
    let body: Body<'_> = serde_json::from_str(data).map_err(|e| unreadable("chunk", data, e))?;
    if let Some(err) = body.error {
        return Err(match err {
            ErrorJson::Object {
                message,
                kind,
                code,
            } => Error::Server {
                code: code
                    .map(|c| match c {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    })
                    .or(kind),
                message: or_excerpt(message, data),
            },
            ErrorJson::Text(message) => Error::Server {
                code: None,
                message: or_excerpt(Some(message), data),
            },
        });
    }
    if body.object.as_deref() == Some("error") {
        return Err(Error::Server {
            code: None,
            message: or_excerpt(body.message, data),
        });
    }
    if let Some(items) = body.data.as_ref().or(body.results.as_ref()) {
        out.push(ResponseEvent::Pooled {
            items: u32::try_from(items.len()).unwrap_or(u32::MAX),
        });
    }
    let mut finish = None;
    for choice in body.choices.unwrap_or_default() {
        let mut chunk = Chunk::default();
        if let Some(d) = choice.delta.or(choice.message) {
            chunk.text = d.content.map(Cow::into_owned).unwrap_or_default();
            chunk.reasoning = d
                .reasoning_content
                .or(d.reasoning)
                .map(Cow::into_owned)
                .unwrap_or_default();
        }
        if let Some(t) = choice.text {
            chunk.text.push_str(&t);
        }
        if chunk.has_tokens() {
            out.push(ResponseEvent::Chunk(chunk));
        }
        if let Some(reason) = choice.finish_reason {
            finish = Some(reason.into_owned());
        }
    }
    if let Some(reason) = finish {
        out.push(ResponseEvent::Finish {
            reason: Some(reason),
        });
    }
    if let Some(u) = body.usage {
        out.push(ResponseEvent::Usage(
            Usage::new(u.prompt_tokens, u.completion_tokens)
                .with_reasoning(u.completion_tokens_details.and_then(|d| d.reasoning_tokens)),
        ));
    }
    Ok(())
}
