//! Plots of what the server reported. Per level: running and waiting requests, KV-cache usage
//! and preemptions over time, read from the `timeline` of `server_metrics_export.json`. Over the
//! levels: the client's TTFT beside the server's; their difference is the network and the
//! queueing in front of the engine.

use plotters::prelude::*;
use serde_json::Value;

use crate::plots::{
    err, legend, linear_chart, marked_line, render, span, tick, Mark, PALETTE, RED,
};
use crate::Error;

/// The server's state at one scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerPoint {
    /// Which run of the level (0 unless it was run several times).
    pub run: u64,
    /// Seconds since the run's first scrape.
    pub t_s: f64,
    /// Requests running.
    pub running: Option<f64>,
    /// Requests waiting.
    pub waiting: Option<f64>,
    /// KV-cache usage, 0-1.
    pub kv_usage: Option<f64>,
    /// Preemptions since the first scrape.
    pub preemptions: Option<f64>,
}

/// The points of a `server_metrics_export.json` document (none when it has no timeline).
pub fn read_timeline(doc: &Value) -> Vec<ServerPoint> {
    let Some(points) = doc.get("timeline").and_then(Value::as_array) else {
        return Vec::new();
    };
    let run = |p: &Value| p.get("run").and_then(Value::as_u64).unwrap_or(0);
    let mut t0: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for p in points {
        if let Some(t) = p.get("t_ns").and_then(Value::as_u64) {
            let first = t0.entry(run(p)).or_insert(t);
            *first = (*first).min(t);
        }
    }
    points
        .iter()
        .filter_map(|p| {
            let t = p.get("t_ns")?.as_u64()?;
            let f = |k: &str| p.get(k).and_then(Value::as_f64);
            let start = t0.get(&run(p)).copied().unwrap_or(t);
            Some(ServerPoint {
                run: run(p),
                t_s: t.saturating_sub(start) as f64 / 1e9,
                running: f("running"),
                waiting: f("waiting"),
                kv_usage: f("kv_usage"),
                preemptions: f("preemptions"),
            })
        })
        .collect()
}

type Getter = fn(&ServerPoint) -> Option<f64>;

/// One chart of `series` over time in `area`.
fn chart_over_time(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    (plot, caption, y_desc): (&'static str, String, &str),
    points: &[ServerPoint],
    series: &[(&str, Getter, RGBColor)],
) -> Result<(), Error> {
    let t1 = points.iter().map(|p| p.t_s).fold(0.0, f64::max).max(1e-3);
    let (y0, y1) = span(
        points
            .iter()
            .flat_map(|p| series.iter().filter_map(move |(_, get, _)| get(p))),
        true,
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t1, y0..y1)
        .map_err(err(plot))?;
    chart
        .configure_mesh()
        .x_desc("seconds since the level's first scrape")
        .y_desc(y_desc)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 13))
        .draw()
        .map_err(err(plot))?;
    let runs: std::collections::BTreeSet<u64> = points.iter().map(|p| p.run).collect();
    for &(name, get, color) in series {
        // One line per run (each from its own first scrape), one legend entry.
        let mut labelled = false;
        for run in &runs {
            let line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.run == *run)
                .filter_map(|p| get(p).map(|v| (p.t_s, v)))
                .collect();
            if line.is_empty() {
                continue;
            }
            let drawn = chart
                .draw_series(LineSeries::new(line, color.stroke_width(2)))
                .map_err(err(plot))?;
            if !labelled {
                labelled = true;
                drawn.label(name).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            }
        }
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight, plot)
}

/// Running and waiting requests (top), KV-cache usage and preemptions (bottom) over a level.
pub fn server_timeline(points: &[ServerPoint], title: &str) -> Result<String, Error> {
    const PLOT: &str = "server timeline";
    render(PLOT, |root| {
        let rows = root.split_evenly((2, 1));
        let requests: [(&str, Getter, RGBColor); 2] = [
            ("running", |p| p.running, PALETTE[0]),
            ("waiting", |p| p.waiting, PALETTE[1]),
        ];
        let caption = format!("Server: running and waiting — {title}");
        chart_over_time(&rows[0], (PLOT, caption, "requests"), points, &requests)?;
        let cache: [(&str, Getter, RGBColor); 2] = [
            (
                "KV-cache usage (%)",
                |p| p.kv_usage.map(|k| k * 100.0),
                PALETTE[2],
            ),
            ("preemptions (count)", |p| p.preemptions, RED),
        ];
        let caption = format!("Server: KV cache and preemptions — {title}");
        chart_over_time(&rows[1], (PLOT, caption, "% / count"), points, &cache)
    })
}

