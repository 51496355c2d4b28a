//! Turning OpenAI-compatible JSON (stream chunks and whole responses) into response events.

use std::borrow::Cow;

use kneepoint_core::{Chunk, Error, ResponseEvent, Usage};
use serde::Deserialize;

use crate::sse::excerpt;

// Only the fields the metrics use are decoded; strings borrow from the event's data unless
// they hold escapes (`Cow`), and every other field (ids, model, logprobs...) is skipped unread.
#[derive(Deserialize)]
struct Body<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
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

/// Parses one JSON document (a stream chunk's data, or a whole non-streaming body) and appends
/// its events to `out`. An error object becomes `Err(Error::Server)`.
pub fn parse_body(data: &str, out: &mut Vec<ResponseEvent>) -> Result<(), Error> {
    // The common stream chunk, in one pass (what it declines, serde decodes below).
    if crate::fast_chunk::parse_chunk(data, out) {
        return Ok(());
    }
    parse_with_serde(data, out)
}

/// [`parse_body`] for one chunk of a stream whose chunks' shape `shape` remembers.
pub(crate) fn parse_stream_chunk(
    data: &str,
    shape: &mut crate::chunk_shape::ChunkShape,
    out: &mut Vec<ResponseEvent>,
) -> Result<(), Error> {
    if shape.parse(data, out) {
        return Ok(());
    }
    parse_with_serde(data, out)
}

/// [`parse_body`] without the fast path: every document through `serde_json`.
pub(crate) fn parse_with_serde(data: &str, out: &mut Vec<ResponseEvent>) -> Result<(), Error> {
    let body: Body<'_> = serde_json::from_str(data).map_err(|e| Error::MalformedResponse {
        message: format!("invalid JSON chunk: {}", excerpt(data.as_bytes())),
        source: Some(Box::new(e)),
    })?;
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
                message: message.unwrap_or_default(),
            },
            ErrorJson::Text(message) => Error::Server {
                code: None,
                message,
            },
        });
    }
    if body.object.as_deref() == Some("error") {
        return Err(Error::Server {
            code: None,
            message: body.message.unwrap_or_default(),
        });
    }
    if let Some(items) = body.data.as_ref().or(body.results.as_ref()) {
        out.push(ResponseEvent::Pooled {
            items: u32::try_from(items.len()).unwrap_or(u32::MAX),
        });
    }
    let mut finish = None;
    for choice in body.choices {
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
        out.push(ResponseEvent::Usage(Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Vec<ResponseEvent>, Error> {
        let mut v = Vec::new();
        parse_body(s, &mut v).map(|_| v)
    }

    #[test]
    fn chat_delta_with_reasoning() {
        let ev = parse(
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm","content":null}}]}"#,
        )
        .unwrap();
        assert_eq!(ev, vec![ResponseEvent::Chunk(Chunk::reasoning("hmm"))]);
    }

    #[test]
    fn role_only_delta_is_not_a_token() {
        let ev = parse(r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#).unwrap();
        assert!(ev.is_empty());
    }

    #[test]
    fn finish_and_usage() {
        let ev = parse(r#"{"choices":[{"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#).unwrap();
        assert_eq!(
            ev,
            vec![
                ResponseEvent::Finish {
                    reason: Some("length".into())
                },
                ResponseEvent::Usage(Usage {
                    prompt_tokens: Some(5),
                    completion_tokens: Some(7),
                    reasoning_tokens: None,
                })
            ]
        );
        let ev =
            parse(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#).unwrap();
        assert_eq!(ev.len(), 1);
        // a reasoning model's usage says how many of the completion tokens were reasoning
        let ev = parse(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"completion_tokens_details":{"reasoning_tokens":4}}}"#).unwrap();
        assert_eq!(
            ev,
            vec![ResponseEvent::Usage(Usage {
                prompt_tokens: Some(5),
                completion_tokens: Some(7),
                reasoning_tokens: Some(4),
            })]
        );
        // and a null or empty details object is no count
        for details in ["null", "{}"] {
            let body = format!(
                r#"{{"usage":{{"completion_tokens":7,"completion_tokens_details":{details}}}}}"#
            );
            let ev = parse(&body).unwrap();
            assert!(
                matches!(&ev[..], [ResponseEvent::Usage(u)] if u.reasoning_tokens.is_none()),
                "{ev:?}"
            );
        }
    }

    #[test]
    fn completions_text_and_whole_message() {
        let ev = parse(r#"{"choices":[{"text":" hi","finish_reason":null}]}"#).unwrap();
        assert_eq!(ev, vec![ResponseEvent::Chunk(Chunk::content(" hi"))]);
        let ev = parse(r#"{"choices":[{"message":{"role":"assistant","content":"all of it"},"finish_reason":"stop"}]}"#).unwrap();
        assert_eq!(ev[0], ResponseEvent::Chunk(Chunk::content("all of it")));
    }

    #[test]
    fn error_objects() {
        let e = parse(r#"{"error":{"message":"overloaded","type":"server_error","code":503}}"#)
            .unwrap_err();
        assert!(
            matches!(e, Error::Server { ref code, ref message } if code.as_deref() == Some("503") && message == "overloaded")
        );
        let e =
            parse(r#"{"object":"error","message":"bad","type":"BadRequestError"}"#).unwrap_err();
        assert!(matches!(e, Error::Server { .. }));
        let e = parse(r#"{"error":"plain"}"#).unwrap_err();
        assert!(matches!(e, Error::Server { ref message, .. } if message == "plain"));
    }

    #[test]
    fn garbage_is_malformed() {
        let e = parse("{not json").unwrap_err();
        assert_eq!(e.kind(), kneepoint_core::ErrorKind::MalformedResponse);
    }
}
