//! A recommendation's page parts: the ranked candidates' table and the stage-1 fit table.

use std::fmt::Write as _;

use serde_json::Value;

use crate::artifact::Artifact;
use crate::html_text::{esc, num};

/// Stage 1 beside the measurement: each candidate's fit, bound and first-order prediction,
/// and the prediction's error at the measured operating point.
fn stage_one_table(list: &[Value], out: &mut String) {
    if !list
        .iter()
        .any(|c| c.get("prediction").is_some_and(|p| !p.is_null()))
    {
        return;
    }
    out.push_str("<h2>Stage 1: fit and first-order prediction</h2><table><thead><tr><th>candidate</th><th>tensor parallel</th><th>replicas</th><th>concurrency bound</th><th>predicted knee</th><th>predicted peak tok/s</th><th>measured tok/s</th><th>predicted there</th><th>error</th></tr></thead><tbody>");
    for c in list {
        let Some(p) = c.get("prediction").filter(|p| !p.is_null()) else {
            continue;
        };
        let measured = c
            .pointer("/point/output_token_throughput")
            .and_then(Value::as_f64);
        let at = c.pointer("/point/concurrency").and_then(Value::as_u64);
        let predicted = at.and_then(|at| {
            p.get("points")?
                .as_array()?
                .iter()
                .find(|x| x.get("concurrency").and_then(Value::as_u64) == Some(at))?
                .get("output_tokens_per_s")?
                .as_f64()
        });
        let error = match (predicted, measured) {
            (Some(p), Some(m)) if m > 0.0 => format!("{:+.0} %", (p / m - 1.0) * 100.0),
            _ => "—".into(),
        };
        let u = |k: &str| {
            p.get(k)
                .and_then(Value::as_u64)
                .map_or("—".into(), |v| v.to_string())
        };
        let _ = write!(
            out,
            "<tr><td style=\"text-align:left\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{error}</td></tr>",
            esc(c.get("name").and_then(Value::as_str).unwrap_or("")),
            u("tensor_parallel"),
            u("replicas"),
            c.get("max_concurrency")
                .and_then(Value::as_u64)
                .map_or("—".into(), |v| v.to_string()),
            u("knee"),
            num(p.get("peak_output_tokens_per_s").and_then(Value::as_f64), 0),
            num(measured, 0),
            num(predicted, 0),
        );
    }
    out.push_str("</tbody></table><p>The prediction is a roofline estimate from the model's config and the instance's datasheet (docs/recommend.md), not a measurement.</p>");
}

/// `4 × TP 1` (engines per instance × tensor parallelism), or `—` when not known.
fn engines(c: &Value) -> String {
    let u = |k: &str| c.get(k).and_then(Value::as_u64);
    match (u("replicas_per_instance"), u("tensor_parallel")) {
        (Some(r), Some(t)) => format!("{r} × TP {t}"),
        (Some(r), None) => format!("{r}"),
        (None, Some(t)) => format!("TP {t}"),
        (None, None) => "—".into(),
    }
}

