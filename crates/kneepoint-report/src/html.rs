//! The self-contained `report.html`: inline CSS, inline SVG, no scripts, no network fetches.

use kneepoint_core::folder;
use kneepoint_core::{Metric, Stat};
use std::fmt::Write as _;

use kneepoint_planner::ZoneIntervals;
use serde_json::Value;

use crate::artifact::{Artifact, Level, RunKind};
pub use crate::html_text::esc;
use crate::html_text::num;
use crate::plots;
pub use crate::plots::Plot;
use crate::server_plots;
use crate::Error;

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#1d2430;background:#fff}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #dde;padding-bottom:.2rem}
.meta{color:#667;font-size:.9rem}.answer{background:#eef6ee;border-left:4px solid #2ca02c;padding:.7rem 1rem;margin:1rem 0}
.warn{background:#fff4e5;border-left:4px solid #ff7f0e;padding:.7rem 1rem;margin:1rem 0}
table{border-collapse:collapse;width:100%;font-size:.85rem;font-variant-numeric:tabular-nums}
th,td{padding:.3rem .5rem;border-bottom:1px solid #e4e4ee;text-align:right}th{background:#f4f5fa}
td:first-child,th:first-child{text-align:left}tr.knee td{font-weight:600}tr.fail td{color:#b22}
svg{max-width:100%;height:auto;display:block;margin:.5rem 0}details{margin:.5rem 0}summary{cursor:pointer}
pre{background:#f6f8fa;padding:.8rem;overflow:auto;font-size:.8rem}.grid{display:grid;grid-template-columns:1fr;gap:.5rem;max-width:820px}
figcaption{color:#555;font-size:.85rem}";

/// The rendered report: the page and the plot files it inlines.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// `report.html`.
    pub html: String,
    /// Every plot, also inlined in the page.
    pub plots: Vec<Plot>,
}

fn level_plots(root: &std::path::Path, l: &Level) -> Result<Vec<Plot>, Error> {
    let title = format!("concurrency {}", l.concurrency);
    let mut out = vec![
        Plot {
            file: format!("ttft_timeline_{}.svg", l.dir),
            title: format!("TTFT per request, {title}"),
            svg: plots::ttft_timeline(&l.records, &title)?,
        },
        Plot {
            file: format!("ttft_distribution_{}.svg", l.dir),
            title: format!("TTFT distribution, {title}"),
            svg: plots::ttft_histogram(&l.records, &title)?,
        },
    ];
    // The server's view over time, when its metrics were scraped (an unreadable export is
    // left out: the page still renders).
    let export = root.join(&l.dir).join(folder::SERVER_METRICS_JSON);
    let doc = kneepoint_core::read_capped(&export, kneepoint_core::MAX_DOCUMENT_BYTES)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
    let points = doc
        .map(|d| server_plots::read_timeline(&d))
        .unwrap_or_default();
    let slices_path = root.join(&l.dir).join(folder::TIMESLICES_JSON);
    let slices = kneepoint_core::read_capped(&slices_path, kneepoint_core::MAX_DOCUMENT_BYTES)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .map(|d| plots::read_slices(&d))
        .unwrap_or_default();
    if !slices.is_empty() {
        out.push(Plot {
            file: format!("slices_{}.svg", l.dir),
            title: format!("Throughput and latency per time slice, {title}"),
            svg: plots::slices_plot(&slices, &title)?,
        });
    }
    if !points.is_empty() {
        out.push(Plot {
            file: format!("server_{}.svg", l.dir),
            title: format!("Server state over time, {title}"),
            svg: server_plots::server_timeline(&points, &title)?,
        });
    }
    Ok(out)
}

/// Client and server TTFT per level, when some level has the server's.
fn ttft_pairs(levels: &[Level]) -> Vec<server_plots::TtftPair> {
    let pairs: Vec<server_plots::TtftPair> = levels
        .iter()
        .map(|l| {
            let s = &l.summary;
            let server = |q: &str| s.server.as_ref().and_then(|v| v.get("server_ttft", q));
            server_plots::TtftPair {
                concurrency: l.concurrency,
                client: (
                    s.value(Metric::TimeToFirstToken, Stat::P50),
                    s.value(Metric::TimeToFirstToken, Stat::P95),
                ),
                server: (server("p50"), server("p95")),
            }
        })
        .collect();
    if pairs.iter().any(|p| p.server.0.is_some()) {
        pairs
    } else {
        Vec::new()
    }
}

fn levels_table(a: &Artifact, out: &mut String) {
    let knee = a.curve("").knee;
    // with per-request SLOs (`--goodput`): goodput and the share of requests that met them
    let goodput = a.levels.iter().any(|l| l.summary.goodput.is_some());
    let _ = write!(out, "<table><thead><tr><th>level</th><th>concurrency</th><th>requests</th><th>errors</th><th>output tok/s</th><th>req/s</th><th>TTFT p50 ms</th><th>TTFT p95 ms</th><th>TTFT p99 ms</th><th>ITL p50 ms</th><th>ITL p95 ms</th><th>e2e p50 ms</th><th>e2e p90 ms</th><th>e2e p99 ms</th>{}<th>SLAs</th></tr></thead><tbody>", if goodput { "<th>goodput req/s</th><th>met SLOs</th>" } else { "" });
    for l in &a.levels {
        let s = &l.summary;
        let st = |m: Metric, q: Stat| s.value(m, q);
        let class = match (l.meets_slas, Some(l.concurrency) == knee) {
            (Some(false), _) => " class=\"fail\"",
            (_, true) => " class=\"knee\"",
            _ => "",
        };
        let _ = write!(
            out,
            "<tr{class}><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td></tr>",
            esc(&l.dir),
            if Some(l.concurrency) == knee { " (knee)" } else { "" },
            l.concurrency,
            s.request_count,
            s.error_count,
            num(Some(s.output_token_throughput), 0),
            num(Some(s.request_throughput), 2),
            num(st(Metric::TimeToFirstToken, Stat::P50), 1),
            num(st(Metric::TimeToFirstToken, Stat::P95), 1),
            num(st(Metric::TimeToFirstToken, Stat::P99), 1),
            num(st(Metric::InterTokenLatency, Stat::P50), 2),
            num(st(Metric::InterTokenLatency, Stat::P95), 2),
            num(st(Metric::RequestLatency, Stat::P50), 1),
            num(st(Metric::RequestLatency, Stat::P90), 1),
            num(st(Metric::RequestLatency, Stat::P99), 1),
            if goodput {
                format!(
                    "<td>{}</td><td>{}</td>",
                    num(s.goodput, 2),
                    s.slo_miss_rate
                        .map_or("—".into(), |m| format!("{:.2} %", (1.0 - m) * 100.0))
                )
            } else {
                String::new()
            },
            match l.meets_slas {
                Some(true) => "pass",
                Some(false) => "fail",
                None => "—",
            }
        );
    }
    out.push_str("</tbody></table>");
}

fn answer(a: &Artifact) -> String {
    let d = &a.doc;
    let s = |p: &str| d.pointer(p).and_then(Value::as_str).map(str::to_owned);
    let u = |p: &str| d.pointer(p).and_then(Value::as_u64);
    match a.kind {
        RunKind::Lengths => crate::html_lengths::answer(a),
        RunKind::Sweep => {
            // One sentence a line, each capitalised and ended.
            let mut lines = vec![s("/zone/summary").unwrap_or_else(|| match u("/knee/knee") {
                Some(k) => format!("The knee is at concurrency {k}"),
                None => "No knee among the levels run".into(),
            })];
            if let Some(why) = s("/knee_explanation/summary") {
                lines.push(format!("Why: {why}"));
            }
            let intervals = d
                .pointer("/zone/intervals")
                .and_then(|v| serde_json::from_value::<ZoneIntervals>(v.clone()).ok());
            if let Some(i) = intervals {
                lines.push(i.sentence());
            }
            if let Some(f) = s("/fleet/explanation") {
                lines.push(format!("Fleet: {f}"));
            }
            if let Some([a, b]) = d
                .pointer("/fleet/instances_interval")
                .and_then(|v| serde_json::from_value::<[u32; 2]>(v.clone()).ok())
            {
                lines.push(format!("Instances: 90 % interval {a}–{b}"));
            }
            lines
                .iter()
                .map(|l| {
                    let l = capitalise(l.trim_end_matches('.'));
                    format!("{l}.")
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        RunKind::Search => s("/boundary/explanation").unwrap_or_default(),
        RunKind::Recommend => {
            let top = d.get("candidates").and_then(Value::as_array).and_then(|c| {
                c.iter()
                    .find(|c| c.get("rank").and_then(Value::as_u64) == Some(1))
            });
            match top {
                Some(c) => format!(
                    "Recommended for {}: {} ({}) — {}",
                    s("/objective").unwrap_or_default(),
                    c.get("name").and_then(Value::as_str).unwrap_or(""),
                    c.get("instance_type").and_then(Value::as_str).unwrap_or(""),
                    c.get("explanation").and_then(Value::as_str).unwrap_or("")
                ),
                None => "No candidate met the SLAs.".into(),
            }
        }
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
}

fn title(a: &Artifact) -> &'static str {
    match a.kind {
        RunKind::Sweep => "Concurrency sweep",
        RunKind::Search if a.doc["recipe"] == "max-goodput-under-slo" => {
            "Max concurrency under goodput SLOs"
        }
        RunKind::Search => "Max concurrency under SLA",
        RunKind::Recommend => "Recommendations",
        RunKind::Lengths => "Input-length sweep",
    }
}

fn inline(out: &mut String, p: &Plot) {
    // A timeline's empty stretches are the batch at work between waves of starts.
    let caption = if p.file.starts_with("ttft_timeline_") {
        "<figcaption>One point per measured request, at its start. Requests start when a slot frees: in a level kept loaded they come in waves, and a stretch without points is the batch generating, not missing data.</figcaption>"
    } else {
        ""
    };
    let _ = write!(
        out,
        "<figure aria-label=\"{}\">{}{caption}</figure>",
        esc(&p.title),
        p.svg
    );
}

/// The page's head, title, version and start, the unfinished-run warning and the answer.
fn header(a: &Artifact, o: &mut String) {
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><link rel=\"icon\" href=\"data:,\">");
    let _ = write!(
        o,
        "<title>kneepoint — {}</title><style>{STYLE}</style></head><body>",
        title(a)
    );
    let _ = write!(o, "<h1>{}</h1>", title(a));
    let version = a
        .doc
        .get("kneepoint_version")
        .and_then(Value::as_str)
        .unwrap_or("?");
    let start = a
        .levels
        .iter()
        .filter_map(|l| l.info.as_ref().map(|i| i.start_unix_ns))
        .min()
        .map(kneepoint_metrics::export::rfc3339);
    let _ = write!(
        o,
        "<p class=\"meta\">kneepoint {}{}</p>",
        esc(version),
        start.map(|s| format!(" · started {s}")).unwrap_or_default()
    );
    if a.doc.get("interrupted").and_then(Value::as_bool) == Some(true)
        || a.doc.get("complete").and_then(Value::as_bool) == Some(false)
    {
        o.push_str("<div class=\"warn\">This run did not finish (interrupted or still running): the last level may be partial.</div>");
    }
    let _ = write!(
        o,
        "<div class=\"answer\"><strong>Answer.</strong> {}</div>",
        esc(&answer(a)).replace('\n', "<br>")
    );
}

/// Each level's TTFT plots, folded, the knee's open.
fn per_level_section(o: &mut String, per_level: &[(&Level, Vec<Plot>)], knee: Option<u32>) {
    if per_level.is_empty() {
        return;
    }
    o.push_str("<h2>Time to first token, per level</h2>");
    for (l, ps) in per_level {
        let open = if Some(l.concurrency) == knee {
            " open"
        } else {
            ""
        };
        let _ = write!(
            o,
            "<details{open}><summary>{} — concurrency {}</summary><div class=\"grid\">",
            esc(&l.dir),
            l.concurrency
        );
        for p in ps {
            inline(o, p);
        }
        o.push_str("</div></details>");
    }
}

/// Renders the report of `a`: the page and its plots. Deterministic: the same folder renders the
/// same bytes.
pub fn render(a: &Artifact) -> Result<Rendered, Error> {
    let mut plots_out: Vec<Plot> = Vec::new();
    let curves: Vec<plots::Curve> = match a.kind {
        RunKind::Recommend => a
            .candidates
            .iter()
            .zip(
                a.doc
                    .get("candidates")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|c| c.get("artifact_dir").and_then(Value::as_str).is_some()),
            )
            .map(|(run, c)| run.curve(c.get("name").and_then(Value::as_str).unwrap_or("")))
            .collect(),
        _ => vec![a.curve("measured")],
    };
    let sla = match a.kind {
        RunKind::Recommend => a.candidates.iter().find_map(Artifact::e2e_p99_sla_ms),
        _ => a.e2e_p99_sla_ms(),
    };
    // Open-loop levels are request rates, not concurrencies, and a length sweep's levels share
    // one concurrency: the curves over concurrency do not apply (each level keeps its own plots
    // and table row).
    let open_loop = a.doc.get("load").and_then(Value::as_str) == Some("open_loop")
        || a.kind == RunKind::Lengths;
    if a.kind == RunKind::Lengths {
        plots_out.extend(crate::html_lengths::plot(a)?);
    }
    if !open_loop {
        plots_out.push(Plot {
            file: "throughput_vs_latency.svg".into(),
            title: "Output throughput vs p99 request latency".into(),
            svg: plots::throughput_vs_latency(&curves, sla)?,
        });
    }
    let pairs = ttft_pairs(&a.levels);
    if !pairs.is_empty() && !open_loop {
        plots_out.push(Plot {
            file: "client_vs_server_ttft.svg".into(),
            title: "TTFT: client vs server (the difference is the network and queueing in front of the engine)".into(),
            svg: server_plots::client_vs_server_ttft(&pairs)?,
        });
    }
    if a.kind != RunKind::Recommend && !open_loop {
        plots_out.push(Plot {
            file: "latency_percentiles.svg".into(),
            title: "Request latency percentiles vs concurrency".into(),
            svg: plots::latency_percentiles(&curves[0])?,
        });
    }
    if let Some((title, svg)) = plots::pareto_of(a)? {
        plots_out.push(Plot {
            file: "pareto.svg".into(),
            title,
            svg,
        });
    }
    let mut per_level = Vec::new();
    for l in &a.levels {
        per_level.push((l, level_plots(&a.root, l)?));
    }

    let mut o = String::new();
    header(a, &mut o);
    if a.kind == RunKind::Lengths {
        o.push_str("<h2>Lengths</h2>");
        crate::html_lengths::table(a, &mut o);
    } else if a.kind == RunKind::Recommend {
        o.push_str("<h2>Ranked candidates</h2>");
        crate::html_recommend::recommendations_table(a, &mut o);
    } else {
        o.push_str("<h2>Levels</h2>");
        levels_table(a, &mut o);
    }
    o.push_str("<h2>Plots</h2>");
    for p in &plots_out {
        inline(&mut o, p);
    }
    per_level_section(&mut o, &per_level, curves.first().and_then(|c| c.knee));
    if let Some(settings) = a.doc.get("settings").or_else(|| a.doc.get("base_settings")) {
        let pretty = serde_json::to_string_pretty(settings).unwrap_or_default();
        let _ = write!(
            o,
            "<h2>Settings</h2><details><summary>the resolved settings of the run ({} lines of JSON)</summary><pre>{}</pre></details>",
            pretty.lines().count(),
            esc(&pretty)
        );
    }
    let slas = a.slas();
    if !slas.is_empty() {
        let pretty = serde_json::to_string_pretty(&slas).unwrap_or_default();
        let _ = write!(o, "<h2>SLAs</h2><pre>{}</pre>", esc(&pretty));
    }
    o.push_str("</body></html>\n");
    plots_out.extend(per_level.into_iter().flat_map(|(_, p)| p));
    Ok(Rendered {
        html: o,
        plots: plots_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }
}
