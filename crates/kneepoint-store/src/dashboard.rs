//! The dashboard's page: the stored runs (filtered), trend plots of their key figures with
//! intervals, and a link to each run's report. One self-contained HTML page with inline SVG,
//! no script: it works offline and in any browser.

use std::fmt::Write as _;

use kneepoint_core::{Metric, Stat};
use kneepoint_report::esc;
use kneepoint_report::plots::{trend_plot, TrendPoint};
use serde_json::Value;

use crate::{RunFilter, RunRecord};

/// A run's value of a figure and its 90 % interval.
type Reading = Option<(f64, Option<[f64; 2]>)>;

/// A trend: its id in the page, its title, its unit, and how to read it off a run.
struct Trend {
    id: &'static str,
    title: &'static str,
    unit: &'static str,
    read: fn(&RunRecord) -> Reading,
}

/// The operating level's value of `metric`'s `stat` and its interval.
fn at_operating(r: &RunRecord, metric: Metric, stat: Stat) -> Reading {
    let c = r.figures.operate_at?;
    let l = r.levels.iter().rev().find(|l| l.concurrency == c)?;
    let v = match metric {
        Metric::OutputTokenThroughput => Some(l.summary.output_token_throughput),
        _ => l.summary.value(metric, stat),
    }?;
    let i = l.summary.interval(metric, stat).map(|i| [i.low, i.high]);
    Some((v, i))
}

const TRENDS: [Trend; 4] = [
    Trend {
        id: "trend-throughput",
        title: "output tokens/s at the operating level",
        unit: "tokens/s",
        read: |r| at_operating(r, Metric::OutputTokenThroughput, Stat::Avg),
    },
    Trend {
        id: "trend-ttft",
        title: "TTFT p95 at the operating level",
        unit: "ms",
        read: |r| at_operating(r, Metric::TimeToFirstToken, Stat::P95),
    },
    Trend {
        id: "trend-e2e",
        title: "e2e latency p99 at the operating level",
        unit: "ms",
        read: |r| at_operating(r, Metric::RequestLatency, Stat::P99),
    },
    Trend {
        id: "trend-cost",
        title: "cost per million output tokens (the winner's)",
        unit: "currency",
        read: |r| {
            let v = r.figures.cost_per_million_output_tokens?;
            let winner = r
                .answer
                .get("candidates")?
                .as_array()?
                .iter()
                .find(|c| c.get("rank").and_then(Value::as_u64) == Some(1));
            let i = winner
                .and_then(|w| w.get("cost_per_million_interval"))
                .and_then(|i| Some([i.get(0)?.as_f64()?, i.get(1)?.as_f64()?]));
            Some((v, i))
        },
    },
];

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left}td.n{text-align:right}.trends{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0}form{margin:12px 0}input{margin-right:12px}.note{color:#666;font-size:13px}";

/// The page for `runs` (newest first, with their levels), listed from the store at `store`
/// under `filter`.
pub fn dashboard_page(runs: &[RunRecord], filter: &RunFilter, store: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>kneepoint results</title><style>{STYLE}</style></head><body><h1>kneepoint results</h1><p class=\"note\">store {} · {} runs shown, newest first</p>",
        esc(store),
        runs.len()
    );
    form(&mut out, filter);
    out.push_str("<h2>Trends</h2><p class=\"note\">Each figure at the run's operating level, oldest to newest; bars are 90 % intervals. Filter to one endpoint and workload to compare like with like.</p><div class=\"trends\">");
    for t in &TRENDS {
        let points: Vec<TrendPoint> = runs
            .iter()
            .rev()
            .filter_map(|r| {
                let (value, interval) = (t.read)(r)?;
                Some(TrendPoint {
                    label: r.id.chars().take(6).collect(),
                    value,
                    interval,
                })
            })
            .collect();
        if points.is_empty() {
            continue;
        }
        match trend_plot(&points, t.title, t.unit) {
            Ok(svg) => {
                let _ = write!(out, "<figure id=\"{}\">{svg}</figure>", t.id);
            }
            Err(e) => {
                let _ = write!(
                    out,
                    "<p class=\"note\">{}: {}</p>",
                    t.title,
                    esc(&e.to_string())
                );
            }
        }
    }
    out.push_str("</div><h2>Runs</h2>");
    table(&mut out, runs);
    out.push_str("</body></html>");
    out
}

