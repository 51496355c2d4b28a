//! Request bodies for the OpenAI-compatible APIs.
//!
//! A chat or completions body is serialised from borrowed fields ([`TextBody`]): straight to
//! the wire when nothing is added to it (no images, no extra fields), else through a
//! `serde_json::Value` that images and extra fields edit. Building the value first copied a
//! 1,024-token prompt twice; the body cost about 83,000 instructions a request (callgrind),
//! 58,000 now.

use kneepoint_core::{Prompt, Request};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::config::{Api, OpenAiConfig};

/// Builds the JSON body for `request` under `config`.
pub fn request_body(config: &OpenAiConfig, request: &Request) -> Value {
    if config.api.is_pooling() {
        let mut body = Map::new();
        if !config.model.is_empty() {
            body.insert("model".into(), Value::String(config.model.clone()));
        }
        pooling_body(config.api, request, &mut body);
        for (k, v) in config.extra_body.iter().chain(request.extra_body.iter()) {
            body.insert(k.clone(), v.clone());
        }
        return Value::Object(body);
    }
    // Borrowed strings and numbers: serialising them into a value cannot fail.
    let mut body = serde_json::to_value(TextBody { config, request }).unwrap_or(Value::Null);
    if !request.images.is_empty() || !request.audio.is_empty() {
        if let Some(messages) = body.get_mut("messages") {
            attach_media(messages, request);
        }
    }
    if let Value::Object(map) = &mut body {
        for (k, v) in config.extra_body.iter().chain(request.extra_body.iter()) {
            map.insert(k.clone(), v.clone());
        }
    }
    body
}

/// The bytes of `request`'s body: those of [`request_body`], without building the value when
/// nothing edits it.
pub(crate) fn body_bytes(
    config: &OpenAiConfig,
    request: &Request,
) -> Result<Vec<u8>, serde_json::Error> {
    let plain = !config.api.is_pooling()
        && request.images.is_empty()
        && request.audio.is_empty()
        && config.extra_body.is_empty()
        && request.extra_body.is_empty();
    if !plain {
        return serde_json::to_vec(&request_body(config, request));
    }
    let prompt = match &request.prompt {
        Prompt::Text(t) => t.len(),
        Prompt::Messages(m) => m.iter().map(|m| m.content.len() + 32).sum(),
        _ => 0,
    };
    // The prompt, a few escapes, and the fixed fields.
    let mut out = Vec::with_capacity(prompt + prompt / 16 + 256);
    match (config.api, &request.prompt) {
        (Api::Chat | Api::Completions, Prompt::Text(text)) => {
            write_text_body(&mut out, config, request, text)?;
        }
        _ => serde_json::to_writer(&mut out, &TextBody { config, request })?,
    }
    Ok(out)
}

/// What serialising [`TextBody`] writes for a text prompt, with the prompt escaped by
/// [`kneepoint_core::json_text`]: `serde_json` escapes a string a byte at a time, and the
/// prompt is nearly all of the body (tests hold the two byte for byte equal).
fn write_text_body(
    out: &mut Vec<u8>,
    config: &OpenAiConfig,
    request: &Request,
    text: &str,
) -> Result<(), serde_json::Error> {
    use kneepoint_core::json_text::write_json_str;
    let mut keys = 0usize;
    let mut key = |out: &mut Vec<u8>, k: &str| {
        out.push(if keys == 0 { b'{' } else { b',' });
        keys += 1;
        write_json_str(out, k);
        out.push(b':');
    };
    if !config.model.is_empty() {
        key(out, "model");
        write_json_str(out, &config.model);
    }
    if config.api == Api::Chat {
        key(out, "messages");
        out.extend_from_slice(br#"[{"role":"user","content":"#);
        write_json_str(out, text);
        out.extend_from_slice(b"}]");
    } else {
        key(out, "prompt");
        write_json_str(out, text);
    }
    key(out, "stream");
    serde_json::to_writer(&mut *out, &config.streaming)?;
    if config.streaming && config.include_usage {
        key(out, "stream_options");
        out.extend_from_slice(br#"{"include_usage":true}"#);
    }
    if let Some(n) = request.max_output_tokens {
        key(out, config.max_tokens_field.as_str());
        serde_json::to_writer(&mut *out, &n)?;
    }
    if let Some(n) = request.min_output_tokens {
        key(out, "min_tokens");
        serde_json::to_writer(&mut *out, &n)?;
    }
    if request.ignore_eos {
        key(out, "ignore_eos");
        out.extend_from_slice(b"true");
    }
    out.push(b'}');
    Ok(())
}

/// A chat or completions body, in the order the keys have always been sent: `model`, the
/// prompt, `stream`, `stream_options`, the output limits, `ignore_eos`.
struct TextBody<'a> {
    config: &'a OpenAiConfig,
    request: &'a Request,
}

/// The one user message of a text prompt.
#[derive(Serialize)]
struct UserMessage<'a> {
    role: &'static str,
    content: &'a str,
}

