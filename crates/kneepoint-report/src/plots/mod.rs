//! The plots, as SVG strings drawn with `plotters` (its SVG backend only: no fonts, no C
//! libraries; text is left to the viewer's sans-serif font).

use kneepoint_core::{Phase, RequestRecord};
use kneepoint_metrics::{quantile_sorted, RequestMetrics};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::Error;

const SIZE: (u32, u32) = (760, 440);
pub(crate) const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];
pub(crate) const RED: RGBColor = RGBColor(214, 39, 40);
pub(crate) const GREY: RGBColor = RGBColor(120, 120, 120);

pub use crate::curve::{Curve, CurvePoint};

mod lengths;
mod marks;
mod pareto;
mod slices;
mod trend;
pub use lengths::{lengths_plot, LengthCurvePoint};
pub(crate) use marks::{log_tick, marked_line, merged_labels, Mark};
pub(crate) use pareto::pareto_of;
pub use pareto::{pareto_plot, ParetoMarks};
pub use slices::{read_slices, slices_plot, SlicePoint};
pub use trend::{trend_plot, TrendPoint};

/// A plot file: its name under `plots/` and its SVG.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// File name (under `plots/`).
    pub file: String,
    /// A caption for people.
    pub title: String,
    /// The SVG document.
    pub svg: String,
}

pub(crate) fn err<E: std::fmt::Display>(plot: &'static str) -> impl Fn(E) -> Error {
    move |e| Error::Plot {
        plot,
        message: e.to_string(),
    }
}

/// Milliseconds or seconds, whichever reads better for values up to `max_ms`.
struct TimeUnit {
    ms: f64,
    name: &'static str,
}

impl TimeUnit {
    fn for_max(max_ms: f64) -> TimeUnit {
        if max_ms >= 2000.0 {
            TimeUnit {
                ms: 1000.0,
                name: "s",
            }
        } else {
            TimeUnit {
                ms: 1.0,
                name: "ms",
            }
        }
    }
}

/// The colour of series `name` among `names`: by its place in their sorted order, so that one
/// candidate has one colour in every plot whatever order each plot lists them in.
pub(crate) fn colour_of(names: &[&str], name: &str) -> RGBColor {
    let mut sorted: Vec<&str> = names.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let i = sorted.iter().position(|n| *n == name).unwrap_or(0);
    PALETTE[i % PALETTE.len()]
}

/// An axis tick: no trailing `.0`, few digits; a million and more as `12M` (a label of eight
/// digits runs into the axis's description).
pub(crate) fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        let s = format!("{:.1}", v / 1e6);
        format!("{}M", s.strip_suffix(".0").unwrap_or(&s))
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        let s = format!("{v:.1}");
        s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
    } else if a >= 0.1 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        format!("{v:.3}")
    }
}

/// `(lo, hi)` padded by 5 %, never empty.
pub(crate) fn span(values: impl Iterator<Item = f64>, zero_floor: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if zero_floor {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-9 {
        hi = lo + lo.abs().max(1.0);
    }
    let pad = (hi - lo) * 0.05;
    (
        if zero_floor && lo >= 0.0 {
            lo
        } else {
            lo - pad
        },
        hi + pad,
    )
}

/// A chart on `root` with linear axes, in the report's style (caption, margins, mesh, tick
/// labels, axis descriptions).
pub(crate) fn linear_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    plot: &'static str,
    caption: &str,
    (x, y): (std::ops::Range<f64>, std::ops::Range<f64>),
    (x_desc, y_desc): (&str, &str),
) -> Result<
    ChartContext<
        'a,
        SVGBackend<'b>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    Error,
> {
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)
        .map_err(err(plot))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(err(plot))?;
    Ok(chart)
}

/// Draws `chart`'s series labels at `at`, in the report's style (a light box, grey border).
pub(crate) fn legend<'a, 'b: 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
    at: SeriesLabelPosition,
    plot: &'static str,
) -> Result<(), Error> {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(GREY)
        .draw()
        .map_err(err(plot))
}

