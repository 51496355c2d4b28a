//! A level's server-metrics files in AIPerf's shape: `server_metrics_export.json` (statistics
//! per series over the measured window) and `.csv` (the same, one section per type). The
//! `.jsonl` (every scrape as read) is written while scraping, by [`crate::Scraper`].

use kneepoint_core::folder;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use kneepoint_core::ServerSummary;
use kneepoint_metrics::Stats;
use serde_json::{json, Map, Value};

use crate::summary::Part;
use crate::text::{le_label, Labels, MetricType};
use crate::timeline::{histogram_delta, increase, samples, Log, Merged, Meta};
use crate::Error;

/// The schema of the files, AIPerf's.
pub const SCHEMA_VERSION: &str = "1.0";

/// One series' statistics over the window.
struct SeriesStats {
    endpoint: String,
    labels: Labels,
    stats: Vec<(String, f64)>,
    buckets: Option<Vec<(f64, f64)>>,
}

/// Every series' statistics, by metric name (with its family's type, help and unit).
type PerSeries = BTreeMap<String, (Meta, Vec<SeriesStats>)>;

/// Every series' statistics, by metric name.
fn per_series(parts: &[Part]) -> PerSeries {
    let window_s: f64 = parts.iter().map(|p| p.window.seconds()).sum();
    // (name, endpoint, labels) → accumulated values
    let mut gauges: BTreeMap<(String, String, Labels), Vec<f64>> = BTreeMap::new();
    let mut counters: BTreeMap<(String, String, Labels), f64> = BTreeMap::new();
    let mut hists: BTreeMap<(String, String, Labels), Merged> = BTreeMap::new();
    let mut metas: BTreeMap<String, Meta> = BTreeMap::new();
    for part in parts {
        for tl in &part.timelines {
            for ((name, labels), log) in &tl.series {
                let Some(meta) = tl.meta.get(name) else {
                    continue;
                };
                metas.entry(name.clone()).or_insert_with(|| meta.clone());
                let key = (name.clone(), tl.url.clone(), labels.clone());
                match (meta.kind, log) {
                    (MetricType::Counter, Log::Number(points)) => {
                        if let Some(x) = increase(points, part.window) {
                            *counters.entry(key).or_default() += x;
                        }
                    }
                    (_, Log::Number(points)) => gauges
                        .entry(key)
                        .or_default()
                        .extend(samples(points, part.window).map(|s| s.1)),
                    (_, Log::Histogram { bounds, points }) => {
                        if let Some(delta) = histogram_delta(points, part.window) {
                            hists
                                .entry(key)
                                .or_insert_with(|| Merged::new(bounds))
                                .add(bounds, delta);
                        }
                    }
                }
            }
        }
    }
    let mut out = PerSeries::new();
    let mut push = |name: String, s: SeriesStats| {
        if let Some(meta) = metas.get(&name) {
            out.entry(name)
                .or_insert_with(|| (meta.clone(), Vec::new()))
                .1
                .push(s);
        }
    };
    for ((name, endpoint, labels), values) in gauges {
        let Some(st) = Stats::of(&values) else {
            continue;
        };
        let stats = kneepoint_core::metric::GAUGE_STATS
            .iter()
            .filter_map(|k| st.get(k).map(|v| ((*k).to_owned(), v)))
            .collect();
        push(
            name,
            SeriesStats {
                endpoint,
                labels,
                stats,
                buckets: None,
            },
        );
    }
    for ((name, endpoint, labels), total) in counters {
        let mut stats = vec![("total".to_owned(), total)];
        if window_s > 0.0 {
            stats.push(("rate".to_owned(), total / window_s));
        }
        push(
            name,
            SeriesStats {
                endpoint,
                labels,
                stats,
                buckets: None,
            },
        );
    }
    for ((name, endpoint, labels), h) in hists {
        let mut stats = vec![("count".to_owned(), h.count)];
        if h.count > 0.0 {
            let rate = |x: f64| if window_s > 0.0 { x / window_s } else { 0.0 };
            stats.extend([
                ("count_rate".to_owned(), rate(h.count)),
                ("sum".to_owned(), h.sum),
                ("sum_rate".to_owned(), rate(h.sum)),
                ("avg".to_owned(), h.sum / h.count),
            ]);
            for (label, q) in kneepoint_metrics::PERCENTILES {
                if let Some(v) = h.quantile(q) {
                    stats.push((format!("{label}_estimate"), v));
                }
            }
        }
        let buckets = (!h.mismatched).then(|| h.bounds.into_iter().zip(h.cumulative).collect());
        push(
            name,
            SeriesStats {
                endpoint,
                labels,
                stats,
                buckets,
            },
        );
    }
    out
}

