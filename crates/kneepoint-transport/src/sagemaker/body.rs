//! Request bodies for SageMaker endpoints: OpenAI bodies (vLLM container) or TGI / LMI bodies.

use kneepoint_core::Request;
use serde_json::{json, Map, Value};

use crate::body::request_body;
use crate::sagemaker::config::{BodyFormat, SageMakerConfig};

/// The JSON body for `request`.
pub fn invoke_body(config: &SageMakerConfig, request: &Request) -> Value {
    match config.body {
        BodyFormat::OpenAiChat | BodyFormat::OpenAiCompletions => {
            request_body(&config.openai_view(), request)
        }
        BodyFormat::Tgi => {
            let mut params = Map::new();
            if let Some(n) = request.max_output_tokens {
                params.insert("max_new_tokens".into(), json!(n));
            }
            if request.ignore_eos {
                // TGI has no ignore_eos; LMI (vLLM / TensorRT-LLM backends) honours these.
                params.insert("ignore_eos".into(), Value::Bool(true));
            }
            if let Some(n) = request.min_output_tokens {
                params.insert("min_new_tokens".into(), json!(n));
            }
            params.insert("details".into(), Value::Bool(true));
            for (k, v) in config.extra_body.iter().chain(request.extra_body.iter()) {
                params.insert(k.clone(), v.clone());
            }
            let mut body = Map::new();
            body.insert("inputs".into(), Value::String(request.prompt.text()));
            body.insert("parameters".into(), Value::Object(params));
            if config.streaming {
                body.insert("stream".into(), Value::Bool(true));
            }
            Value::Object(body)
        }
    }
}