impl Serialize for TextBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (config, request) = (self.config, self.request);
        let mut m = s.serialize_map(None)?;
        // No model named (a SageMaker endpoint serves one): the field is left out, as the
        // endpoint's own examples do, rather than sent empty.
        if !config.model.is_empty() {
            m.serialize_entry("model", &config.model)?;
        }
        match (config.api, &request.prompt) {
            (Api::Chat, Prompt::Text(t)) => m.serialize_entry(
                "messages",
                &[UserMessage {
                    role: "user",
                    content: t,
                }],
            )?,
            (Api::Chat, Prompt::Messages(list)) => m.serialize_entry("messages", list)?,
            (Api::Chat, other) => m.serialize_entry("messages", &other.messages())?,
            (Api::Completions, Prompt::Text(t)) => m.serialize_entry("prompt", t)?,
            (Api::Completions, other) => m.serialize_entry("prompt", &other.text())?,
            (Api::Embeddings | Api::Rerank | Api::Score, _) => {}
        }
        m.serialize_entry("stream", &config.streaming)?;
        if config.streaming && config.include_usage {
            m.serialize_entry(
                "stream_options",
                &IncludeUsage {
                    include_usage: true,
                },
            )?;
        }
        if let Some(n) = request.max_output_tokens {
            m.serialize_entry(config.max_tokens_field.as_str(), &n)?;
        }
        if let Some(n) = request.min_output_tokens {
            m.serialize_entry("min_tokens", &n)?;
        }
        if request.ignore_eos {
            m.serialize_entry("ignore_eos", &true)?;
        }
        m.end()
    }
}

#[derive(Serialize)]
struct IncludeUsage {
    include_usage: bool,
}

/// The inputs of a pooling request: a batch for embeddings, a query and documents for rerank
/// and score (a prompt of another kind is one input, or a query without documents).
fn pooling_body(api: Api, request: &Request, body: &mut Map<String, Value>) {
    if api == Api::Embeddings {
        let input = match &request.prompt {
            Prompt::Batch(b) => json!(b),
            other => json!([other.text()]),
        };
        body.insert("input".into(), input);
        return;
    }
    let (query, documents) = match &request.prompt {
        Prompt::Rank { query, documents } => (json!(query), json!(documents)),
        Prompt::Batch(b) => (json!(""), json!(b)),
        other => (json!(other.text()), json!([])),
    };
    let (q, d) = if api == Api::Score {
        ("text_1", "text_2")
    } else {
        ("query", "documents")
    };
    body.insert(q.into(), query);
    body.insert(d.into(), documents);
}

