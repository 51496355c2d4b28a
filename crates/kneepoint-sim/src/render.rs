//! Rendering OpenAI-compatible response bodies (SSE chunks and whole responses).

use bytes::Bytes;

use crate::request::Api;
use crate::words::token_text;

/// What every chunk of one response shares.
#[derive(Debug, Clone)]
pub(crate) struct ResponseMeta {
    pub api: Api,
    pub id: u64,
    /// The model name, already JSON-encoded (with quotes).
    pub model_json: String,
    pub created: u64,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// Pooling: the embeddings or scores to answer.
    pub items: u32,
    /// Of those, the first ones stream as reasoning (chat only).
    pub reasoning_tokens: u32,
    pub finish_reason: &'static str,
}

impl ResponseMeta {
    fn head(&self) -> String {
        let object = match self.api {
            Api::Chat => "chat.completion.chunk",
            _ => "text_completion",
        };
        format!(
            r#"{{"id":"cmpl-sim-{}","object":"{object}","created":{},"model":{}"#,
            self.id, self.created, self.model_json
        )
    }

    /// The chat role chunk vLLM sends first.
    pub fn role_event(&self) -> Bytes {
        Bytes::from(format!(
            "data: {},\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"finish_reason\":null}}]}}\n\n",
            self.head()
        ))
    }

    /// The SSE event for token `index`.
    pub fn token_event(&self, index: u32, finished: bool) -> Bytes {
        let word = token_text(self.id, index);
        if self.api == Api::Tgi {
            let details = if finished {
                format!(
                    "{{\"finish_reason\":\"{}\",\"generated_tokens\":{},\"seed\":null}}",
                    self.finish_reason, self.output_tokens
                )
            } else {
                "null".into()
            };
            return Bytes::from(format!(
                "data:{{\"index\":{},\"token\":{{\"id\":{index},\"text\":\" {word}\",\"logprob\":-0.1,\"special\":false}},\"generated_text\":null,\"details\":{details}}}\n\n",
                index + 1
            ));
        }
        let finish = if finished {
            format!("\"{}\"", self.finish_reason)
        } else {
            "null".into()
        };
        let field = if index < self.reasoning_tokens {
            "reasoning_content"
        } else {
            "content"
        };
        let choice = match self.api {
            Api::Chat => format!(
                "{{\"index\":0,\"delta\":{{\"{field}\":\" {word}\"}},\"finish_reason\":{finish}}}"
            ),
            _ => {
                format!("{{\"index\":0,\"text\":\" {word}\",\"finish_reason\":{finish}}}")
            }
        };
        Bytes::from(format!(
            "data: {},\"choices\":[{choice}]}}\n\n",
            self.head()
        ))
    }

    fn usage_json(&self) -> String {
        let details = if self.reasoning_tokens > 0 {
            format!(
                ",\"completion_tokens_details\":{{\"reasoning_tokens\":{}}}",
                self.reasoning_tokens
            )
        } else {
            String::new()
        };
        format!(
            "{{\"prompt_tokens\":{},\"completion_tokens\":{},\"total_tokens\":{}{details}}}",
            self.prompt_tokens,
            self.output_tokens,
            self.prompt_tokens + self.output_tokens
        )
    }

    /// The final usage chunk (`stream_options.include_usage`).
    pub fn usage_event(&self) -> Bytes {
        Bytes::from(format!(
            "data: {},\"choices\":[],\"usage\":{}}}\n\n",
            self.head(),
            self.usage_json()
        ))
    }

    /// A pooling answer: an 8-dimensional vector per input (embeddings), or a relevance score
    /// per document (rerank, score), made-up values deterministic per request; usage counts
    /// the prompt.
    fn pooled(&self) -> Bytes {
        let score = |i: u32| {
            let h =
                u64::from(token_text(self.id, i).len() as u32) * 7 + u64::from(i) * 13 + self.id;
            (h % 1000) as f64 / 1000.0
        };
        let usage = format!(
            "{{\"prompt_tokens\":{p},\"total_tokens\":{p}}}",
            p = self.prompt_tokens
        );
        let body = match self.api {
            Api::Embeddings => {
                let data: Vec<String> = (0..self.items)
                    .map(|i| {
                        let v: Vec<String> = (0..8)
                            .map(|d| {
                                format!(
                                    "{:.4}",
                                    (score(i * 8 + d) - 0.5) / std::f64::consts::SQRT_2
                                )
                            })
                            .collect();
                        format!(
                            "{{\"object\":\"embedding\",\"index\":{i},\"embedding\":[{}]}}",
                            v.join(",")
                        )
                    })
                    .collect();
                format!(
                    r#"{{"object":"list","model":{},"data":[{}],"usage":{usage}}}"#,
                    self.model_json,
                    data.join(",")
                )
            }
            Api::Rerank => {
                let results: Vec<String> = (0..self.items)
                    .map(|i| format!("{{\"index\":{i},\"relevance_score\":{:.4}}}", score(i)))
                    .collect();
                format!(
                    r#"{{"id":"rerank-sim-{}","model":{},"results":[{}],"usage":{usage}}}"#,
                    self.id,
                    self.model_json,
                    results.join(",")
                )
            }
            _ => {
                let data: Vec<String> = (0..self.items)
                    .map(|i| {
                        format!(
                            "{{\"index\":{i},\"object\":\"score\",\"score\":{:.4}}}",
                            score(i)
                        )
                    })
                    .collect();
                format!(
                    r#"{{"id":"score-sim-{}","object":"list","model":{},"data":[{}],"usage":{usage}}}"#,
                    self.id,
                    self.model_json,
                    data.join(",")
                )
            }
        };
        Bytes::from(body)
    }