/// Draws `points` as a line of `color`, with `name` and a swatch in the chart's legend.
pub(crate) fn labelled_line<'a, 'b: 'a>(
    chart: &mut ChartContext<
        'a,
        SVGBackend<'b>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    points: impl IntoIterator<Item = (f64, f64)>,
    color: RGBColor,
    name: &str,
    plot: &'static str,
) -> Result<(), Error> {
    chart
        .draw_series(LineSeries::new(points, color.stroke_width(2)))
        .map_err(err(plot))?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    Ok(())
}

pub(crate) fn render(
    plot: &'static str,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), Error>,
) -> Result<String, Error> {
    render_sized(plot, SIZE, draw)
}

/// [`render`] on a canvas of `size` pixels (two charts stacked need more height).
pub(crate) fn render_sized(
    plot: &'static str,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), Error>,
) -> Result<String, Error> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(err(plot))?;
        draw(&root)?;
        root.present().map_err(err(plot))?;
    }
    Ok(out)
}

fn sorted_points(c: &Curve) -> Vec<&CurvePoint> {
    let mut p: Vec<&CurvePoint> = c.points.iter().collect();
    p.sort_by_key(|p| p.concurrency);
    p
}

/// Output throughput against p99 request latency, one line per curve, each level labelled with
/// its concurrency; the knee ringed, the operating point filled, levels that fail the SLAs in
/// red, and the p99 latency SLA as a vertical line.
pub fn throughput_vs_latency(curves: &[Curve], sla_e2e_ms: Option<f64>) -> Result<String, Error> {
    const PLOT: &str = "throughput vs latency";
    let unit = TimeUnit::for_max(
        curves
            .iter()
            .flat_map(|c| c.points.iter().filter_map(|p| p.e2e_p99_ms))
            .fold(0.0, f64::max),
    );
    let xs = curves
        .iter()
        .flat_map(|c| c.points.iter().filter_map(|p| p.e2e_p99_ms))
        .chain(sla_e2e_ms)
        .map(|ms| ms / unit.ms);
    let ys = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.throughput));
    let (x0, x1) = span(xs, true);
    let (y0, y1) = span(ys, true);
    render(PLOT, |root| {
        let x_desc = format!("p99 request latency ({})", unit.name);
        let mut chart = linear_chart(
            root,
            PLOT,
            "Output throughput vs p99 request latency",
            (x0..x1, y0..y1),
            (&x_desc, "output tokens/s"),
        )?;
        if let Some(sla) = sla_e2e_ms {
            let x = sla / unit.ms;
            chart
                .draw_series(LineSeries::new(vec![(x, y0), (x, y1)], RED.stroke_width(2)))
                .map_err(err(PLOT))?
                .label(format!("p99 latency SLA {} {}", tick(x), unit.name))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED.stroke_width(2)));
        }
        let names: Vec<&str> = curves.iter().map(|c| c.name.as_str()).collect();
        for c in curves {
            let color = colour_of(&names, &c.name);
            let pts: Vec<(f64, f64, &CurvePoint)> = sorted_points(c)
                .into_iter()
                .filter_map(|p| p.e2e_p99_ms.map(|l| (l / unit.ms, p.throughput, p)))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|(x, y, _)| (*x, *y)),
                    color.stroke_width(2),
                ))
                .map_err(err(PLOT))?
                .label(c.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|(x, y, p)| {
                    let fill = if p.meets_slas == Some(false) {
                        RED
                    } else {
                        color
                    };
                    Circle::new((*x, *y), 4, fill.filled())
                }))
                .map_err(err(PLOT))?;
            let at: Vec<(f64, f64, u32)> = pts
                .iter()
                .map(|(x, y, p)| (*x, *y, p.concurrency))
                .collect();
            chart
                .draw_series(merged_labels(&at, (x1 - x0, y1 - y0)).into_iter().map(
                    |(x, y, text)| {
                        EmptyElement::at((x, y))
                            + Text::new(text, (6, -16), ("sans-serif", 14).into_font().color(&GREY))
                    },
                ))
                .map_err(err(PLOT))?;
            let marks = pts.iter().filter(|(_, _, p)| {
                Some(p.concurrency) == c.knee || Some(p.concurrency) == c.chosen
            });
            chart
                .draw_series(marks.map(|(x, y, p)| {
                    if Some(p.concurrency) == c.knee {
                        Circle::new((*x, *y), 9, BLACK.stroke_width(2))
                    } else {
                        Circle::new((*x, *y), 7, color.stroke_width(2))
                    }
                }))
                .map_err(err(PLOT))?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight, PLOT)?;
        Ok(())
    })
}

