//! `profile_export_aiperf.json` and `profile_export_aiperf.csv`.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::export::{rfc3339, write_atomic};
use crate::stats::PERCENTILES;
use crate::summary::LevelSummary;
use crate::Error;

/// The context of a level that the aggregate files carry besides the numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelInfo {
    /// Wall-clock start, Unix ns.
    pub start_unix_ns: u64,
    /// Wall-clock end, Unix ns.
    pub end_unix_ns: u64,
    /// The settings used (no secrets).
    pub input_config: Value,
    /// True when the level was interrupted before all its requests finished.
    pub partial: bool,
}

fn scalar(unit: &str, v: f64) -> Value {
    json!({"unit": unit, "avg": v})
}

/// The aggregate JSON: one block per metric (`unit`, `avg`, `min`, `max`, `p1`…`p99`, `std`,
/// `count`), scalar blocks for throughputs and counts, then `input_config`, `error_summary`,
/// times, and a `kneepoint` block with the level's extras.
pub fn aiperf_json(s: &LevelSummary, info: &LevelInfo) -> Value {
    let mut root = Map::new();
    for (metric, m) in &s.metrics {
        let name = metric.name();
        {
            let st = &m.stats;
            let mut block = Map::new();
            block.insert("unit".into(), json!(m.unit));
            block.insert("avg".into(), json!(st.avg));
            block.insert("min".into(), json!(st.min));
            block.insert("max".into(), json!(st.max));
            for (label, _) in PERCENTILES {
                block.insert(label.into(), json!(st.get(label)));
            }
            block.insert("std".into(), json!(st.std));
            block.insert("count".into(), json!(st.count));
            root.insert(name.into(), Value::Object(block));
        }
    }
    root.insert(
        "request_throughput".into(),
        scalar("requests/sec", s.request_throughput),
    );
    root.insert(
        "output_token_throughput".into(),
        scalar("tokens/sec", s.output_token_throughput),
    );
    root.insert(
        "input_token_throughput".into(),
        scalar("tokens/sec", s.input_token_throughput),
    );
    if let Some(t) = s.pooled_item_throughput {
        root.insert("input_throughput".into(), scalar("inputs/sec", t));
    }
    if let Some(g) = s.goodput {
        root.insert("goodput".into(), scalar("requests/sec", g));
    }
    if let Some(m) = s.slo_miss_rate {
        root.insert("slo_miss_rate".into(), scalar("ratio", m));
    }
    root.insert(
        "benchmark_duration".into(),
        scalar("sec", s.benchmark_duration_s),
    );
    root.insert(
        "request_count".into(),
        scalar("requests", s.ok_count as f64),
    );
    root.insert(
        "error_request_count".into(),
        scalar("requests", s.error_count as f64),
    );
    root.insert(
        "total_output_tokens".into(),
        scalar("tokens", s.total_output_tokens as f64),
    );
    root.insert(
        "total_isl".into(),
        scalar("tokens", s.total_input_tokens as f64),
    );
    root.insert("input_config".into(), info.input_config.clone());
    root.insert(
        "error_summary".into(),
        Value::Array(
            s.error_summary
                .iter()
                .map(|g| {
                    json!({"error_details": {"code": g.code, "type": g.kind, "message": g.message},
                           "count": g.count})
                })
                .collect(),
        ),
    );
    root.insert("start_time".into(), json!(rfc3339(info.start_unix_ns)));
    root.insert("end_time".into(), json!(rfc3339(info.end_unix_ns)));
    root.insert("was_cancelled".into(), json!(info.partial));
    root.insert(
        "kneepoint".into(),
        json!({
            "concurrency": s.concurrency,
            "requests_recorded": s.request_count,
            "ok_count": s.ok_count,
            "error_count": s.error_count,
            "error_rate": s.error_rate,
            "errors_by_kind": s.errors_by_kind,
            "osl_sources": s.osl_sources,
            "osl_mismatches": s.osl_mismatches,
            "osl_source_disagreements": s.osl_source_disagreements,
            "warnings": s.warnings,
            "partial": info.partial,
            "start_unix_ns": info.start_unix_ns,
            "end_unix_ns": info.end_unix_ns,
        }),
    );
    if let (Some(slo), Some(kp)) = (&s.goodput_slo, root.get_mut("kneepoint")) {
        kp["goodput_slo"] = json!(slo);
    }
    if let Some(client) = &s.client {
        root.insert("client_health".into(), json!(client));
    }
    if let Some(steady) = &s.steadiness {
        root.insert("steadiness".into(), json!(steady));
    }
    if let Some(server) = &s.server {
        root.insert("server_metrics".into(), json!(server));
    }
    Value::Object(root)
}

/// The level's steadiness saved in a `profile_export_aiperf.json` (`--slice-s`).
pub fn steadiness_from_aiperf_json(v: &Value) -> Option<crate::Steadiness> {
    serde_json::from_value(v.get("steadiness")?.clone()).ok()
}

