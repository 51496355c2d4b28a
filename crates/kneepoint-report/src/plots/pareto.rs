//! The Pareto plot: output tokens/s per user against throughput per instance (or per GPU or
//! per dollar), one colour per candidate, the front joined by a step line, dominated levels
//! grey, levels that failed an SLA as red crosses (client-limited levels left out), the knee ringed, and a per-user speed limit
//! implied by an inter-token-latency (TPOT) SLA as a vertical line (1000 / its threshold: a
//! guide, since the SLA is on a percentile of ITL and the speed is a mean).

use kneepoint_planner::{ParetoFront, ParetoPoint};
use plotters::prelude::*;

use serde_json::Value;

use super::{err, legend, linear_chart, render, span, tick, GREY, RED};
use crate::artifact::{Artifact, RunKind};
use crate::Error;

/// The Pareto plot of a saved sweep or recommendation (its `pareto` entry), when it has one:
/// its caption and SVG.
pub(crate) fn pareto_of(a: &Artifact) -> Result<Option<(String, String)>, Error> {
    let Some(f) = a
        .doc
        .get("pareto")
        .and_then(|v| serde_json::from_value::<ParetoFront>(v.clone()).ok())
    else {
        return Ok(None);
    };
    let min_per_user = a
        .slas()
        .iter()
        .filter(|s| s.get("metric").and_then(Value::as_str) == Some("inter_token_latency"))
        .filter_map(|s| s.get("threshold")?.as_f64())
        .filter(|t| *t > 0.0)
        .map(|t| 1000.0 / t)
        .reduce(f64::max);
    let marks = ParetoMarks {
        knee: (a.kind == RunKind::Sweep)
            .then(|| a.curve("").knee)
            .flatten(),
        min_per_user,
    };
    Ok(Some((f.sentence(), pareto_plot(&f, &marks)?)))
}

/// What the plot marks besides the points.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParetoMarks {
    /// The knee's concurrency (a single sweep).
    pub knee: Option<u32>,
    /// The lowest per-user speed an inter-token-latency SLA allows (1000 / its threshold in ms).
    pub min_per_user: Option<f64>,
}

fn candidates(f: &ParetoFront) -> Vec<Option<&str>> {
    let mut names: Vec<Option<&str>> = Vec::new();
    for p in &f.points {
        if !names.contains(&p.candidate.as_deref()) {
            names.push(p.candidate.as_deref());
        }
    }
    names
}

