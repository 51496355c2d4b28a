//! Parsing an OpenAI-compatible request as the simulator needs it.

use kneepoint_core::TokenCounter;
use serde_json::Value;

/// Which API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Api {
    Chat,
    Completions,
    /// A TGI / LMI body (`{"inputs": ..., "parameters": {...}}`), on the SageMaker routes.
    Tgi,
    /// `/v1/embeddings`: a batch of inputs, one embedding each.
    Embeddings,
    /// `/v1/rerank`: a query and documents, a relevance score each.
    Rerank,
    /// `/v1/score`: `text_1` against each of `text_2`.
    Score,
}

impl Api {
    /// The pooling APIs: a prefill, no generated tokens, one JSON answer.
    pub(crate) fn is_pooling(self) -> bool {
        matches!(self, Api::Embeddings | Api::Rerank | Api::Score)
    }
}

impl Api {
    /// The API a SageMaker invocation body speaks (`messages`, `prompt` or `inputs`).
    #[cfg(feature = "sagemaker")]
    pub(crate) fn detect(body: &[u8]) -> Api {
        let head = &body[..body.len().min(4096)];
        let has = |k: &[u8]| head.windows(k.len()).any(|w| w == k);
        if has(b"\"inputs\"") && !has(b"\"messages\"") {
            Api::Tgi
        } else if has(b"\"prompt\"") && !has(b"\"messages\"") {
            Api::Completions
        } else {
            Api::Chat
        }
    }
}

/// The fields of a generation request the simulator honours.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GenRequest {
    pub prompt_tokens: u32,
    pub stream: bool,
    pub include_usage: bool,
    pub max_tokens: Option<u32>,
    pub min_tokens: Option<u32>,
    pub ignore_eos: bool,
    /// Pooling: the inputs (embeddings) or documents (rerank, score) to answer for.
    pub items: u32,
}

/// Parses a request body; `Err` carries a message for a 400 answer.
pub(crate) fn parse_request(
    api: Api,
    body: &[u8],
    counter: &dyn TokenCounter,
) -> Result<GenRequest, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("invalid JSON body: {e}"))?;
    let obj = v.as_object().ok_or("the body must be a JSON object")?;
    if api == Api::Tgi {
        return parse_tgi(obj, counter);
    }
    if api.is_pooling() {
        return parse_pooling(api, obj, counter);
    }
    let prompt_tokens = match api {
        Api::Tgi | Api::Embeddings | Api::Rerank | Api::Score => 0,
        Api::Chat => {
            let msgs = obj
                .get("messages")
                .and_then(Value::as_array)
                .ok_or("`messages` must be an array")?;
            msgs.iter()
                .map(|m| message_tokens(m, counter))
                .sum::<Result<usize, String>>()?
        }
        Api::Completions => match obj.get("prompt") {
            Some(Value::String(s)) => counter.count(s),
            Some(Value::Array(a)) => a
                .iter()
                .map(|p| {
                    p.as_str()
                        .map(|t| counter.count(t))
                        .ok_or("`prompt` items must be strings")
                })
                .sum::<Result<usize, &str>>()?,
            _ => return Err("`prompt` must be a string".into()),
        },
    };
    let uint = |name: &str| -> Result<Option<u32>, String> {
        match obj.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| format!("`{name}` must be a non-negative integer")),
        }
    };
    let stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
    Ok(GenRequest {
        prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
        stream,
        include_usage: stream
            && obj
                .get("stream_options")
                .and_then(|o| o.get("include_usage"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
        max_tokens: match uint("max_tokens")? {
            Some(n) => Some(n),
            None => uint("max_completion_tokens")?,
        },
        min_tokens: uint("min_tokens")?,
        ignore_eos: obj
            .get("ignore_eos")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        items: 1,
    })
}

fn parse_tgi(
    obj: &serde_json::Map<String, Value>,
    counter: &dyn TokenCounter,
) -> Result<GenRequest, String> {
    let prompt = obj
        .get("inputs")
        .and_then(Value::as_str)
        .ok_or("`inputs` must be a string")?;
    let params = obj.get("parameters").and_then(Value::as_object);
    let uint = |name: &str| -> Result<Option<u32>, String> {
        match params.and_then(|p| p.get(name)) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| format!("`parameters.{name}` must be a non-negative integer")),
        }
    };
    Ok(GenRequest {
        prompt_tokens: u32::try_from(counter.count(prompt)).unwrap_or(u32::MAX),
        stream: obj.get("stream").and_then(Value::as_bool).unwrap_or(false),
        include_usage: false,
        max_tokens: uint("max_new_tokens")?,
        min_tokens: uint("min_new_tokens")?,
        ignore_eos: params
            .and_then(|p| p.get("ignore_eos"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        items: 1,
    })
}

/// A pooling request: its inputs' tokens and how many items it asks for. It runs as a prefill
/// and one engine step, and is never streamed.
fn parse_pooling(
    api: Api,
    obj: &serde_json::Map<String, Value>,
    counter: &dyn TokenCounter,
) -> Result<GenRequest, String> {
    let texts = |v: Option<&Value>, name: &str| -> Result<Vec<String>, String> {
        match v {
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| format!("`{name}` items must be strings"))
                })
                .collect(),
            _ => Err(format!(
                "`{name}` must be a string or a non-empty array of strings"
            )),
        }
    };
    let (query, items) = match api {
        Api::Embeddings => (Vec::new(), texts(obj.get("input"), "input")?),
        Api::Rerank => (
            texts(obj.get("query"), "query")?,
            texts(obj.get("documents"), "documents")?,
        ),
        _ => (
            texts(obj.get("text_1"), "text_1")?,
            texts(obj.get("text_2"), "text_2")?,
        ),
    };
    // Each document is scored with the query: the query's tokens count once per document.
    let q: usize = query.iter().map(|t| counter.count(t)).sum();
    let tokens: usize = items.iter().map(|t| counter.count(t) + q).sum();
    Ok(GenRequest {
        prompt_tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
        stream: false,
        include_usage: false,
        max_tokens: Some(1),
        min_tokens: None,
        ignore_eos: true,
        items: u32::try_from(items.len()).unwrap_or(u32::MAX),
    })
}

