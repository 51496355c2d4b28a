//! A level's time slices in AIPerf's shapes: `profile_export_aiperf_timeslices.json`
//! (`{"timeslices": [{start_ns, end_ns, is_complete, <metric>: {unit, avg, p50, ...}}],
//! "input_config", "steadiness"}`) and the long CSV `Timeslice,Metric,Unit,Stat,Value`.

use std::fmt::Write as _;
use std::path::Path;

use kneepoint_core::folder;
use serde_json::{json, Map, Value};

use super::{aiperf_json, write_atomic, LevelInfo};
use crate::stats::PERCENTILES;
use crate::timeslice::TimeSlices;
use crate::Error;

/// The keys of a level's aggregate JSON that are not metrics.
const NOT_METRICS: [&str; 8] = [
    "input_config",
    "error_summary",
    "start_time",
    "end_time",
    "was_cancelled",
    "kneepoint",
    "client_health",
    "server_metrics",
];

/// The slices as AIPerf's timeslice JSON, with kneepoint's steadiness verdict beside them.
pub fn timeslices_json(t: &TimeSlices, input_config: &Value) -> Value {
    let slices: Vec<Value> = t
        .slices
        .iter()
        .map(|s| {
            let info = LevelInfo {
                start_unix_ns: s.start_ns,
                end_unix_ns: s.end_ns,
                input_config: Value::Null,
                partial: false,
            };
            let mut m = match aiperf_json(&s.summary, &info) {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            for k in NOT_METRICS {
                m.remove(k);
            }
            m.insert("timeslice_index".into(), json!(s.index));
            m.insert("start_ns".into(), json!(s.start_ns));
            m.insert("end_ns".into(), json!(s.end_ns));
            if !s.is_complete {
                m.insert("is_complete".into(), json!(false));
            }
            Value::Object(m)
        })
        .collect();
    json!({
        "timeslices": slices,
        "slice_duration_s": t.slice_s,
        "steadiness": t.steadiness,
        "input_config": input_config,
    })
}

/// The slices as AIPerf's long CSV: one row per slice, metric and statistic.
pub fn timeslices_csv(t: &TimeSlices) -> String {
    let mut out = String::from("Timeslice,Metric,Unit,Stat,Value\n");
    for s in &t.slices {
        for (metric, m) in &s.summary.metrics {
            let (title, unit) = (metric.label(), metric.client_unit());
            let st = &m.stats;
            let mut row = |stat: &str, v: f64| {
                if v.is_finite() {
                    let _ = writeln!(out, "{},{title},{unit},{stat},{v:.2}", s.index);
                }
            };
            row("avg", st.avg);
            row("min", st.min);
            row("max", st.max);
            for (label, _) in PERCENTILES {
                row(label, st.get(label).unwrap_or(f64::NAN));
            }
            row("std", st.std);
        }
        let _ = writeln!(
            out,
            "{},Request Throughput,requests/sec,avg,{:.2}",
            s.index, s.summary.request_throughput
        );
        let _ = writeln!(
            out,
            "{},Output Token Throughput,tokens/sec,avg,{:.2}",
            s.index, s.summary.output_token_throughput
        );
    }
    out
}

/// Writes both files into the level's folder `dir`.
pub fn write_timeslices(dir: &Path, t: &TimeSlices, input_config: &Value) -> Result<(), Error> {
    let bytes = serde_json::to_vec_pretty(&timeslices_json(t, input_config)).map_err(|source| {
        Error::Json {
            what: "time slices",
            source,
        }
    })?;
    write_atomic(&dir.join(folder::TIMESLICES_JSON), &bytes)?;
    write_atomic(
        &dir.join(folder::TIMESLICES_CSV),
        timeslices_csv(t).as_bytes(),
    )
}
