//! The pieces of printed lines shared by the final tables and the live per-probe lines.

use std::fmt::Write as _;

use kneepoint_planner::{ProbeRecord, SlaCheck};

/// Milliseconds as printed, in milliseconds whatever their size (a column of them never
/// switches unit): a tenth below 10 s, whole above; `-` when not measured.
pub(crate) fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 10_000.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "-".into(),
    }
}

/// A checked value in its unit (`1.1 ms`, `0.00 %`).
fn in_unit(c: &SlaCheck, v: Option<f64>) -> String {
    match v {
        Some(v) if c.metric.unit() == "ratio" => format!("{:.2} %", v * 100.0),
        Some(v) if c.metric.unit() == "ms" => format!("{} ms", ms(Some(v))),
        Some(v) => format!("{v:.2} {}", c.metric.unit()),
        None => "not measured".into(),
    }
}

/// A check as a person reads it: `time_to_first_token p95 1.1 ms (limit 50.0 ms, 97.8 %
/// headroom)`; the goodput objective's miss rate as the attainment it is judged for.
pub(crate) fn check_text(c: &SlaCheck) -> String {
    if let (Some(v), kneepoint_planner::Metric::SloMissRate) = (c.value, c.metric) {
        return format!("{:.2} % met every SLO", (1.0 - v) * 100.0);
    }
    let headroom = match c.margin {
        Some(m) if m >= 0.0 => format!(", {:.1} % headroom", m * 100.0),
        Some(m) => format!(", {:.1} % over", -m * 100.0),
        None => String::new(),
    };
    format!(
        "{} {} {} (limit {}{headroom})",
        c.metric,
        c.stat,
        in_unit(c, c.value),
        in_unit(c, Some(c.threshold))
    )
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
        let _ = write!(s, " | {}: {}", c.sla, check_text(c));
    }
    s
}