/// Turns the last user message's content into OpenAI content parts: its text, then one
/// `image_url` part per image and one `input_audio` part per audio clip.
fn attach_media(messages: &mut Value, request: &Request) {
    let Some(list) = messages.as_array_mut() else {
        return;
    };
    let Some(user) = list.iter_mut().rev().find(|m| m["role"] == "user") else {
        return;
    };
    let text = user["content"].take();
    let mut parts = vec![json!({"type": "text", "text": text})];
    parts.extend(
        request
            .images
            .iter()
            .map(|i| json!({"type": "image_url", "image_url": {"url": &*i.url}})),
    );
    parts.extend(request.audio.iter().map(
        |a| json!({"type": "input_audio", "input_audio": {"data": &*a.data, "format": &*a.format}}),
    ));
    user["content"] = Value::Array(parts);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MaxTokensField;

    #[test]
    fn the_written_text_body_is_what_serde_json_writes() {
        let prompts = [
            "hi",
            "",
            "a \"quoted\"\nline\twith é and \u{1}",
            &"words ".repeat(300),
        ];
        for api in [Api::Chat, Api::Completions] {
            for model in ["", "m1", "org/model\"x"] {
                for (streaming, usage) in [(true, true), (true, false), (false, true)] {
                    for field in [
                        MaxTokensField::MaxTokens,
                        MaxTokensField::MaxCompletionTokens,
                    ] {
                        for (max, min, eos) in [(None, None, false), (Some(16), Some(3), true)] {
                            for p in prompts {
                                let mut c = OpenAiConfig::new("http://x", model);
                                (c.api, c.streaming, c.include_usage) = (api, streaming, usage);
                                c.max_tokens_field = field;
                                let mut r = Request::text(3, p);
                                (r.max_output_tokens, r.min_output_tokens, r.ignore_eos) =
                                    (max, min, eos);
                                let want = serde_json::to_vec(&TextBody {
                                    config: &c,
                                    request: &r,
                                })
                                .unwrap();
                                assert_eq!(body_bytes(&c, &r).unwrap(), want);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn chat_streaming_body() {
        let mut c = OpenAiConfig::new("http://x", "m1");
        c.extra_body.insert("temperature".into(), json!(0.0));
        let mut r = Request::text(3, "hi");
        r.max_output_tokens = Some(16);
        r.min_output_tokens = Some(16);
        r.ignore_eos = true;
        r.extra_body.insert("temperature".into(), json!(0.5));
        let b = request_body(&c, &r);
        assert_eq!(
            b,
            json!({"model":"m1","messages":[{"role":"user","content":"hi"}],"stream":true,
                   "stream_options":{"include_usage":true},"max_tokens":16,"min_tokens":16,
                   "ignore_eos":true,"temperature":0.5})
        );
    }

    #[test]
    fn images_become_content_parts_of_the_last_user_message() {
        let c = OpenAiConfig::new("http://x", "m1");
        let mut r = Request::text(3, "describe");
        r.prompt = kneepoint_core::Prompt::Messages(vec![
            kneepoint_core::Message::system("be brief"),
            kneepoint_core::Message::user("describe"),
        ]);
        r.images = vec![
            kneepoint_core::Image {
                width: 2,
                height: 2,
                url: "data:image/png;base64,AAAA".into(),
            };
            2
        ];
        let b = request_body(&c, &r);
        assert_eq!(b["messages"][0]["content"], "be brief");
        let parts = b["messages"][1]["content"].as_array().unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0], json!({"type": "text", "text": "describe"}));
        assert_eq!(parts[2]["image_url"]["url"], "data:image/png;base64,AAAA");
    }

    #[test]
    fn audio_follows_the_images_as_input_audio_parts() {
        let c = OpenAiConfig::new("http://x", "m1");
        let mut r = Request::text(3, "transcribe");
        r.images = vec![kneepoint_core::Image {
            width: 2,
            height: 2,
            url: "data:image/png;base64,AAAA".into(),
        }];
        r.audio = vec![kneepoint_core::Audio {
            format: "wav".into(),
            duration_ms: 1000,
            data: "UklGRg==".into(),
        }];
        let b = request_body(&c, &r);
        let parts = b["messages"][0]["content"].as_array().unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[1]["type"], "image_url");
        assert_eq!(
            parts[2],
            json!({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}})
        );
        // the fast path is not taken with audio alone
        r.images.clear();
        let bytes = body_bytes(&c, &r).unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["messages"][0]["content"][1]["type"], "input_audio");
    }

    #[test]
    fn pooling_bodies() {
        let mut c = OpenAiConfig::new("http://x", "e5");
        c.api = Api::Embeddings;
        let mut r = Request::text(1, "");
        r.prompt = kneepoint_core::Prompt::Batch(vec!["a".into(), "b".into()]);
        r.max_output_tokens = Some(9);
        assert_eq!(
            request_body(&c, &r),
            json!({"model": "e5", "input": ["a", "b"]})
        );
        c.api = Api::Rerank;
        r.prompt = kneepoint_core::Prompt::Rank {
            query: "q".into(),
            documents: vec!["d1".into(), "d2".into()],
        };
        assert_eq!(
            request_body(&c, &r),
            json!({"model": "e5", "query": "q", "documents": ["d1", "d2"]})
        );
        c.api = Api::Score;
        assert_eq!(
            request_body(&c, &r),
            json!({"model": "e5", "text_1": "q", "text_2": ["d1", "d2"]})
        );
    }

    /// The bytes sent are those of the value, key for key, whatever the shape.
    #[test]
    fn body_bytes_are_the_values_bytes() {
        let prompts = [
            Prompt::Text("plain \"quoted\" \u{1} é\n".into()),
            Prompt::Messages(vec![
                kneepoint_core::Message::system("be brief"),
                kneepoint_core::Message::user("describe"),
            ]),
            Prompt::Batch(vec!["a".into(), "b".into()]),
            Prompt::Rank {
                query: "q".into(),
                documents: vec!["d".into()],
            },
        ];
        let mut seen = 0;
        for api in [Api::Chat, Api::Completions, Api::Embeddings, Api::Rerank] {
            for (streaming, usage, extra) in [
                (true, true, false),
                (false, true, true),
                (true, false, false),
            ] {
                for prompt in &prompts {
                    let mut c = OpenAiConfig::new("http://x", "m1");
                    c.api = api;
                    c.streaming = streaming;
                    c.include_usage = usage;
                    let mut r = Request::text(1, "");
                    r.prompt = prompt.clone();
                    r.max_output_tokens = Some(8);
                    r.min_output_tokens = streaming.then_some(8);
                    r.ignore_eos = usage;
                    if extra {
                        c.extra_body.insert("stream".into(), json!("overridden"));
                        r.extra_body.insert("top_k".into(), json!(3));
                    }
                    let bytes = body_bytes(&c, &r).unwrap();
                    let value = serde_json::to_vec(&request_body(&c, &r)).unwrap();
                    assert_eq!(
                        String::from_utf8(bytes).unwrap(),
                        String::from_utf8(value).unwrap(),
                        "{api:?} {prompt:?}"
                    );
                    seen += 1;
                }
            }
        }
        assert_eq!(seen, 48);
        // The plain chat body, whole.
        let mut r = Request::text(1, "hi");
        r.max_output_tokens = Some(4);
        assert_eq!(
            String::from_utf8(body_bytes(&OpenAiConfig::new("http://x", "m1"), &r).unwrap())
                .unwrap(),
            r#"{"model":"m1","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":4}"#
        );
    }

    /// Key order, as the value tree wrote it: the fixed fields, then extra fields, an extra
    /// field that names a fixed one replacing its value in place.
    #[test]
    fn body_bytes_keep_the_key_order() {
        let text =
            |c: &OpenAiConfig, r: &Request| String::from_utf8(body_bytes(c, r).unwrap()).unwrap();
        let mut c = OpenAiConfig::new("http://x", "m1");
        c.api = Api::Completions;
        c.max_tokens_field = MaxTokensField::MaxCompletionTokens;
        let mut r = Request::text(3, "hi");
        r.max_output_tokens = Some(4);
        r.min_output_tokens = Some(2);
        r.ignore_eos = true;
        assert_eq!(
            text(&c, &r),
            r#"{"model":"m1","prompt":"hi","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":4,"min_tokens":2,"ignore_eos":true}"#
        );
        c.extra_body.insert("stream".into(), json!(false));
        r.extra_body.insert("top_k".into(), json!(3));
        assert_eq!(
            text(&c, &r),
            r#"{"model":"m1","prompt":"hi","stream":false,"stream_options":{"include_usage":true},"max_completion_tokens":4,"min_tokens":2,"ignore_eos":true,"top_k":3}"#
        );
    }

    #[test]
    fn completions_non_streaming_body() {
        let mut c = OpenAiConfig::new("http://x", "m1");
        c.api = Api::Completions;
        c.streaming = false;
        c.max_tokens_field = MaxTokensField::MaxCompletionTokens;
        let mut r = Request::text(3, "hi");
        r.max_output_tokens = Some(4);
        let b = request_body(&c, &r);
        assert_eq!(
            b,
            json!({"model":"m1","prompt":"hi","stream":false,"max_completion_tokens":4})
        );
    }
}
