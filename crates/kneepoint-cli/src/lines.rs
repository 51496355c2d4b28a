//! The pieces of printed lines shared by the final tables and the live per-probe lines.

use std::fmt::Write as _;

use kneepoint_planner::{ProbeRecord, SlaCheck};

/// Milliseconds as printed: seconds past 10 s, `-` when not measured.
pub(crate) fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 10_000.0 => format!("{:.1}s", v / 1000.0),
        Some(v) => format!("{v:.1}"),
        None => "-".into(),
    }
}

fn value(c: &SlaCheck) -> String {
    let v = match c.value {
        // the goodput objective's miss rate, said as the attainment it is judged for
        Some(v) if c.metric == kneepoint_planner::Metric::SloMissRate => {
            return format!("{:.2} % met every SLO", (1.0 - v) * 100.0);
        }
        Some(v) if c.metric.unit() == "ratio" => format!("{:.2} %", v * 100.0),
        Some(v) if c.metric.unit() == "ms" => ms(Some(v)),
        Some(v) => format!("{v:.2} {}", c.metric.unit()),
        None => "not measured".into(),
    };
    format!("{} {} {}", c.metric, c.stat, v)
}

/// One line per probe: what was measured and the verdict.
pub(crate) fn probe_line(r: &ProbeRecord) -> String {
    let verdict = if r.pass { "pass" } else { "FAIL" };
    let mut s = format!(
        "probe {:>2} ({}): concurrency {:>5} -> {verdict}  {:>9.1} tok/s",
        r.probe.iteration,
        serde_json::to_value(r.probe.phase)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        r.probe.concurrency,
        r.throughput
    );
    for c in &r.checks {
        let margin = c
            .margin
            .map(|m| format!("{:+.1} %", m * 100.0))
            .unwrap_or_default();
        let _ = write!(s, " | {}: {} ({margin})", c.sla, value(c));
    }
    s
}