/// `server_metrics_export.json`'s document.
pub fn export_json(parts: &[Part], summary: &ServerSummary) -> Value {
    json_of(parts, summary, per_series(parts))
}

fn json_of(parts: &[Part], summary: &ServerSummary, series: PerSeries) -> Value {
    let mut endpoint_info = Map::new();
    for part in parts {
        for tl in &part.timelines {
            let e = endpoint_info.entry(tl.url.clone()).or_insert_with(|| {
                json!({"total_fetches": 0, "failed_fetches": 0, "skipped_lines": 0,
                       "server": tl.server, "latency_ns": 0})
            });
            let add = |e: &mut Value, k: &str, v: u64| {
                e[k] = json!(e[k].as_u64().unwrap_or(0) + v);
            };
            add(e, "total_fetches", u64::from(tl.fetches));
            add(e, "failed_fetches", u64::from(tl.failures));
            add(e, "skipped_lines", tl.skipped);
            add(e, "latency_ns", tl.latency_ns);
            if e.get("first_fetch_ns").is_none_or(Value::is_null) {
                e["first_fetch_ns"] = json!(tl.first_fetch_ns);
            }
            if tl.last_fetch_ns.is_some() {
                e["last_fetch_ns"] = json!(tl.last_fetch_ns);
            }
        }
    }
    for e in endpoint_info.values_mut() {
        let n = e["total_fetches"].as_u64().unwrap_or(0);
        let lat = e["latency_ns"].as_u64().unwrap_or(0);
        if n > 0 {
            e["avg_fetch_latency_ms"] = json!(lat as f64 / n as f64 / 1e6);
        }
        if let Some(o) = e.as_object_mut() {
            o.remove("latency_ns");
        }
    }
    let configured: Vec<&String> = endpoint_info.keys().collect();
    let successful: Vec<&String> = endpoint_info
        .iter()
        .filter(|(_, e)| e["total_fetches"].as_u64().unwrap_or(0) > 0)
        .map(|(k, _)| k)
        .collect();
    let windows: Vec<Value> = parts
        .iter()
        .map(|p| json!({"start_ns": p.window.start_ns, "end_ns": p.window.end_ns}))
        .collect();
    let mut metrics = Map::new();
    for (name, (meta, series)) in series {
        let series: Vec<Value> = series
            .into_iter()
            .map(|s| {
                let mut v = json!({"endpoint_url": s.endpoint});
                if !s.labels.is_empty() {
                    v["labels"] = Value::Object(
                        s.labels
                            .into_iter()
                            .map(|(k, x)| (k, Value::String(x)))
                            .collect(),
                    );
                }
                v["stats"] =
                    Value::Object(s.stats.into_iter().map(|(k, x)| (k, json!(x))).collect());
                if let Some(b) = s.buckets {
                    v["buckets"] = Value::Object(
                        b.into_iter()
                            .map(|(bound, c)| (le_label(bound), json!(c)))
                            .collect(),
                    );
                }
                v
            })
            .collect();
        let mut m = json!({"type": meta.kind.as_str(), "description": meta.help});
        if !meta.unit.is_empty() {
            m["unit"] = json!(meta.unit);
        }
        m["series"] = Value::Array(series);
        metrics.insert(name, m);
    }
    // kneepoint's extra: the server's state at each scrape, for plots over time.
    // One run after another (a level with --num-runs > 1): `run` says which.
    let timeline: Vec<Value> = parts
        .iter()
        .enumerate()
        .flat_map(|(run, part)| {
            crate::summary::concept_timeline(&part.timelines)
                .into_iter()
                .map(move |p| {
                    json!({"run": run, "t_ns": p.t_ns, "running": p.sample.running,
                           "waiting": p.sample.waiting, "kv_usage": p.sample.kv_usage,
                           "preemptions": p.preemptions})
                })
        })
        .collect();
    json!({
        "schema_version": SCHEMA_VERSION,
        "kneepoint_version": env!("CARGO_PKG_VERSION"),
        "summary": {
            "endpoints_configured": configured,
            "endpoints_successful": successful,
            "windows": windows,
            "window_s": summary.window_s,
            "endpoint_info": endpoint_info,
        },
        "concepts": summary.concepts,
        "timeline": timeline,
        "metrics": metrics,
    })
}

fn cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.4}")
    }
}

/// `server_metrics_export.csv`'s text: `#` comments, then a section per type (gauge, counter,
/// histogram) with `Endpoint,Type,Metric,Unit,<stats>,<labels>,Description[,buckets]`.
pub fn export_csv(parts: &[Part]) -> String {
    csv_of(&per_series(parts))
}

