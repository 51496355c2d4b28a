//! A length sweep's page parts: the answer (the prefill rate), the table of lengths and the
//! curves of TTFT and ITL against the prompt's length.

use std::fmt::Write as _;

use crate::artifact::Artifact;
use crate::html_text::num;
use crate::plots::{lengths_plot, LengthCurvePoint, Plot};
use crate::schema::LengthSweepDoc;
use crate::Error;

fn doc(a: &Artifact) -> Option<LengthSweepDoc> {
    serde_json::from_value(a.doc.clone()).ok()
}

/// The sentence a length sweep answers with: the prefill rate and its interval.
pub(crate) fn answer(a: &Artifact) -> String {
    let Some(d) = doc(a) else {
        return "The length sweep's document could not be read.".into();
    };
    let at = match d.request_rate {
        Some(r) => format!("at {r} requests/s"),
        None => format!("at concurrency {}", d.concurrency),
    };
    match d.prefill.as_ref() {
        Some(f) => {
            let rate = f.rate_tokens_per_s.map_or(
                "Prefill rate not measured: TTFT did not grow with the prompt".to_owned(),
                |r| {
                    format!(
                        "Prefill: {r:.0} prompt tokens/s{}",
                        f.rate_interval.map_or(String::new(), |[lo, hi]| format!(
                            " (90 % interval {lo:.0}–{hi:.0})"
                        ))
                    )
                },
            );
            format!(
                "{rate}; TTFT grows {:.2} ms per 1,000 prompt tokens from {:.1} ms (r² {:.3}; {} lengths, {} requests, {at}).",
                f.ms_per_1k_tokens, f.intercept_ms, f.r_squared, f.lengths, f.requests
            )
        }
        None if d.rows.len() >= 2 => format!(
            "{} lengths measured {at}; no prefill rate: fewer than two of them have a measured TTFT (every request failed, or no token arrived).",
            d.rows.len()
        ),
        None => format!(
            "{} length measured {at}: a prefill rate needs at least two input lengths.",
            d.rows.len()
        ),
    }
}

/// The table of lengths.
pub(crate) fn table(a: &Artifact, out: &mut String) {
    let rows = doc(a).map(|d| d.rows).unwrap_or_default();
    out.push_str("<table><thead><tr><th>level</th><th>ISL asked</th><th>ISL measured</th><th>OSL asked</th><th>OSL measured</th><th>requests</th><th>errors %</th><th>TTFT p50 ms</th><th>TTFT p95 ms</th><th>ITL p50 ms</th><th>ITL p95 ms</th><th>latency p99 ms</th><th>input tok/s</th><th>output tok/s</th></tr></thead><tbody>");
    for r in &rows {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            crate::html_text::esc(&r.dir),
            r.isl,
            num(r.input_tokens_mean, 1),
            r.osl,
            num(r.output_tokens_mean, 1),
            r.request_count,
            num(Some(r.error_rate * 100.0), 2),
            num(r.ttft_p50_ms, 1),
            num(r.ttft_p95_ms, 1),
            num(r.itl_p50_ms, 2),
            num(r.itl_p95_ms, 2),
            num(r.e2e_p99_ms, 1),
            num(Some(r.input_token_throughput), 0),
            num(Some(r.output_token_throughput), 0),
        );
    }
    out.push_str("</tbody></table>");
}

/// TTFT and ITL against the measured input length, with the fitted line.
pub(crate) fn plot(a: &Artifact) -> Result<Option<Plot>, Error> {
    let Some(d) = doc(a) else { return Ok(None) };
    let points: Vec<LengthCurvePoint> = d
        .rows
        .iter()
        .map(|r| LengthCurvePoint {
            input_tokens: r.input_tokens_mean.unwrap_or(f64::from(r.isl)),
            ttft_p50_ms: r.ttft_p50_ms,
            ttft_p95_ms: r.ttft_p95_ms,
            itl_p50_ms: r.itl_p50_ms,
            itl_p95_ms: r.itl_p95_ms,
        })
        .collect();
    if points.is_empty() {
        return Ok(None);
    }
    let fit = d.prefill.as_ref().and_then(|f| {
        let rate = f.rate_tokens_per_s?;
        Some((
            f.intercept_ms,
            f.ms_per_1k_tokens / 1000.0,
            format!("fit: {rate:.0} prompt tokens/s"),
        ))
    });
    Ok(Some(Plot {
        file: "lengths.svg".into(),
        title: "TTFT and ITL against the prompt's length".into(),
        svg: lengths_plot(&points, fit)?,
    }))
}