/// One level's TTFT as the client and the server saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtftPair {
    /// Concurrency.
    pub concurrency: u32,
    /// Client TTFT p50 / p95, ms.
    pub client: (Option<f64>, Option<f64>),
    /// Server TTFT p50 / p95 (histogram estimates), ms.
    pub server: (Option<f64>, Option<f64>),
}

/// Client and server TTFT (p50 and p95) against concurrency.
pub fn client_vs_server_ttft(levels: &[TtftPair]) -> Result<String, Error> {
    const PLOT: &str = "client vs server TTFT";
    let mut levels = levels.to_vec();
    levels.sort_by_key(|l| l.concurrency);
    let (x0, x1) = span(levels.iter().map(|l| f64::from(l.concurrency)), false);
    let (y0, y1) = span(
        levels
            .iter()
            .flat_map(|l| [l.client.0, l.client.1, l.server.0, l.server.1])
            .flatten(),
        true,
    );
    type PairGetter = fn(&TtftPair) -> Option<f64>;
    // Four shapes: client p50 and p95 can coincide (a level with no queue).
    let series: [(&str, PairGetter, RGBColor, u32, Mark); 4] = [
        ("client p50", |l| l.client.0, PALETTE[0], 2, Mark::Dot),
        ("client p95", |l| l.client.1, PALETTE[0], 1, Mark::Ring),
        ("server p50", |l| l.server.0, PALETTE[1], 2, Mark::Triangle),
        ("server p95", |l| l.server.1, PALETTE[1], 1, Mark::Cross),
    ];
    render(PLOT, |root| {
        let mut chart = linear_chart(
            root,
            PLOT,
            "TTFT: client vs server",
            (x0..x1, y0..y1),
            ("concurrency", "time to first token (ms)"),
        )?;
        for (name, get, color, width, mark) in series {
            let line: Vec<(f64, f64)> = levels
                .iter()
                .filter_map(|l| get(l).map(|v| (f64::from(l.concurrency), v)))
                .collect();
            if line.is_empty() {
                continue;
            }
            marked_line(&mut chart, line, (color, width), mark, name, PLOT)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, PLOT)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_plots_draw_their_series() {
        let doc = serde_json::json!({"timeline": [
            {"t_ns": 5_000_000_000u64, "running": 2.0, "waiting": 0.0, "kv_usage": 0.1, "preemptions": 0.0},
            {"t_ns": 6_000_000_000u64, "running": 8.0, "waiting": 3.0, "kv_usage": 0.9, "preemptions": 2.0},
            {"t_ns": 7_000_000_000u64, "running": null, "waiting": null, "kv_usage": null},
            {"run": 1, "t_ns": 9_000_000_000u64, "running": 1.0},
            {"run": 1, "t_ns": 9_500_000_000u64, "running": 4.0}
        ]});
        let pts = read_timeline(&doc);
        assert_eq!(pts.len(), 5);
        // A second run's times start from its own first scrape.
        assert_eq!((pts[3].run, pts[3].t_s, pts[4].t_s), (1, 0.0, 0.5));
        assert_eq!((pts[1].t_s, pts[1].waiting), (1.0, Some(3.0)));
        assert_eq!(pts[2].running, None);
        let svg = server_timeline(&pts, "concurrency 8").unwrap();
        assert!(svg.starts_with("<svg"));
        for label in [
            "running",
            "waiting",
            "KV-cache usage (%)",
            "preemptions (count)",
        ] {
            assert!(svg.contains(label), "{label}");
        }
        assert!(read_timeline(&serde_json::json!({})).is_empty());
        let svg = client_vs_server_ttft(&[
            TtftPair {
                concurrency: 1,
                client: (Some(10.0), Some(12.0)),
                server: (Some(8.0), Some(9.0)),
            },
            TtftPair {
                concurrency: 8,
                client: (Some(30.0), Some(50.0)),
                server: (None, None),
            },
        ])
        .unwrap();
        for label in ["client p50", "client p95", "server p50", "server p95"] {
            assert!(svg.contains(label), "{label}");
        }
    }
}
