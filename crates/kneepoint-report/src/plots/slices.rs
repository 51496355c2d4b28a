//! A level over time, slice by slice (`--slice-s`): output tokens/s above, mean TTFT and mean
//! and p99 request latency below, against seconds from the level's start.

use plotters::prelude::*;
use serde_json::Value;

use super::{err, labelled_line, legend, linear_chart, render, span, PALETTE};
use crate::Error;

/// One slice's figures, read from `profile_export_aiperf_timeslices.json`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlicePoint {
    /// The slice's middle, seconds from the level's start.
    pub t_s: f64,
    /// Output tokens/s.
    pub throughput: f64,
    /// Mean TTFT, ms.
    pub ttft_avg_ms: Option<f64>,
    /// Mean request latency, ms.
    pub e2e_avg_ms: Option<f64>,
    /// p99 request latency, ms.
    pub e2e_p99_ms: Option<f64>,
}

/// The slices of a saved timeslice document (empty when it has none).
pub fn read_slices(doc: &Value) -> Vec<SlicePoint> {
    let Some(list) = doc.get("timeslices").and_then(Value::as_array) else {
        return Vec::new();
    };
    let t0 = list
        .first()
        .and_then(|s| s.get("start_ns")?.as_u64())
        .unwrap_or(0);
    list.iter()
        .filter_map(|s| {
            let a = s.get("start_ns")?.as_u64()?;
            let b = s.get("end_ns")?.as_u64()?;
            let f = |m: &str, q: &str| s.get(m)?.get(q)?.as_f64();
            Some(SlicePoint {
                t_s: ((a + b) / 2).saturating_sub(t0) as f64 / 1e9,
                throughput: f("output_token_throughput", "avg").unwrap_or(0.0),
                ttft_avg_ms: f("time_to_first_token", "avg"),
                e2e_avg_ms: f("request_latency", "avg"),
                e2e_p99_ms: f("request_latency", "p99"),
            })
        })
        .collect()
}

/// The two charts of `points`, titled `title`.
pub fn slices_plot(points: &[SlicePoint], title: &str) -> Result<String, Error> {
    const PLOT: &str = "time slices";
    let (x0, x1) = span(points.iter().map(|p| p.t_s), true);
    let (t0, t1) = span(points.iter().map(|p| p.throughput), true);
    let (l0, l1) = span(
        points
            .iter()
            .flat_map(|p| [p.ttft_avg_ms, p.e2e_avg_ms, p.e2e_p99_ms])
            .flatten(),
        true,
    );
    render(PLOT, |root| {
        let (top, bottom) = root.split_vertically(220);
        let mut up = linear_chart(
            &top,
            PLOT,
            &format!("Per time slice, {title}"),
            (x0..x1, t0..t1),
            ("seconds from the level's start", "output tokens/s"),
        )?;
        up.draw_series(LineSeries::new(
            points.iter().map(|p| (p.t_s, p.throughput)),
            PALETTE[0].stroke_width(2),
        ))
        .map_err(err(PLOT))?;
        let mut down = linear_chart(
            &bottom,
            PLOT,
            "",
            (x0..x1, l0..l1),
            ("seconds from the level's start", "ms"),
        )?;
        type Get = fn(&SlicePoint) -> Option<f64>;
        let series: [(&str, Get); 3] = [
            ("mean TTFT", |p| p.ttft_avg_ms),
            ("mean request latency", |p| p.e2e_avg_ms),
            ("p99 request latency", |p| p.e2e_p99_ms),
        ];
        for (i, (name, get)) in series.into_iter().enumerate() {
            let color = PALETTE[(i + 1) % PALETTE.len()];
            let line = points.iter().filter_map(|p| Some((p.t_s, get(p)?)));
            labelled_line(&mut down, line, color, name, PLOT)?;
        }
        legend(&mut down, SeriesLabelPosition::UpperLeft, PLOT)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_are_read_from_aiperf_s_shape_and_drawn() {
        let doc = serde_json::json!({"timeslices": [
            {"start_ns": 1_000_000_000u64, "end_ns": 2_000_000_000u64,
             "output_token_throughput": {"unit": "tokens/sec", "avg": 900.0},
             "time_to_first_token": {"unit": "ms", "avg": 20.0},
             "request_latency": {"unit": "ms", "avg": 300.0, "p99": 420.0}},
            {"start_ns": 2_000_000_000u64, "end_ns": 3_000_000_000u64, "is_complete": false,
             "output_token_throughput": {"unit": "tokens/sec", "avg": 700.0},
             "request_latency": {"unit": "ms", "avg": 380.0, "p99": 500.0}}
        ]});
        let pts = read_slices(&doc);
        assert_eq!(pts.len(), 2);
        assert!((pts[0].t_s - 0.5).abs() < 1e-9 && (pts[1].t_s - 1.5).abs() < 1e-9);
        assert_eq!(pts[1].ttft_avg_ms, None);
        let svg = slices_plot(&pts, "concurrency 8").unwrap();
        assert!(
            svg.contains("Per time slice, concurrency 8") && svg.contains("p99 request latency")
        );
    }
}