    /// The whole (non-streaming) response.
    pub fn whole(&self) -> Bytes {
        if self.api.is_pooling() {
            return self.pooled();
        }
        let words = |r: std::ops::Range<u32>| -> String {
            let t: String = r.map(|i| format!(" {}", token_text(self.id, i))).collect();
            serde_json::Value::String(t).to_string()
        };
        let split = if self.api == Api::Chat {
            self.reasoning_tokens
        } else {
            0
        };
        let text = words(split..self.output_tokens);
        let reasoning = if split > 0 {
            format!(",\"reasoning_content\":{}", words(0..split))
        } else {
            String::new()
        };
        if self.api == Api::Tgi {
            return Bytes::from(format!(
                "[{{\"generated_text\":{text},\"details\":{{\"finish_reason\":\"{}\",\"generated_tokens\":{}}}}}]",
                self.finish_reason, self.output_tokens
            ));
        }
        let (object, choice) = match self.api {
            Api::Chat => (
                "chat.completion",
                format!(
                    "{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":{text}{reasoning}}},\"finish_reason\":\"{}\"}}",
                    self.finish_reason
                ),
            ),
            _ => (
                "text_completion",
                format!(
                    "{{\"index\":0,\"text\":{text},\"finish_reason\":\"{}\"}}",
                    self.finish_reason
                ),
            ),
        };
        Bytes::from(format!(
            r#"{{"id":"cmpl-sim-{}","object":"{object}","created":{},"model":{},"choices":[{choice}],"usage":{}}}"#,
            self.id,
            self.created,
            self.model_json,
            self.usage_json()
        ))
    }
}

/// `data: [DONE]`.
pub(crate) const DONE: &[u8] = b"data: [DONE]\n\n";

/// A vLLM-style error body.
pub(crate) fn error_body(status: u16, kind: &str, message: &str) -> Bytes {
    Bytes::from(
        serde_json::json!({"object": "error", "message": message, "type": kind, "code": status})
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(api: Api) -> ResponseMeta {
        ResponseMeta {
            api,
            id: 1,
            model_json: "\"m\"".into(),
            created: 5,
            prompt_tokens: 3,
            output_tokens: 2,
            items: 1,
            reasoning_tokens: 0,
            finish_reason: "length",
        }
    }

    #[test]
    fn a_reasoning_model_streams_reasoning_first_and_counts_it_in_usage() {
        let mut m = meta(Api::Chat);
        m.output_tokens = 4;
        m.reasoning_tokens = 3;
        let delta = |i: u32| -> serde_json::Value {
            let ev = m.token_event(i, i == 3);
            let s = std::str::from_utf8(&ev).unwrap();
            let v: serde_json::Value =
                serde_json::from_str(s.strip_prefix("data: ").unwrap().trim_end()).unwrap();
            v["choices"][0]["delta"].clone()
        };
        for i in 0..3 {
            assert!(delta(i)["reasoning_content"].is_string() && delta(i)["content"].is_null());
        }
        assert!(delta(3)["content"].is_string() && delta(3)["reasoning_content"].is_null());
        let usage = m.usage_event();
        let s = std::str::from_utf8(&usage).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(s.strip_prefix("data: ").unwrap().trim_end()).unwrap();
        assert_eq!(v["usage"]["completion_tokens"], 4);
        assert_eq!(
            v["usage"]["completion_tokens_details"]["reasoning_tokens"],
            3
        );
        let whole: serde_json::Value = serde_json::from_slice(&m.whole()).unwrap();
        let message = &whole["choices"][0]["message"];
        assert_eq!(
            message["reasoning_content"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count(),
            3
        );
        assert_eq!(
            message["content"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count(),
            1
        );
    }

    #[test]
    fn chunks_are_valid_json() {
        for api in [Api::Chat, Api::Completions] {
            let m = meta(api);
            for ev in [
                m.role_event(),
                m.token_event(0, false),
                m.token_event(1, true),
                m.usage_event(),
            ] {
                let s = std::str::from_utf8(&ev).unwrap();
                let json = s.strip_prefix("data: ").unwrap().trim_end();
                let v: serde_json::Value = serde_json::from_str(json).unwrap();
                assert_eq!(v["model"], "m");
            }
            let v: serde_json::Value = serde_json::from_slice(&m.whole()).unwrap();
            assert_eq!(v["usage"]["completion_tokens"], 2);
        }
    }
}
