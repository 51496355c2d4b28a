//! `profile_export.jsonl`: one line per request, appended and flushed as each finishes; or,
//! on request, `profile_export.jsonl.zst`, the same lines through a zstd stream (the `zstd`
//! crate, level 3), flushed every [`ZSTD_FLUSH_EVERY`] records and finished when the sink is
//! dropped. A run killed mid-way keeps every record up to the last flush.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use kneepoint_core::{Phase, RecordSink, RequestRecord};
use serde_json::{json, Map, Value};

use crate::request_metrics::RequestMetrics;
use crate::Error;

/// One record as an AIPerf-style JSON line (`metadata`, `metrics`, `error`), with kneepoint's
/// extra fields in `metadata`.
pub fn record_json(r: &RequestRecord) -> Value {
    let abs = |t: u64| r.origin_unix_ns + t;
    let m = RequestMetrics::of(r);
    let mut metrics = Map::new();
    let mut put = |name: &str, v: Option<f64>, unit: &str| {
        if let Some(v) = v {
            metrics.insert(name.into(), json!({"value": v, "unit": unit}));
        }
    };
    if r.is_ok() {
        put("time_to_first_token", m.ttft_ms, "ms");
        put("time_to_first_output_token", m.ttfo_ms, "ms");
        put("time_to_second_token", m.ttst_ms, "ms");
        put("request_latency", m.request_latency_ms, "ms");
        put("stream_end_latency", Some(m.stream_end_latency_ms), "ms");
        put("inter_token_latency", m.itl_ms, "ms");
        put(
            "output_token_throughput_per_user",
            m.tokens_per_s_per_user,
            "tokens/sec/user",
        );
        put("output_sequence_length", m.osl.map(f64::from), "tokens");
        put(
            "reasoning_token_count",
            m.reasoning_tokens.map(f64::from),
            "tokens",
        );
        put(
            "output_token_count",
            m.answer_tokens.map(f64::from),
            "tokens",
        );
        put("input_sequence_length", m.isl.map(f64::from), "tokens");
        if !m.inter_chunk_ms.is_empty() {
            metrics.insert(
                "inter_chunk_latency".into(),
                json!({"value": m.inter_chunk_ms, "unit": "ms"}),
            );
        }
    } else {
        put("error_isl", m.isl.map(f64::from), "tokens");
    }
    let cancelled = r
        .error
        .as_ref()
        .is_some_and(|e| e.kind == kneepoint_core::ErrorKind::Cancelled);
    json!({
        "metadata": {
            "session_num": r.request_id,
            "x_request_id": r.x_request_id.clone().unwrap_or_else(|| r.request_id.to_string()),
            "conversation_id": r.conversation_id,
            "image_count": r.image_count,
            "pooled_items": r.pooled_items,
            "model_name": r.model,
            "endpoint_url": r.url,
            "turn_index": r.turn_index.unwrap_or(0),
            "history_tokens": r.history_tokens,
            "think_time_ms": r.think_time_ns.map(|n| n as f64 / 1e6),
            "request_start_ns": abs(r.start_ns),
            "request_ack_ns": r.response_ns.map(abs),
            "request_end_ns": abs(r.end_ns),
            "worker_id": format!("worker_{}", r.worker),
            "benchmark_phase": match r.phase { Phase::Warmup => "warmup", Phase::Profiling => "profiling" },
            "was_cancelled": cancelled,
            "cancellation_time_ns": if cancelled { Some(abs(r.end_ns)) } else { None },
            "output_tokens_source": r.output_tokens_source,
            "client_output_tokens": r.client_output_tokens,
            "server_input_tokens": r.server_input_tokens,
            "requested_output_tokens": r.requested_output_tokens,
            "finish_reason": r.finish_reason,
            "chunk_count": r.chunk_ns.len(),
            "attempts": r.attempts,
            "level_origin_unix_ns": r.origin_unix_ns,
            "intended_start_ns": r.intended_start_ns.map(abs),
            "rejected_usage_tokens": r.rejected_usage_tokens,
            "client_reasoning_tokens": r.reasoning_tokens,
            "usage_reasoning_tokens": r.usage_reasoning_tokens,
        },
        "metrics": if r.is_ok() || !metrics.is_empty() { Value::Object(metrics) } else { Value::Null },
        "error": r.error.as_ref().map(|e| json!({
            "code": e.code,
            "type": e.kind,
            "message": e.message,
        })),
    })
}