/// Request latency p50, p90 and p99 against concurrency (logarithmic when the levels span more
/// than a factor of 4).
pub fn latency_percentiles(curve: &Curve) -> Result<String, Error> {
    const PLOT: &str = "latency percentiles";
    let pts = sorted_points(curve);
    let cs: Vec<f64> = pts
        .iter()
        .map(|p| f64::from(p.concurrency.max(1)))
        .collect();
    let (c0, c1) = (
        cs.first().copied().unwrap_or(1.0),
        cs.last().copied().unwrap_or(2.0),
    );
    let unit = TimeUnit::for_max(pts.iter().filter_map(|p| p.e2e_p99_ms).fold(0.0, f64::max));
    let (y0, y1) = span(
        pts.iter()
            .flat_map(|p| [p.e2e_p50_ms, p.e2e_p90_ms, p.e2e_p99_ms])
            .flatten()
            .map(|ms| ms / unit.ms),
        true,
    );
    type Getter = fn(&CurvePoint) -> Option<f64>;
    // Shapes apart as well as colours: at a level with no tail the three coincide.
    let series: [(&str, Getter, RGBColor, Mark); 3] = [
        ("p50", |p| p.e2e_p50_ms, PALETTE[0], Mark::Ring),
        ("p90", |p| p.e2e_p90_ms, PALETTE[1], Mark::Triangle),
        ("p99", |p| p.e2e_p99_ms, RED, Mark::Dot),
    ];
    let log = c1 / c0 > 4.0;
    render(PLOT, |root| {
        let caption = format!("Request latency percentiles — {}", curve.name);
        let mut builder = ChartBuilder::on(root);
        builder
            .caption(caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(70);
        macro_rules! draw_with {
            ($chart:expr) => {{
                let mut chart = $chart;
                let x_tick = |v: &f64| if log { log_tick(*v) } else { tick(*v) };
                chart
                    .configure_mesh()
                    .x_desc("concurrency")
                    .y_desc(format!("request latency ({})", unit.name))
                    .x_label_formatter(&x_tick)
                    .y_label_formatter(&|v| tick(*v))
                    .label_style(("sans-serif", 14))
                    .axis_desc_style(("sans-serif", 15))
                    // a log axis's minor lines crowd into a grey band near each decade
                    .light_line_style(if log {
                        TRANSPARENT
                    } else {
                        RGBColor(235, 235, 235).into()
                    })
                    .draw()
                    .map_err(err(PLOT))?;
                for (name, get, color, mark) in series {
                    let line: Vec<(f64, f64)> = pts
                        .iter()
                        .filter_map(|p| {
                            get(p).map(|v| (f64::from(p.concurrency.max(1)), v / unit.ms))
                        })
                        .collect();
                    marked_line(&mut chart, line, (color, 2), mark, name, PLOT)?;
                }
                legend(&mut chart, SeriesLabelPosition::UpperLeft, PLOT)?;
            }};
        }
        if log {
            draw_with!(builder
                .build_cartesian_2d((c0 * 0.8..c1 * 1.25).log_scale(), y0..y1)
                .map_err(err(PLOT))?);
        } else {
            let (x0, x1) = span(cs.iter().copied(), false);
            draw_with!(builder
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(err(PLOT))?);
        }
        Ok(())
    })
}

/// `(seconds since the level's first measured request, TTFT ms, ok)` per measured request.
fn ttft_points(records: &[RequestRecord]) -> Vec<(f64, f64, bool)> {
    let measured: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.phase == Phase::Profiling)
        .collect();
    let t0 = measured
        .iter()
        .map(|r| r.origin_unix_ns + r.start_ns)
        .min()
        .unwrap_or(0);
    measured
        .iter()
        .map(|r| {
            let at = (r.origin_unix_ns + r.start_ns).saturating_sub(t0) as f64 / 1e9;
            match RequestMetrics::of(r).ttft_ms.filter(|_| r.is_ok()) {
                Some(t) => (at, t, true),
                None => (at, 0.0, false),
            }
        })
        .collect()
}

