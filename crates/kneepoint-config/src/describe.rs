//! The resolved settings as recorded in every export's `input_config` (no secrets).

use crate::{CommonSettings, Protocol, Target};
use kneepoint_core::folder;

/// The request-body fields as they may be shown: what they hold under secret-named keys
/// (`api_key`, `password`, at any depth) is `[redacted]`.
fn extra_body(body: &serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    let mut shown = serde_json::Value::Object(body.clone());
    kneepoint_core::secrets::redact_json(&mut shown);
    shown
}

impl CommonSettings {
    /// The settings as recorded in exports (no secrets: the API key and header values are
    /// left out, and request-body fields under secret-named keys are `[redacted]`).
    pub fn describe(&self) -> serde_json::Value {
        let protocol = self.target.protocol();
        let target = match (&self.target, protocol) {
            (Target::Simulator { profile, .. }, _) => {
                serde_json::json!({"kind": "simulator", "profile": profile})
            }
            (Target::Endpoint(_), Protocol::OpenAi { config, .. }) => {
                serde_json::json!({"kind": "openai", "url": kneepoint_transport::redact_url(&config.url())})
            }
            #[cfg(feature = "sagemaker")]
            (Target::Endpoint(_), Protocol::SageMaker(_)) => {
                serde_json::json!({"kind": "sagemaker"})
            }
        };
        #[cfg(feature = "sagemaker")]
        let sagemaker = protocol.sagemaker().map(|s| {
            let c = &s.config;
            serde_json::json!({
                "endpoint_name": c.endpoint_name,
                "region": c.region,
                "url": c.url(),
                "body": c.body,
                "payload_codec": c.codec,
                "streaming": c.streaming,
                "headers": c.headers,
                "credentials": match &s.aws_profile {
                    Some(p) => format!("AWS default chain, profile {p}"),
                    None => "AWS default chain".to_owned(),
                },
            })
        });
        #[cfg(not(feature = "sagemaker"))]
        let sagemaker: Option<serde_json::Value> = None;
        serde_json::json!({
            "shard": self.shard.map(|s| serde_json::json!({
                "index": s.index,
                "count": s.count,
                "levels": self.shard_levels,
            })),
            "start_at": self.levels.start_at_unix_ns.map(kneepoint_metrics::export::rfc3339),
            "target": target,
            "sagemaker": sagemaker,
            "endpoint": protocol.openai().map(|c| serde_json::json!({
                "type": c.api,
                "url": kneepoint_transport::redact_url(&c.url()),
                "model": c.model,
                "streaming": c.streaming,
                "max_tokens_field": c.max_tokens_field,
                "request_id": c.request_id,
                "connect": c.connect,
                "header_names": c.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                "api_key": c.api_key.as_ref().map(|_| "[redacted]"),
                "extra_body": extra_body(&c.extra_body),
            })),
            "workload": {
                "tokenizer": self.tokenizer,
                "isl": self.isl,
                "osl": self.osl,
                "mixture": self.mixture,
                "shared_prefix": self.prefix,
                "conversations": self.conversations,
                "images": self.images,
                "audio": self.audio,
                "pooling": self.pooling,
                "routes": protocol.routes().map(|r| serde_json::json!({
                    "urls": r.urls.iter().map(|u| kneepoint_transport::redact_url(u)).collect::<Vec<_>>(),
                    "models": r.models,
                    "rule": format!("{:?}", r.rule),
                })),
                "dataset": self.dataset,
                "output_control": self.output_control,
                "seed": self.levels.seed,
                // a length sweep: each length's pair and the seed its prompts were drawn with
                "lengths": self.lengths.as_ref().map(|ps| ps.iter().map(|p| serde_json::json!({
                    "isl": p.isl,
                    "osl": p.osl,
                    "seed": crate::workload::length_seed(self.levels.seed, *p),
                })).collect::<Vec<_>>()),
                "prompts": "built-in corpus, exact token counts",
            },
            "requests": self.describe_requests(),
        })
    }

    /// The request settings of [`CommonSettings::describe`]: counts, loads, deadlines, retries
    /// and what is recorded.
    fn describe_requests(&self) -> serde_json::Value {
        serde_json::json!({
            "reset_prefix_cache": self.reset_prefix_cache.as_deref().map(kneepoint_transport::redact_url),
            "request_count": self.levels.request_count,
            "warmup_request_count": self.levels.warmup_requests,
            "lead_in_request_count": self.levels.lead_in,
            "open_loop": self.levels.open_loop.as_ref().map(|o| serde_json::json!({
                "request_rates": o.rates,
                "arrival": format!("{:?}", o.arrival),
                "max_in_flight": o.max_in_flight,
                "replay_speedup": o.replay_speedup,
            })),
            "duration_s": self.levels.duration.map(|d| d.measure.as_secs_f64()),
            "grace_s": self.levels.duration.map(|d| d.grace.as_secs_f64()),
            "warmup_duration_s": self.levels.duration.map(|d| d.warmup.as_secs_f64()),
            "ramp_up_s": self.levels.ramp_up.map(|d| d.as_secs_f64()),
            "early_stop": self.levels.early_stop.map(|e| serde_json::json!({
                "max_relative_width": e.max_relative_width,
                "min_requests": e.min_requests,
                "confidence": e.confidence,
            })),
            "num_runs": self.levels.runs.num_runs,
            "confidence_level": self.levels.runs.confidence,
            "convergence": self.levels.runs.convergence,
            "request_timeout_s": self.levels.deadlines.request.map(|d| d.as_secs_f64()),
            "response_timeout_s": self.levels.deadlines.response.map(|d| d.as_secs_f64()),
            "first_token_timeout_s": self.levels.deadlines.first_token.map(|d| d.as_secs_f64()),
            "idle_timeout_s": self.levels.deadlines.idle.map(|d| d.as_secs_f64()),
            "retries": self.levels.retry.max_retries,
            "trust_server_usage": self.levels.trust_server_usage,
            "export_outputs_json": self.levels.export_outputs,
            "records": if self.levels.compress_records { folder::RECORDS_ZSTD } else { folder::RECORDS },
            "records_in_memory": self.levels.records_in_memory,
            "exact_percentiles": self.levels.exact_percentiles,
            "inputs_limit": self.levels.inputs_limit,
            "server_metrics": self.server_metrics.endpoints,
            "server_metrics_from_target": self.server_metrics.target_metrics,
            "server_metrics_interval_s": self.server_metrics.interval.as_secs_f64(),
            "retry_backoff_ms": self.levels.retry.backoff.as_millis() as u64,
        })
    }
}
