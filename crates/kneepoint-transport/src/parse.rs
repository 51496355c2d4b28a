//! Turning OpenAI-compatible JSON (stream chunks and whole responses) into response events.

use kneepoint_core::{Error, ResponseEvent};

use crate::serde_body::parse_with_serde;

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

/// Whether reading `chunks` in order as one stream's chunks (each by the shape the previous
/// ones taught, where it applies) gives, chunk by chunk, the answer of reading each alone with
/// [`parse_body`]: the same events, and an error exactly where it gives one. For the fuzzers
/// and tests that check the shortcut; not a stable API.
#[doc(hidden)]
pub fn stream_chunks_agree(chunks: &[&str]) -> bool {
    let mut shape = crate::chunk_shape::ChunkShape::default();
    let (mut by_shape, mut alone) = (Vec::new(), Vec::new());
    chunks.iter().all(|data| {
        by_shape.clear();
        alone.clear();
        let a = parse_stream_chunk(data, &mut shape, &mut by_shape);
        let b = parse_body(data, &mut alone);
        a.is_ok() == b.is_ok() && by_shape == alone
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::{Chunk, Usage};

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
                ResponseEvent::Usage(Usage::new(Some(5), Some(7)))
            ]
        );
        let ev =
            parse(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#).unwrap();
        assert_eq!(ev.len(), 1);
        // `"choices":null` is no choices, as an absent field is.
        let ev =
            parse(r#"{"choices":null,"usage":{"prompt_tokens":5,"completion_tokens":7}}"#).unwrap();
        assert_eq!(ev, vec![ResponseEvent::Usage(Usage::new(Some(5), Some(7)))]);
        // a reasoning model's usage says how many of the completion tokens were reasoning
        let ev = parse(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"completion_tokens_details":{"reasoning_tokens":4}}}"#).unwrap();
        assert_eq!(
            ev,
            vec![ResponseEvent::Usage(
                Usage::new(Some(5), Some(7)).with_reasoning(Some(4))
            )]
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
    fn an_error_without_a_message_says_what_the_server_sent() {
        for body in [
            r#"{"id":"c1","object":"error","choices":[{"delta":{"content":" x"}}]}"#,
            r#"{"error":{"type":"server_error"}}"#,
            r#"{"error":{"message":" "}}"#,
            r#"{"error":""}"#,
        ] {
            let e = parse(body).unwrap_err();
            let Error::Server { message, .. } = &e else {
                panic!("{body}: {e:?}")
            };
            assert!(
                message.starts_with("the server answered an error without a message: {"),
                "{body}: {message}"
            );
        }
    }

    #[test]
    fn garbage_is_malformed() {
        let e = parse("{not json").unwrap_err();
        assert_eq!(e.kind(), kneepoint_core::ErrorKind::MalformedResponse);
        assert!(
            e.to_string()
                .contains("invalid JSON chunk (key must be a string"),
            "{e}"
        );
        // Well-formed JSON of another shape says so, and why.
        for (body, why) in [
            (
                r#"{"choices":[{"delta":{"content":5}}]}"#,
                "invalid type: integer `5`, expected a string",
            ),
            (
                r#"{"choices":{}}"#,
                "invalid type: map, expected a sequence",
            ),
            (
                r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
                "duplicate field `content`",
            ),
        ] {
            let e = parse(body).unwrap_err();
            assert_eq!(e.kind(), kneepoint_core::ErrorKind::MalformedResponse);
            let text = e.to_string();
            assert!(
                text.contains("a JSON chunk of an unexpected shape (") && text.contains(why),
                "{body}: {text}"
            );
        }
    }
}