/// Each measured request's TTFT against its start time; failed requests as red crosses on the
/// time axis.
pub fn ttft_timeline(records: &[RequestRecord], title: &str) -> Result<String, Error> {
    const PLOT: &str = "TTFT timeline";
    let pts = ttft_points(records);
    let (x0, x1) = span(pts.iter().map(|p| p.0), true);
    let (y0, y1) = span(pts.iter().filter(|p| p.2).map(|p| p.1), true);
    render(PLOT, |root| {
        let mut chart = linear_chart(
            root,
            PLOT,
            &format!("TTFT per request — {title}"),
            (x0..x1, y0..y1),
            (
                "request start (s into the level)",
                "time to first token (ms)",
            ),
        )?;
        chart
            .draw_series(
                pts.iter()
                    .filter(|p| p.2)
                    .map(|&(x, y, _)| Circle::new((x, y), 2, PALETTE[0].mix(0.6).filled())),
            )
            .map_err(err(PLOT))?
            .label("succeeded")
            .legend(|(x, y)| Circle::new((x + 8, y), 3, PALETTE[0].filled()));
        let failed = pts.iter().filter(|p| !p.2).count();
        if failed > 0 {
            chart
                .draw_series(
                    pts.iter()
                        .filter(|p| !p.2)
                        .map(|&(x, y, _)| Cross::new((x, y), 4, RED.stroke_width(2))),
                )
                .map_err(err(PLOT))?
                .label(format!("failed ({failed})"))
                .legend(|(x, y)| Cross::new((x + 8, y), 4, RED.stroke_width(2)));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, PLOT)?;
        Ok(())
    })
}

/// The distribution of TTFT over a level's successful requests (40 bins), with p50 and p99
/// marked.
pub fn ttft_histogram(records: &[RequestRecord], title: &str) -> Result<String, Error> {
    const PLOT: &str = "TTFT distribution";
    const BINS: usize = 40;
    let mut v: Vec<f64> = ttft_points(records)
        .into_iter()
        .filter(|p| p.2)
        .map(|p| p.1)
        .collect();
    v.sort_unstable_by(f64::total_cmp);
    let (lo, hi) = match (v.first(), v.last()) {
        (Some(&a), Some(&b)) if b > a => (a, b),
        (Some(&a), _) => (a, a + 1.0),
        _ => (0.0, 1.0),
    };
    let width = (hi - lo) / BINS as f64;
    let mut counts = [0usize; BINS];
    for x in &v {
        let i = (((x - lo) / width) as usize).min(BINS - 1);
        counts[i] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(0).max(1) as f64 * 1.1;
    render(PLOT, |root| {
        let mut chart = linear_chart(
            root,
            PLOT,
            &format!("TTFT distribution — {title}"),
            (lo..hi, 0.0..top),
            ("time to first token (ms)", "requests"),
        )?;
        chart
            .draw_series(counts.iter().enumerate().map(|(i, &n)| {
                let x = lo + width * i as f64;
                Rectangle::new(
                    [(x, 0.0), (x + width, n as f64)],
                    PALETTE[0].mix(0.7).filled(),
                )
            }))
            .map_err(err(PLOT))?;
        for (label, q, color) in [("p50", 0.5, PALETTE[2]), ("p99", 0.99, RED)] {
            if let Some(x) = quantile_sorted(&v, q) {
                chart
                    .draw_series(LineSeries::new(
                        vec![(x, 0.0), (x, top)],
                        color.stroke_width(2),
                    ))
                    .map_err(err(PLOT))?
                    .label(format!("{label} {x:.1} ms"))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, PLOT)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests;
