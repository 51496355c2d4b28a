//! One line of `profile_export.jsonl`, read two ways into the same fields.
//!
//! - **Typed** ([`parse_typed`]): serde reads the fields the reader needs straight into
//!   [`Fields`], borrowing strings from the line and skipping everything else. No tree of
//!   maps is built, which made reading back a 256-token record's line about half of what the
//!   report costs per request. It is strict: a field of an unexpected type, an array where an
//!   object belongs, an escaped string, a duplicate key or an unknown error type makes it give
//!   up (`None`). Keys it does not read are skipped unchecked (a lone surrogate escape or an
//!   out-of-range number there no longer rejects the line).
//! - **Lenient** ([`Fields::from_value`]): the line as a [`serde_json::Value`], each field
//!   taken when it has the expected type and left out otherwise, as the reader always did.
//!   Lines the typed path gives up on go this way, so odd files read exactly as before.
//!
//! Both end in [`Fields::to_record`], the one mapping from a line's fields to a record.

use kneepoint_core::{ErrorKind, ErrorRecord, Phase, RequestRecord, TokenSource};
use serde::de::IntoDeserializer;
use serde::Deserialize;
use serde_json::Value;

fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round().max(0.0) as u64
}

/// A JSON object only: serde's derived structs also accept an array, read field by field in
/// order, which the lenient reader never took for an object.
#[derive(Debug, Default)]
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Only<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Only<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Only(std::marker::PhantomData)).map(Obj)
    }
}

/// The `metadata` fields the reader uses.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Meta<'a> {
    level_origin_unix_ns: Option<u64>,
    request_start_ns: Option<u64>,
    request_end_ns: Option<u64>,
    request_ack_ns: Option<u64>,
    intended_start_ns: Option<u64>,
    session_num: Option<u64>,
    #[serde(borrow)]
    x_request_id: Option<&'a str>,
    #[serde(borrow)]
    worker_id: Option<&'a str>,
    #[serde(borrow)]
    benchmark_phase: Option<&'a str>,
    server_input_tokens: Option<u64>,
    #[serde(borrow)]
    output_tokens_source: Option<&'a str>,
    client_output_tokens: Option<u64>,
    requested_output_tokens: Option<u64>,
    #[serde(borrow)]
    finish_reason: Option<&'a str>,
    attempts: Option<u64>,
    rejected_usage_tokens: Option<u64>,
    #[serde(borrow)]
    conversation_id: Option<&'a str>,
    turn_index: Option<u64>,
    history_tokens: Option<u64>,
    client_reasoning_tokens: Option<u64>,
    #[serde(borrow)]
    model_name: Option<&'a str>,
    image_count: Option<u64>,
    audio_count: Option<u64>,
    audio_ms: Option<u64>,
    pooled_items: Option<u64>,
    #[serde(borrow)]
    endpoint_url: Option<&'a str>,
    usage_reasoning_tokens: Option<u64>,
    think_time_ms: Option<f64>,
}