/// The records file of a level.
pub const RECORDS_FILE: &str = "profile_export.jsonl";
/// The compressed records file of a level.
pub const RECORDS_FILE_ZSTD: &str = "profile_export.jsonl.zst";
/// Records between two flushes of a compressed records file.
pub const ZSTD_FLUSH_EVERY: u32 = 256;

/// The records file's name: [`RECORDS_FILE_ZSTD`] when compressed, else [`RECORDS_FILE`].
pub fn records_file_name(zstd: bool) -> &'static str {
    if zstd {
        RECORDS_FILE_ZSTD
    } else {
        RECORDS_FILE
    }
}

/// The records file in a level's folder: the compressed one when it is there.
pub fn records_path(dir: &Path) -> PathBuf {
    let z = dir.join(RECORDS_FILE_ZSTD);
    if z.is_file() {
        z
    } else {
        dir.join(RECORDS_FILE)
    }
}

enum Out {
    Plain(BufWriter<File>),
    Zstd {
        enc: zstd::stream::write::AutoFinishEncoder<'static, BufWriter<File>>,
        since_flush: u32,
    },
}

/// Appends one JSON line per record to a file and flushes it, so an interrupted run keeps every
/// finished request.
pub struct JsonlSink {
    path: PathBuf,
    out: Out,
}

impl std::fmt::Debug for JsonlSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlSink")
            .field("path", &self.path)
            .field("zstd", &matches!(self.out, Out::Zstd { .. }))
            .finish()
    }
}

impl JsonlSink {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> Result<Self, Error> {
        let file = File::create(path).map_err(Error::io(path))?;
        Ok(JsonlSink {
            path: path.to_owned(),
            out: Out::Plain(BufWriter::new(file)),
        })
    }

    /// Creates the records file of the level folder `dir`: `profile_export.jsonl`, or
    /// `profile_export.jsonl.zst` when `zstd`.
    pub fn in_dir(dir: &Path, zstd: bool) -> Result<Self, Error> {
        let path = dir.join(records_file_name(zstd));
        if !zstd {
            return Self::create(&path);
        }
        let file = File::create(&path).map_err(Error::io(&path))?;
        let enc = zstd::stream::write::Encoder::new(BufWriter::new(file), 3)
            .map_err(Error::io(&path))?
            .auto_finish();
        Ok(JsonlSink {
            path,
            out: Out::Zstd {
                enc,
                since_flush: 0,
            },
        })
    }

    /// Where the records go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sink_error(&self, e: std::io::Error) -> kneepoint_core::Error {
        kneepoint_core::Error::Sink {
            sink: self.path.display().to_string(),
            source: Box::new(e),
        }
    }
}

impl RecordSink for JsonlSink {
    fn record(&mut self, record: &RequestRecord) -> Result<(), kneepoint_core::Error> {
        let mut line = record_json(record).to_string();
        line.push('\n');
        let written = match &mut self.out {
            Out::Plain(w) => w.write_all(line.as_bytes()).and_then(|_| w.flush()),
            Out::Zstd { enc, since_flush } => {
                *since_flush += 1;
                enc.write_all(line.as_bytes()).and_then(|_| {
                    if *since_flush >= ZSTD_FLUSH_EVERY {
                        *since_flush = 0;
                        enc.flush()
                    } else {
                        Ok(())
                    }
                })
            }
        };
        written.map_err(|e| self.sink_error(e))
    }

    fn flush(&mut self) -> Result<(), kneepoint_core::Error> {
        let flushed = match &mut self.out {
            Out::Plain(w) => w.flush(),
            Out::Zstd { enc, .. } => enc.flush(),
        };
        flushed.map_err(|e| self.sink_error(e))
    }
}