/// The front of `f` drawn as an SVG document.
pub fn pareto_plot(f: &ParetoFront, marks: &ParetoMarks) -> Result<String, Error> {
    const PLOT: &str = "pareto";
    let y_of = |p: &ParetoPoint| p.throughput(f.basis);
    let pts: Vec<(&ParetoPoint, f64, f64)> = f
        .points
        .iter()
        .filter(|p| p.client_limited.is_none())
        .filter_map(|p| Some((p, p.per_user, y_of(p)?)))
        .filter(|(_, x, y)| x.is_finite() && y.is_finite())
        .collect();
    let (x0, x1) = span(
        pts.iter().map(|(_, x, _)| *x).chain(marks.min_per_user),
        true,
    );
    let (y0, y1) = span(pts.iter().map(|(_, _, y)| *y), true);
    let names = candidates(f);
    render(PLOT, |root| {
        let mut chart = linear_chart(
            root,
            PLOT,
            "Per-user speed against throughput (Pareto front)",
            (x0..x1, y0..y1),
            (f.per_user_label(), f.basis.label()),
        )?;
        if let Some(u) = marks.min_per_user {
            chart
                .draw_series(LineSeries::new(vec![(u, y0), (u, y1)], RED.stroke_width(2)))
                .map_err(err(PLOT))?
                .label(format!("TPOT SLA: at least {} tokens/s per user", tick(u)))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED.stroke_width(2)));
        }
        // the front, fastest per user first, as a staircase
        let mut front: Vec<(f64, f64)> = pts
            .iter()
            .filter(|(p, _, _)| p.on_front)
            .map(|(_, x, y)| (*x, *y))
            .collect();
        front.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut stairs = Vec::new();
        for w in front.windows(2) {
            stairs.push(w[0]);
            stairs.push((w[1].0, w[0].1));
        }
        if let Some(last) = front.last() {
            stairs.push(*last);
        }
        chart
            .draw_series(LineSeries::new(stairs, BLACK.mix(0.6).stroke_width(1)))
            .map_err(err(PLOT))?
            .label("Pareto front")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(1)));
        let all: Vec<&str> = names.iter().map(|n| n.unwrap_or("")).collect();
        for name in &names {
            let color = super::colour_of(&all, name.unwrap_or(""));
            let mine: Vec<&(&ParetoPoint, f64, f64)> = pts
                .iter()
                .filter(|(p, _, _)| p.candidate.as_deref() == *name)
                .collect();
            chart
                .draw_series(
                    mine.iter()
                        .filter(|(p, _, _)| p.meets_slas != Some(false))
                        .map(|(p, x, y)| {
                            let fill = if p.on_front {
                                color.to_rgba()
                            } else {
                                GREY.mix(0.5)
                            };
                            Circle::new((*x, *y), 5, fill.filled())
                        }),
                )
                .map_err(err(PLOT))?
                .label(name.unwrap_or("levels").to_owned())
                .legend(move |(x, y)| Circle::new((x + 9, y), 5, color.filled()));
            chart
                .draw_series(
                    mine.iter()
                        .filter(|(p, _, _)| p.meets_slas == Some(false))
                        .map(|(_, x, y)| Cross::new((*x, *y), 5, RED.stroke_width(2))),
                )
                .map_err(err(PLOT))?;
            let at: Vec<(f64, f64, u32)> = mine
                .iter()
                .map(|(p, x, y)| (*x, *y, p.concurrency))
                .collect();
            chart
                .draw_series(
                    super::merged_labels(&at, (x1 - x0, y1 - y0))
                        .into_iter()
                        .map(|(x, y, text)| {
                            EmptyElement::at((x, y))
                                + Text::new(
                                    text,
                                    (6, -16),
                                    ("sans-serif", 13).into_font().color(&GREY),
                                )
                        }),
                )
                .map_err(err(PLOT))?;
        }
        if let Some(k) = marks.knee {
            let at = pts
                .iter()
                .filter(|(p, _, _)| p.concurrency == k && p.candidate.is_none());
            chart
                .draw_series(at.map(|(_, x, y)| Circle::new((*x, *y), 10, BLACK.stroke_width(2))))
                .map_err(err(PLOT))?
                .label(format!("knee ({k})"))
                .legend(|(x, y)| Circle::new((x + 9, y), 6, BLACK.stroke_width(2)));
        }
        legend(&mut chart, SeriesLabelPosition::LowerLeft, PLOT)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_planner::{pareto_front, ParetoBasis};

    #[test]
    fn the_plot_draws_every_level_and_the_marks() {
        let points = vec![
            ParetoPoint::new(1, 60.0, 60.0),
            ParetoPoint::new(8, 50.0, 400.0),
            ParetoPoint::new(64, 12.0, 1200.0).meets_slas(Some(false)),
            ParetoPoint::new(128, 9.0, 1100.0),
        ];
        let f = pareto_front(points, ParetoBasis::Instance, false);
        let svg = pareto_plot(
            &f,
            &ParetoMarks {
                knee: Some(8),
                min_per_user: Some(20.0),
            },
        )
        .unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "Pareto front",
            "knee (8)",
            "TPOT SLA: at least 20 tokens/s per user",
            ">\n128\n<",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        // the dominated level (128) is a faded grey dot, the failing one (64) a red cross: red
        // strokes stay with the SLA line left out, and none without a failing level
        assert_eq!(svg.matches("opacity=\"0.5\" fill=\"#787878\"").count(), 1);
        let red = "stroke=\"#D62728\"";
        let plain = pareto_plot(&f, &ParetoMarks::default()).unwrap();
        assert!(plain.contains(red), "no red cross");
        let passing: Vec<ParetoPoint> = f
            .points
            .iter()
            .cloned()
            .map(|p| p.meets_slas(None))
            .collect();
        let g = pareto_front(passing, ParetoBasis::Instance, false);
        assert!(!pareto_plot(&g, &ParetoMarks::default())
            .unwrap()
            .contains(red));
    }
}