impl<'a> Meta<'a> {
    fn from_value(md: &'a Value) -> Meta<'a> {
        let num = |k: &str| md.get(k).and_then(Value::as_u64);
        let text = |k: &str| md.get(k).and_then(Value::as_str);
        Meta {
            level_origin_unix_ns: num("level_origin_unix_ns"),
            request_start_ns: num("request_start_ns"),
            request_end_ns: num("request_end_ns"),
            request_ack_ns: num("request_ack_ns"),
            intended_start_ns: num("intended_start_ns"),
            session_num: num("session_num"),
            x_request_id: text("x_request_id"),
            worker_id: text("worker_id"),
            benchmark_phase: text("benchmark_phase"),
            server_input_tokens: num("server_input_tokens"),
            output_tokens_source: text("output_tokens_source"),
            client_output_tokens: num("client_output_tokens"),
            requested_output_tokens: num("requested_output_tokens"),
            finish_reason: text("finish_reason"),
            attempts: num("attempts"),
            rejected_usage_tokens: num("rejected_usage_tokens"),
            conversation_id: text("conversation_id"),
            turn_index: num("turn_index"),
            history_tokens: num("history_tokens"),
            client_reasoning_tokens: num("client_reasoning_tokens"),
            model_name: text("model_name"),
            image_count: num("image_count"),
            audio_count: num("audio_count"),
            audio_ms: num("audio_ms"),
            pooled_items: num("pooled_items"),
            endpoint_url: text("endpoint_url"),
            usage_reasoning_tokens: num("usage_reasoning_tokens"),
            think_time_ms: md.get("think_time_ms").and_then(Value::as_f64),
        }
    }
}

/// A per-request metric: `{"value": …, "unit": …}`.
#[derive(Debug, Default, Deserialize)]
struct Metric {
    value: Option<f64>,
}

/// The inter-chunk gaps: `{"value": [ms, …], …}`.
#[derive(Debug, Default, Deserialize)]
struct Gaps {
    value: Option<Vec<f64>>,
    /// The lenient path found a non-number among them (an error once they are needed).
    #[serde(skip)]
    non_number: bool,
}

/// The `metrics` the reader uses.
#[derive(Debug, Default, Deserialize)]
struct Metrics {
    time_to_first_token: Option<Obj<Metric>>,
    inter_chunk_latency: Option<Obj<Gaps>>,
    time_to_first_output_token: Option<Obj<Metric>>,
    input_sequence_length: Option<Obj<Metric>>,
    error_isl: Option<Obj<Metric>>,
    output_sequence_length: Option<Obj<Metric>>,
    http_req_connection_reused: Option<Obj<Metric>>,
    http_req_dns_lookup: Option<Obj<Metric>>,
    http_req_connecting: Option<Obj<Metric>>,
    http_req_tls_handshaking: Option<Obj<Metric>>,
    http_req_waiting: Option<Obj<Metric>>,
}

impl Metrics {
    fn from_value(m: Option<&Value>) -> Metrics {
        let metric = |k: &str| {
            Some(Obj(Metric {
                value: Some(m?.get(k)?.get("value")?.as_f64()?),
            }))
        };
        let gaps = m
            .and_then(|m| m.get("inter_chunk_latency"))
            .and_then(|g| g.get("value"))
            .and_then(Value::as_array)
            .map(|a| {
                let value: Vec<f64> = a.iter().filter_map(Value::as_f64).collect();
                Obj(Gaps {
                    non_number: value.len() != a.len(),
                    value: Some(value),
                })
            });
        Metrics {
            time_to_first_token: metric("time_to_first_token"),
            inter_chunk_latency: gaps,
            time_to_first_output_token: metric("time_to_first_output_token"),
            input_sequence_length: metric("input_sequence_length"),
            error_isl: metric("error_isl"),
            output_sequence_length: metric("output_sequence_length"),
            http_req_connection_reused: metric("http_req_connection_reused"),
            http_req_dns_lookup: metric("http_req_dns_lookup"),
            http_req_connecting: metric("http_req_connecting"),
            http_req_tls_handshaking: metric("http_req_tls_handshaking"),
            http_req_waiting: metric("http_req_waiting"),
        }
    }
}

/// A failed request's `error`.
#[derive(Debug, Deserialize)]
struct ErrorLine<'a> {
    #[serde(rename = "type")]
    kind: ErrorKind,
    code: Option<u64>,
    #[serde(borrow)]
    message: Option<&'a str>,
}

/// The typed shape of a line; `metadata` must be there.
#[derive(Debug, Deserialize)]
struct TypedLine<'a> {
    #[serde(borrow)]
    metadata: Obj<Meta<'a>>,
    #[serde(default)]
    metrics: Obj<Metrics>,
    #[serde(default, borrow)]
    error: Option<Obj<ErrorLine<'a>>>,
}

/// What the reader takes from one line.
#[derive(Debug)]
pub(crate) struct Fields<'a> {
    meta: Option<Meta<'a>>,
    metrics: Metrics,
    /// `None` for no error (absent or `null`); the reason when its type is not one of ours.
    error: Option<Result<ErrorLine<'a>, String>>,
}

/// The fast path: `None` when the line is not exactly the shape kneepoint writes.
pub(crate) fn parse_typed(line: &str) -> Option<Fields<'_>> {
    let Obj(t): Obj<TypedLine<'_>> = serde_json::from_str(line).ok()?;
    Some(Fields {
        meta: Some(t.metadata.0),
        metrics: t.metrics.0,
        error: t.error.map(|e| Ok(e.0)),
    })
}