pub(crate) fn recommendations_table(a: &Artifact, out: &mut String) {
    let Some(list) = a.doc.get("candidates").and_then(Value::as_array) else {
        return;
    };
    let currency = esc(a.doc.get("currency").and_then(Value::as_str).unwrap_or(""));
    let longest = list
        .iter()
        .filter_map(|c| c.pointer("/point/e2e_p99_ms").and_then(Value::as_f64))
        .fold(0.0, f64::max);
    let (div, unit, digits) = if longest >= 2000.0 {
        (1000.0, "s", 2)
    } else {
        (1.0, "ms", 1)
    };
    let _ = write!(out, "<table><thead><tr><th>rank</th><th>candidate</th><th>instance</th><th>engines × GPUs each</th><th>{currency}/instance-hour</th><th>concurrency</th><th>output tok/s</th><th>TTFT p99 ms</th><th>ITL p99 ms</th><th>latency p50 {unit}</th><th>p90 {unit}</th><th>p99 {unit}</th><th>{currency} per M output tokens</th><th>instances at peak</th><th>{currency}/month</th></tr></thead><tbody>");
    let mut why = String::new();
    for c in list {
        let f = |p: &str| c.pointer(p).and_then(Value::as_f64);
        let lat = |p: &str| f(p).map(|v| v / div);
        let name = esc(c.get("name").and_then(Value::as_str).unwrap_or(""));
        let rank = c.get("rank").and_then(Value::as_u64);
        let link = c
            .get("artifact_dir")
            .and_then(Value::as_str)
            .map(|d| format!("<a href=\"{}/report.html\">{name}</a>", esc(d)))
            .unwrap_or_else(|| name.clone());
        let rank_text = match (rank, c.get("provisional").and_then(Value::as_str)) {
            (Some(r), _) => format!("#{r}"),
            (None, Some(_)) => "provisional".into(),
            (None, None) => "—".into(),
        };
        let _ = write!(
            out,
            "<tr{}><td>{rank_text}</td><td style=\"text-align:left\">{link}</td><td style=\"text-align:left\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if rank.is_none() { " class=\"fail\"" } else { "" },
            esc(c.get("instance_type").and_then(Value::as_str).unwrap_or("")),
            engines(c),
            num(f("/price_per_instance_hour"), 2),
            c.pointer("/point/concurrency").and_then(Value::as_u64).map_or("—".into(), |v| v.to_string()),
            num(f("/point/output_token_throughput"), 0),
            num(f("/point/ttft_p99_ms"), 1),
            num(f("/point/itl_p99_ms"), 2),
            num(lat("/point/e2e_p50_ms"), digits),
            num(lat("/point/e2e_p90_ms"), digits),
            num(lat("/point/e2e_p99_ms"), digits),
            num(f("/cost_per_million_output_tokens"), 3),
            c.get("instances_for_peak").and_then(Value::as_u64).map_or("—".into(), |v| v.to_string()),
            num(f("/monthly_cost"), 0),
        );
        let _ = write!(
            why,
            "<li><strong>{rank_text} {name}</strong>: {}</li>",
            esc(c.get("explanation").and_then(Value::as_str).unwrap_or(""))
        );
    }
    let _ = write!(out, "</tbody></table><ul>{why}</ul>");
    stage_one_table(list, out);
    let mut notes = Vec::new();
    if let Some(t) = a.doc.get("price_table").filter(|t| !t.is_null()) {
        notes.push(format!(
            "Prices from a table dated {}{}.",
            esc(t.get("as_of").and_then(Value::as_str).unwrap_or("?")),
            t.get("source")
                .and_then(Value::as_str)
                .map(|s| format!(" ({})", esc(s)))
                .unwrap_or_default()
        ));
    }
    if let Some(p) = a.doc.get("peak").filter(|p| !p.is_null()) {
        notes.push(format!(
            "Fleets sized for a peak of {} with {:.0} % headroom; a month is {} hours.",
            esc(&peak_text(p.get("peak").unwrap_or(&Value::Null))),
            p.get("headroom").and_then(Value::as_f64).unwrap_or(0.0) * 100.0,
            a.doc
                .get("hours_per_month")
                .and_then(Value::as_f64)
                .unwrap_or(730.0)
        ));
    }
    if let Some(m) = a.doc.get("mode").and_then(Value::as_str) {
        notes.push(format!(
            "Operating points from {}.",
            if m == "sweep" {
                "each candidate's sweep (its best level below the knee)"
            } else {
                "each candidate's max-concurrency-under-SLA search"
            }
        ));
    }
    if !notes.is_empty() {
        let _ = write!(out, "<p class=\"meta\">{}</p>", notes.join(" "));
    }
}

/// `{"concurrency": 400.0}` as "400 concurrent requests".
fn peak_text(p: &Value) -> String {
    let Some((k, v)) = p.as_object().and_then(|m| m.iter().next()) else {
        return p.to_string();
    };
    let n = v.as_f64().map_or_else(|| v.to_string(), |x| format!("{x}"));
    match k.as_str() {
        "concurrency" => format!("{n} concurrent requests"),
        "requests_per_second" => format!("{n} requests/s"),
        "output_tokens_per_second" => format!("{n} output tokens/s"),
        other => format!("{n} {other}"),
    }
}