fn message_tokens(m: &Value, counter: &dyn TokenCounter) -> Result<usize, String> {
    match m.get("content") {
        Some(Value::String(s)) => Ok(counter.count(s)),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match p.get("type").and_then(Value::as_str) {
                Some("image_url") => crate::media::image_tokens(p),
                Some("input_audio") => crate::media::audio_tokens(p),
                _ => Ok(p
                    .get("text")
                    .and_then(Value::as_str)
                    .map_or(0, |t| counter.count(t))),
            })
            .sum(),
        Some(Value::Null) | None => Ok(0),
        _ => Err("message `content` must be a string or an array of parts".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use kneepoint_core::ApproxTokenCounter;

    #[test]
    fn images_cost_a_token_per_patch() {
        // a 56 x 30 PNG header: 2 x 2 patches
        let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        png.extend_from_slice(&56u32.to_be_bytes());
        png.extend_from_slice(&30u32.to_be_bytes());
        png.extend_from_slice(&[8, 2, 0, 0, 0]);
        let url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&png)
        );
        let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "a b"},
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
        ]}]});
        let r = parse_request(Api::Chat, body.to_string().as_bytes(), &ApproxTokenCounter).unwrap();
        assert_eq!(r.prompt_tokens, 2 + 4 + 256);
        let bad = serde_json::json!({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,bm90IGEgcG5nIGF0IGFsbCwgbm8="}},
        ]}]});
        let e = parse_request(Api::Chat, bad.to_string().as_bytes(), &ApproxTokenCounter);
        assert!(e.unwrap_err().contains("not a PNG"));
    }

    /// A canonical 44-byte header of a mono 16-bit WAV of `ms` at 16 kHz, with its samples.
    fn wav(ms: u32) -> String {
        let data = ms * 32;
        let mut b = b"RIFF".to_vec();
        b.extend_from_slice(&(36 + data).to_le_bytes());
        b.extend_from_slice(b"WAVEfmt ");
        b.extend_from_slice(&16u32.to_le_bytes());
        b.extend_from_slice(&[1, 0, 1, 0]);
        b.extend_from_slice(&16_000u32.to_le_bytes());
        b.extend_from_slice(&32_000u32.to_le_bytes());
        b.extend_from_slice(&[2, 0, 16, 0]);
        b.extend_from_slice(b"data");
        b.extend_from_slice(&data.to_le_bytes());
        b.resize(44 + data as usize, 7);
        base64::engine::general_purpose::STANDARD.encode(&b)
    }

    #[test]
    fn audio_costs_25_tokens_a_second() {
        let part = |data: &str, format: &str| serde_json::json!({"type": "input_audio", "input_audio": {"data": data, "format": format}});
        let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "a b"},
            part(&wav(2000), "wav"),
            part(&wav(1010), "wav"),
        ]}]});
        let r = parse_request(Api::Chat, body.to_string().as_bytes(), &ApproxTokenCounter).unwrap();
        // 2 text tokens, 50 for two seconds, 26 for 1.01 s (rounded up)
        assert_eq!(r.prompt_tokens, 2 + 50 + 26);
        for (p, says) in [
            (part(&wav(1000), "mp3"), "WAV audio only"),
            (part("bm90IGEgd2F2IGZpbGUgYXQgYWxs", "wav"), "not a PCM WAV"),
            (part("###", "wav"), "invalid base64"),
            (part(&"é".repeat(3000), "wav"), "invalid base64"),
            (serde_json::json!({"type": "input_audio"}), "needs"),
        ] {
            let body = serde_json::json!({"messages": [{"role": "user", "content": [p]}]});
            let e = parse_request(Api::Chat, body.to_string().as_bytes(), &ApproxTokenCounter)
                .unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn chat_request() {
        let r = parse_request(
            Api::Chat,
            br#"{"model":"m","messages":[{"role":"system","content":"a b"},{"role":"user","content":[{"type":"text","text":"c d e"}]}],
                "stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":9,"min_tokens":9,"ignore_eos":true}"#,
            &ApproxTokenCounter,
        )
        .unwrap();
        assert_eq!(
            r,
            GenRequest {
                prompt_tokens: 5,
                stream: true,
                include_usage: true,
                max_tokens: Some(9),
                min_tokens: Some(9),
                ignore_eos: true,
                items: 1,
            }
        );
    }

    #[test]
    fn pooling_requests_count_their_inputs() {
        let c = &ApproxTokenCounter;
        let e = parse_request(
            Api::Embeddings,
            br#"{"model":"e","input":["a b","c d e"]}"#,
            c,
        )
        .unwrap();
        assert_eq!((e.prompt_tokens, e.items, e.stream), (5, 2, false));
        let r = parse_request(
            Api::Rerank,
            br#"{"query":"q w","documents":["a","b c","d"]}"#,
            c,
        )
        .unwrap();
        // the query counts with each of the three documents
        assert_eq!((r.prompt_tokens, r.items), (4 + 6, 3));
        let s = parse_request(Api::Score, br#"{"text_1":"q","text_2":"a b"}"#, c).unwrap();
        assert_eq!((s.prompt_tokens, s.items), (3, 1));
        for bad in [&br#"{"input":[]}"#[..], br#"{"input":[1]}"#, br#"{}"#] {
            assert!(parse_request(Api::Embeddings, bad, c).is_err());
        }
    }

    #[test]
    fn completions_and_errors() {
        let c = &ApproxTokenCounter;
        let r = parse_request(Api::Completions, br#"{"prompt":"x y","max_tokens":3}"#, c).unwrap();
        assert_eq!(r.prompt_tokens, 2);
        assert!(!r.stream && !r.include_usage);
        assert!(parse_request(Api::Completions, b"{", c).is_err());
        assert!(parse_request(Api::Chat, br#"{"prompt":"x"}"#, c).is_err());
        assert!(parse_request(Api::Completions, br#"{"prompt":"x","max_tokens":-1}"#, c).is_err());
    }

    #[cfg(feature = "sagemaker")]
    #[test]
    fn tgi_request_and_detection() {
        let body = br#"{"inputs":"a b c","parameters":{"max_new_tokens":7,"ignore_eos":true},"stream":true}"#;
        assert_eq!(Api::detect(body), Api::Tgi);
        let r = parse_request(Api::Tgi, body, &ApproxTokenCounter).unwrap();
        assert_eq!(
            (r.prompt_tokens, r.max_tokens, r.ignore_eos, r.stream),
            (3, Some(7), true, true)
        );
        assert_eq!(Api::detect(br#"{"messages":[],"model":"m"}"#), Api::Chat);
        assert_eq!(Api::detect(br#"{"prompt":"x"}"#), Api::Completions);
    }
}