fn form(out: &mut String, f: &RunFilter) {
    let v = |o: &Option<String>| esc(o.as_deref().unwrap_or(""));
    let label = f
        .labels
        .first()
        .map(|(k, v)| format!("{k}={v}"))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<form method=\"get\" action=\"/\"><label>endpoint <input name=\"endpoint\" value=\"{}\"></label><label>model <input name=\"model\" value=\"{}\"></label><label>command <input name=\"command\" value=\"{}\"></label><label>label <input name=\"label\" placeholder=\"key=value\" value=\"{}\"></label><button type=\"submit\">filter</button></form>",
        v(&f.endpoint),
        v(&f.model),
        v(&f.command),
        esc(&label)
    );
}

fn table(out: &mut String, runs: &[RunRecord]) {
    out.push_str("<table id=\"runs\"><thead><tr><th>run</th><th>recorded (UTC)</th><th>command</th><th>status</th><th>endpoint</th><th>model</th><th>operate at</th><th>out tok/s</th><th>TTFT p95 ms</th><th>e2e p99 ms</th><th>cost / M tok</th><th>labels</th></tr></thead><tbody>");
    let num = |v: Option<f64>, d: usize| v.map_or("-".into(), |v| format!("{v:.d$}"));
    for r in runs {
        let f = &r.figures;
        let labels = r
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(
            out,
            "<tr data-run=\"{id}\"><td><a href=\"/runs/{id}/report.html\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&r.recorded_at.replace('T', " ")),
            esc(&r.command),
            r.status.as_str(),
            esc(r.endpoint.as_deref().unwrap_or("-")),
            esc(r.model.as_deref().unwrap_or("-")),
            f.operate_at.map_or("-".into(), |c| c.to_string()),
            num(f.output_token_throughput, 0),
            num(f.ttft_p95_ms, 1),
            num(f.e2e_p99_ms, 1),
            num(f.cost_per_million_output_tokens, 4),
            esc(&labels),
            id = esc(&r.id),
        );
    }
    out.push_str("</tbody></table>");
}

/// The filter a dashboard URL's query asks for (`endpoint=...&model=...&command=...&label=k=v
/// &limit=N`; empty values ignored).
#[deprecated(note = "use parse_filter_query, which refuses a malformed filter")]
pub fn filter_from_query(query: &str) -> RunFilter {
    parse_filter_query(query).unwrap_or_else(|_| RunFilter::new().limit(200))
}

/// The filter a dashboard query asks for (`endpoint`, `model`, `command`, `label=KEY=VALUE`
/// repeatable, `limit` at most 1,000; 200 runs when not given): a label without `=` or a
/// limit that is not a number is refused, not ignored.
pub fn parse_filter_query(query: &str) -> Result<RunFilter, crate::Error> {
    let bad = |reason: String| crate::Error::Location {
        location: "the page's query".into(),
        reason,
    };
    let mut f = RunFilter::new().limit(200);
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        let v = v.trim().to_owned();
        if v.is_empty() {
            continue;
        }
        match k.as_ref() {
            "endpoint" => f.endpoint = Some(v),
            "model" => f.model = Some(v),
            "command" => f.command = Some(v),
            "label" => match v.split_once('=') {
                Some((a, b)) if !a.trim().is_empty() => f = f.label(a.trim(), b.trim()),
                _ => return Err(bad(format!("label {v:?}: write KEY=VALUE"))),
            },
            "limit" => match v.parse::<usize>() {
                Ok(n) => f.limit = Some(n.min(1000)),
                Err(_) => return Err(bad(format!("limit {v:?}: a number of runs"))),
            },
            _ => {}
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_a_filter_and_the_page_escapes_what_it_shows() {
        let f =
            parse_filter_query("endpoint=sim%3Afast&model=&label=team%3Dinfra&limit=5000").unwrap();
        assert_eq!(f.endpoint.as_deref(), Some("sim:fast"));
        assert_eq!(f.model, None);
        assert_eq!(f.labels, [("team".to_owned(), "infra".to_owned())]);
        assert_eq!(f.limit, Some(1000));
        let page = dashboard_page(&[], &f, "<script>");
        assert!(page.contains("&lt;script&gt;") && !page.contains("<script>"));
        assert!(page.contains("<table id=\"runs\">"));
        // issue 57.20: a label without `=`, or a limit that is no number, is refused
        for q in ["label=team", "label=%3Dinfra", "limit=lots"] {
            assert!(parse_filter_query(q).is_err(), "{q}");
        }
    }
}