impl<'a> Fields<'a> {
    /// Every field that has the expected type, from a parsed line.
    pub(crate) fn from_value(v: &'a Value) -> Fields<'a> {
        let error = match v.get("error") {
            None | Some(Value::Null) => None,
            Some(e) => Some(
                serde_json::from_value::<ErrorKind>(e.get("type").cloned().unwrap_or_default())
                    .map(|kind| ErrorLine {
                        kind,
                        code: e.get("code").and_then(Value::as_u64),
                        message: e.get("message").and_then(Value::as_str),
                    })
                    .map_err(|e| format!("error type: {e}")),
            ),
        };
        Fields {
            meta: v.get("metadata").map(Meta::from_value),
            metrics: Metrics::from_value(v.get("metrics")),
            error,
        }
    }

    /// The record the line describes; the reason when it cannot.
    pub(crate) fn to_record(&self) -> Result<RequestRecord, String> {
        let md = self.meta.as_ref().ok_or("no metadata")?;
        let m = &self.metrics;
        let metric = |x: &Option<Obj<Metric>>| x.as_ref().and_then(|x| x.0.value);
        let small = |n: Option<u64>| n.and_then(|n| u32::try_from(n).ok());
        // Times come back relative to the run's origin when the line names it (several runs
        // of a level pooled in one file stay apart), else as absolute Unix nanoseconds.
        let origin = md.level_origin_unix_ns.unwrap_or(0);
        let rel = |t: u64| t.saturating_sub(origin);
        let start = rel(md.request_start_ns.ok_or("no request_start_ns")?);
        let end = rel(md.request_end_ns.ok_or("no request_end_ns")?);
        let error = match &self.error {
            None => None,
            Some(Err(reason)) => return Err(reason.clone()),
            Some(Ok(e)) => Some(ErrorRecord {
                kind: e.kind,
                code: e.code.and_then(|c| u16::try_from(c).ok()),
                message: e.message.unwrap_or_default().to_owned(),
            }),
        };
        let mut chunk_ns = Vec::new();
        if let Some(ttft) = metric(&m.time_to_first_token) {
            let gaps = m.inter_chunk_latency.as_ref().map(|g| &g.0);
            if gaps.is_some_and(|g| g.non_number) {
                return Err("inter_chunk_latency holds a non-number".into());
            }
            let gaps = gaps.and_then(|g| g.value.as_deref()).unwrap_or_default();
            chunk_ns.reserve(gaps.len() + 1);
            let mut t = start + ms_to_ns(ttft);
            chunk_ns.push(t);
            for &g in gaps {
                t += ms_to_ns(g);
                chunk_ns.push(t);
            }
        }
        let request_id = md.session_num.unwrap_or(0);
        let mut r = RequestRecord::new(
            request_id,
            match md.benchmark_phase {
                Some("warmup") => Phase::Warmup,
                _ => Phase::Profiling,
            },
        );
        r.x_request_id = md
            .x_request_id
            .filter(|s| *s != request_id.to_string())
            .map(str::to_owned);
        r.worker = md
            .worker_id
            .and_then(|w| w.strip_prefix("worker_"))
            .and_then(|w| w.parse().ok())
            .unwrap_or(0);
        r.origin_unix_ns = origin;
        r.start_ns = start;
        r.response_ns = md.request_ack_ns.map(rel);
        r.chunk_ns = chunk_ns;
        r.first_content_ns = metric(&m.time_to_first_output_token).map(|t| start + ms_to_ns(t));
        r.end_ns = end;
        r.input_tokens = metric(&m.input_sequence_length)
            .or_else(|| metric(&m.error_isl))
            .map(|x| x.round() as u32);
        r.server_input_tokens = small(md.server_input_tokens);
        r.output_tokens = metric(&m.output_sequence_length).map(|x| x.round() as u32);
        r.output_tokens_source = md.output_tokens_source.and_then(|s| {
            let d: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
                s.into_deserializer();
            TokenSource::deserialize(d).ok()
        });
        r.client_output_tokens = small(md.client_output_tokens);
        r.output_bytes = 0;
        r.requested_output_tokens = small(md.requested_output_tokens);
        r.finish_reason = md.finish_reason.map(str::to_owned);
        r.error = error;
        r.attempts = small(md.attempts).unwrap_or(1);
        r.rejected_usage_tokens = small(md.rejected_usage_tokens);
        r.intended_start_ns = md.intended_start_ns.map(rel);
        r.conversation_id = md.conversation_id.map(str::to_owned);
        r.turn_index = r
            .conversation_id
            .as_ref()
            .and_then(|_| small(md.turn_index));
        r.history_tokens = small(md.history_tokens);
        r.reasoning_tokens = small(md.client_reasoning_tokens);
        r.model = md.model_name.map(str::to_owned);
        r.image_count = small(md.image_count);
        r.audio_count = small(md.audio_count);
        r.audio_ms = md.audio_ms;
        r.connection = metric(&m.http_req_connection_reused).map(|reused| {
            let phase = |x: &Option<Obj<Metric>>| metric(x).map_or(0, ms_to_ns);
            let setup = if reused >= 0.5 {
                kneepoint_core::ConnectionTimings::reused()
            } else {
                kneepoint_core::ConnectionTimings::opened(
                    phase(&m.http_req_dns_lookup),
                    phase(&m.http_req_connecting),
                    phase(&m.http_req_tls_handshaking),
                )
            };
            setup.with_waiting(phase(&m.http_req_waiting))
        });
        r.pooled_items = small(md.pooled_items);
        r.url = md.endpoint_url.map(str::to_owned);
        r.usage_reasoning_tokens = small(md.usage_reasoning_tokens);
        r.think_time_ns = md
            .think_time_ms
            .filter(|ms| ms.is_finite() && *ms >= 0.0)
            .map(ms_to_ns);
        Ok(r)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    /// Both paths, on one line: the typed one must agree with the lenient one whenever it
    /// does not give up.
    fn both(
        line: &str,
    ) -> (
        Option<Result<RequestRecord, String>>,
        Result<RequestRecord, String>,
    ) {
        let lenient = serde_json::from_str::<Value>(line)
            .map_err(|e| e.to_string())
            .and_then(|v| Fields::from_value(&v).to_record());
        (parse_typed(line).map(|f| f.to_record()), lenient)
    }

    #[test]
    fn the_typed_path_reads_every_golden_line_as_the_lenient_one() {
        let golden = include_str!("testdata/record_lines.jsonl");
        let mut typed = 0;
        for line in golden.lines().filter(|l| !l.trim().is_empty()) {
            let (t, l) = both(line);
            if let Some(t) = t {
                typed += 1;
                assert_eq!(t, l, "{line}");
            }
            assert!(l.is_ok(), "{line}");
        }
        // Lines with escaped strings (an error message with quotes) may go the lenient way;
        // the rest must not.
        assert!(typed * 10 >= golden.lines().count() * 7, "{typed} typed");
    }

    #[test]
    fn odd_lines_give_the_lenient_verdict() {
        let base = r#"{"metadata":{"session_num":3,"request_start_ns":10,"request_end_ns":90,"worker_id":"worker_2","x_request_id":"ab\"c"},"metrics":{"time_to_first_token":{"value":0.00002,"unit":"ms"},"inter_chunk_latency":{"value":[0.00001,0.00002]}},"error":null}"#;
        let clean = base.replace(r#"ab\"c"#, "abc");
        let odd = [
            base.to_owned(),
            // a duplicate key: the last one counts
            base.replace(r#""session_num":3,"#, r#""session_num":3,"session_num":4,"#),
            // a u64 field holding a float, a string field holding a number
            base.replace(r#""session_num":3"#, r#""session_num":3.0"#),
            base.replace(r#""worker_id":"worker_2""#, r#""worker_id":2"#),
            // metadata that is not an object; metrics that are not
            base.replace(r#""metadata":{"#, r#""metadata":[],"x":{"#),
            base.replace(r#""metrics":{"#, r#""metrics":7,"y":{"#),
            // a gap that is not a number; gaps that are not a list
            base.replace("0.00002]", r#""x"]"#),
            base.replace("[0.00001,0.00002]", "5"),
            // an unknown error type; an error that is not an object; a known one
            base.replace(
                r#""error":null"#,
                r#""error":{"type":"martian","message":"m"}"#,
            ),
            base.replace(r#""error":null"#, r#""error":"boom""#),
            base.replace(
                r#""error":null"#,
                r#""error":{"type":"timeout","code":70000,"message":"t"}"#,
            ),
            // arrays where objects belong (no escape in these, so the typed path reads
            // them): the lenient reader never took them for objects
            clean.replace(r#""metadata":{"#, r#""metadata":[10,90],"z":{"#),
            clean.replace(r#"{"value":0.00002,"unit":"ms"}"#, "[0.5]"),
            clean.replace(r#""error":null"#, r#""error":["timeout",null,"m"]"#),
            format!("[{clean}]"),
            // no metadata; an unknown token source
            r#"{"metrics":{}}"#.to_owned(),
            base.replace(
                r#""session_num":3"#,
                r#""session_num":3,"output_tokens_source":"guess""#,
            ),
        ];
        for line in &odd {
            let (t, l) = both(line);
            if let Some(t) = t {
                assert_eq!(t, l, "{line}");
            }
        }
        // The escaped request id and the duplicate key went the lenient way and still read.
        assert_eq!(
            both(&odd[0]).1.unwrap().x_request_id.as_deref(),
            Some("ab\"c")
        );
        assert_eq!(both(&odd[1]).1.unwrap().request_id, 4);
        assert!(both(&odd[6]).1.unwrap_err().contains("non-number"));
        assert!(both(&odd[8]).1.unwrap_err().contains("error type"));
        // The arrays: refused, or read without the metric or the error, by both paths.
        assert!(both(&odd[11]).1.is_err() && both(&odd[14]).1.is_err());
        assert!(both(&odd[12]).1.unwrap().chunk_ns.is_empty());
        assert!(both(&odd[13]).1.is_err());
        // Without the escape the typed path reads it, and a code past u16 is dropped.
        let plain = odd[10].replace(r#"ab\"c"#, "abc");
        let (typed, lenient) = both(&plain);
        let typed = typed.expect("the typed path").unwrap();
        assert_eq!(typed, lenient.unwrap());
        assert_eq!(typed.error.unwrap().code, None);
        assert_eq!(typed.chunk_ns, [30, 40, 60]);
    }
}