/// Above this many distinct label names in a section, labels go in one `labels` cell
/// (`k=v;…`) instead of a column each, so that a page with runaway labels stays a small file.
const MAX_LABEL_COLUMNS: usize = 64;

/// The CSV's sections and the statistic columns of each, in order.
fn section_stats() -> [(&'static str, Vec<String>); 3] {
    [
        (
            "gauge",
            kneepoint_core::metric::GAUGE_STATS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        ),
        ("counter", vec!["total".into(), "rate".into()]),
        ("histogram", {
            let mut v: Vec<String> = ["count", "count_rate", "sum", "sum_rate", "avg"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
            v.extend(
                kneepoint_metrics::PERCENTILES
                    .iter()
                    .map(|(l, _)| format!("{l}_estimate")),
            );
            v
        }),
    ]
}

fn csv_of(all: &PerSeries) -> String {
    let mut out = format!(
        "# kneepoint server metrics export (CSV)\n# kneepoint_version: {}\n# schema_version: {SCHEMA_VERSION}\n#\n",
        env!("CARGO_PKG_VERSION")
    );
    let sections = section_stats();
    let mut first = true;
    for (kind, stats) in sections {
        let rows: Vec<(&String, &Meta, &SeriesStats)> = all
            .iter()
            .filter(|(_, (m, _))| {
                let k = if m.kind == MetricType::Untyped {
                    "gauge"
                } else {
                    m.kind.as_str()
                };
                k == kind
            })
            .flat_map(|(n, (m, ss))| ss.iter().map(move |s| (n, m, s)))
            .collect();
        if rows.is_empty() {
            continue;
        }
        let mut label_keys: BTreeSet<&str> = rows
            .iter()
            .flat_map(|(_, _, s)| s.labels.iter().map(|(k, _)| k.as_str()))
            .collect();
        let one_cell = label_keys.len() > MAX_LABEL_COLUMNS;
        if one_cell {
            label_keys = BTreeSet::from(["labels"]);
        }
        if !first {
            out.push('\n');
        }
        first = false;
        let mut header = vec![
            "Endpoint".to_owned(),
            "Type".into(),
            "Metric".into(),
            "Unit".into(),
        ];
        header.extend(stats.iter().cloned());
        header.extend(label_keys.iter().map(|k| (*k).to_owned()));
        header.push("Description".into());
        if kind == "histogram" {
            header.push("buckets".into());
        }
        let _ = writeln!(
            out,
            "{}",
            header.iter().map(|h| cell(h)).collect::<Vec<_>>().join(",")
        );
        for (name, meta, s) in rows {
            let endpoint = s
                .endpoint
                .split("://")
                .nth(1)
                .unwrap_or(&s.endpoint)
                .trim_end_matches("/metrics");
            let mut row = vec![
                cell(endpoint),
                kind.to_owned(),
                cell(name),
                cell(&meta.unit),
            ];
            for st in &stats {
                row.push(
                    s.stats
                        .iter()
                        .find(|(k, _)| k == st)
                        .map(|(_, v)| number(*v))
                        .unwrap_or_default(),
                );
            }
            if one_cell {
                let text: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                row.push(cell(&text.join(";")));
            }
            for k in label_keys.iter().filter(|_| !one_cell) {
                row.push(
                    s.labels
                        .iter()
                        .find(|(a, _)| a == k)
                        .map(|(_, v)| cell(v))
                        .unwrap_or_default(),
                );
            }
            row.push(cell(&meta.help));
            if let Some(b) = &s.buckets {
                let text: Vec<String> = b
                    .iter()
                    .map(|(bound, c)| format!("{}={}", le_label(*bound), number(*c)))
                    .collect();
                row.push(cell(&text.join(";")));
            }
            let _ = writeln!(out, "{}", row.join(","));
        }
    }
    out
}

/// Writes `server_metrics_export.json` and `.csv` into `dir`.
pub fn write_exports(dir: &Path, parts: &[Part], summary: &ServerSummary) -> Result<(), Error> {
    let series = per_series(parts);
    let csv = csv_of(&series);
    let json = json_of(parts, summary, series);
    let bytes = serde_json::to_vec_pretty(&json).map_err(|source| Error::Json { source })?;
    let path = dir.join(folder::SERVER_METRICS_JSON);
    kneepoint_metrics::export::write_atomic(&path, &bytes).map_err(|source| Error::Write {
        path: path.clone(),
        source: Box::new(source),
    })?;
    let path = dir.join(folder::SERVER_METRICS_CSV);
    kneepoint_metrics::export::write_atomic(&path, csv.as_bytes()).map_err(|source| Error::Write {
        path: path.clone(),
        source: Box::new(source),
    })
}
