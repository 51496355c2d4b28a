//! Request bodies for the OpenAI-compatible APIs.

use kneepoint_core::Request;
use serde_json::{json, Map, Value};

use crate::config::{Api, OpenAiConfig};

/// Builds the JSON body for `request` under `config`.
pub fn request_body(config: &OpenAiConfig, request: &Request) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(config.model.clone()));
    if config.api.is_pooling() {
        pooling_body(config.api, request, &mut body);
        for (k, v) in config.extra_body.iter().chain(request.extra_body.iter()) {
            body.insert(k.clone(), v.clone());
        }
        return Value::Object(body);
    }
    match config.api {
        Api::Chat => {
            let mut messages = json!(request.prompt.messages());
            if !request.images.is_empty() {
                attach_images(&mut messages, &request.images);
            }
            body.insert("messages".into(), messages);
        }
        Api::Completions => {
            body.insert("prompt".into(), Value::String(request.prompt.text()));
        }
        Api::Embeddings | Api::Rerank | Api::Score => {}
    }
    body.insert("stream".into(), Value::Bool(config.streaming));
    if config.streaming && config.include_usage {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(n) = request.max_output_tokens {
        body.insert(config.max_tokens_field.as_str().into(), json!(n));
    }
    if let Some(n) = request.min_output_tokens {
        body.insert("min_tokens".into(), json!(n));
    }
    if request.ignore_eos {
        body.insert("ignore_eos".into(), Value::Bool(true));
    }
    for (k, v) in config.extra_body.iter().chain(request.extra_body.iter()) {
        body.insert(k.clone(), v.clone());
    }
    Value::Object(body)
}

/// The inputs of a pooling request: a batch for embeddings, a query and documents for rerank
/// and score (a prompt of another kind is one input, or a query without documents).
fn pooling_body(api: Api, request: &Request, body: &mut Map<String, Value>) {
    use kneepoint_core::Prompt;
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
/// `image_url` part per image.
fn attach_images(messages: &mut Value, images: &[kneepoint_core::Image]) {
    let Some(list) = messages.as_array_mut() else {
        return;
    };
    let Some(user) = list.iter_mut().rev().find(|m| m["role"] == "user") else {
        return;
    };
    let text = user["content"].take();
    let mut parts = vec![json!({"type": "text", "text": text})];
    parts.extend(
        images
            .iter()
            .map(|i| json!({"type": "image_url", "image_url": {"url": &*i.url}})),
    );
    user["content"] = Value::Array(parts);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MaxTokensField;

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