/// The client's health saved in a `profile_export_aiperf.json`.
pub fn client_health_from_aiperf_json(v: &Value) -> Option<kneepoint_core::ClientHealth> {
    serde_json::from_value(v.get("client_health")?.clone()).ok()
}

/// The goodput SLOs a saved level was judged against (`kneepoint.goodput_slo`), if any.
pub fn goodput_slo_from_aiperf_json(v: &Value) -> Option<crate::GoodputSlo> {
    serde_json::from_value(v.pointer("/kneepoint/goodput_slo")?.clone()).ok()
}

/// The server summary saved in a `profile_export_aiperf.json` (when the level was scraped).
pub fn server_summary_from_aiperf_json(v: &Value) -> Option<kneepoint_core::ServerSummary> {
    serde_json::from_value(v.get("server_metrics")?.clone()).ok()
}

impl LevelInfo {
    /// Recovers the level's times, settings and partial flag from a saved
    /// `profile_export_aiperf.json` (written by [`aiperf_json`]).
    pub fn from_aiperf_json(v: &Value) -> Option<LevelInfo> {
        let k = v.get("kneepoint")?;
        Some(LevelInfo {
            start_unix_ns: k.get("start_unix_ns")?.as_u64()?,
            end_unix_ns: k.get("end_unix_ns")?.as_u64()?,
            input_config: v.get("input_config").cloned().unwrap_or(Value::Null),
            partial: k.get("partial").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}

/// The aggregate CSV: a table of distributions, a blank line, then `Metric,Value` scalars.
pub fn aiperf_csv(s: &LevelSummary) -> String {
    let mut out = String::from("Metric,avg,min,max,p1,p5,p10,p25,p50,p75,p90,p95,p99,std,count\n");
    for (metric, m) in &s.metrics {
        let (title, unit) = (metric.label(), metric.client_unit());
        {
            let st = &m.stats;
            let _ = write!(
                out,
                "{title} ({unit}),{},{},{}",
                f(st.avg),
                f(st.min),
                f(st.max)
            );
            for (label, _) in PERCENTILES {
                let _ = write!(out, ",{}", f(st.get(label).unwrap_or(f64::NAN)));
            }
            let _ = writeln!(out, ",{},{}", f(st.std), st.count);
        }
    }
    out.push_str("\nMetric,Value\n");
    let mut row = |k: &str, v: f64| {
        let _ = writeln!(out, "{k},{}", f(v));
    };
    row("Request Throughput (requests/sec)", s.request_throughput);
    row(
        "Output Token Throughput (tokens/sec)",
        s.output_token_throughput,
    );
    if let Some(g) = s.goodput {
        row("Goodput (requests/sec)", g);
    }
    if let Some(m) = s.slo_miss_rate {
        row("SLO Miss Rate", m);
    }
    row("Benchmark Duration (sec)", s.benchmark_duration_s);
    row("Request Count (requests)", s.ok_count as f64);
    row("Error Request Count (requests)", s.error_count as f64);
    row("Error Rate", s.error_rate);
    row("Concurrency", f64::from(s.concurrency));
    out
}

fn f(v: f64) -> String {
    if v.is_finite() {
        let s = format!("{v:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s.is_empty() || s == "-" {
            "0".into()
        } else {
            s.to_owned()
        }
    } else {
        String::new()
    }
}

/// Writes `profile_export_aiperf.json`.
pub fn write_aiperf_json(path: &Path, s: &LevelSummary, info: &LevelInfo) -> Result<(), Error> {
    let bytes = serde_json::to_vec_pretty(&aiperf_json(s, info)).map_err(|source| Error::Json {
        what: "aggregates",
        source,
    })?;
    write_atomic(path, &bytes)
}

/// Writes `profile_export_aiperf.csv`.
pub fn write_aiperf_csv(path: &Path, s: &LevelSummary) -> Result<(), Error> {
    write_atomic(path, aiperf_csv(s).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formatting() {
        assert_eq!(f(1.5), "1.5");
        assert_eq!(f(2.0), "2");
        assert_eq!(f(0.0), "0");
        assert_eq!(f(0.00001), "0");
        assert_eq!(f(f64::NAN), "");
    }

    #[test]
    fn level_info_comes_back_from_the_json() {
        let info = LevelInfo {
            start_unix_ns: 1_795_939_932_500_000_123,
            end_unix_ns: 1_795_939_999_000_000_456,
            input_config: serde_json::json!({"a": 1}),
            partial: true,
        };
        let s = LevelSummary::from_records(1, &[], &crate::GoodputSlo::default());
        let back = LevelInfo::from_aiperf_json(&aiperf_json(&s, &info)).unwrap();
        assert_eq!(back.start_unix_ns, info.start_unix_ns);
        assert_eq!(back.end_unix_ns, info.end_unix_ns);
        assert_eq!(back.input_config, info.input_config);
        assert!(back.partial);
    }
}
