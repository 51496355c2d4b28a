//! One figure across runs (the results store's dashboard): the runs oldest to newest along x,
//! each value with its 90 % interval as a bar where the run measured one.

use plotters::prelude::*;

use super::{err, render_sized, span, tick, PALETTE};
use crate::Error;

/// One run's value of the figure.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendPoint {
    /// The run's short name under its point (an id's first digits, a date).
    pub label: String,
    /// The value.
    pub value: f64,
    /// Its 90 % interval, when the run measured one.
    pub interval: Option<[f64; 2]>,
}

/// `points` (oldest first) as a line with interval bars, titled `title`, the value in `unit`.
pub fn trend_plot(points: &[TrendPoint], title: &str, unit: &str) -> Result<String, Error> {
    const PLOT: &str = "trend";
    let n = points.len().max(1) as f64;
    let (y0, y1) = span(
        points
            .iter()
            .flat_map(|p| {
                [
                    Some(p.value),
                    p.interval.map(|i| i[0]),
                    p.interval.map(|i| i[1]),
                ]
            })
            .flatten(),
        true,
    );
    render_sized(PLOT, (620, 340), |root| {
        // x is the run's place; its tick is the run's name, and only whole places have one
        let name = |v: &f64| {
            let i = v.round();
            if (v - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            points
                .get(i as usize)
                .map(|p| p.label.clone())
                .unwrap_or_default()
        };
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5..n - 0.5, y0..y1)
            .map_err(err(PLOT))?;
        chart
            .configure_mesh()
            .x_labels(points.len().clamp(1, 12) * 2 + 1)
            .x_label_formatter(&name)
            .y_label_formatter(&|v| tick(*v))
            .x_desc("run (oldest to newest)")
            .y_desc(unit)
            .disable_x_mesh()
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(err(PLOT))?;
        let at = |i: usize| i as f64;
        let color = PALETTE[0];
        chart
            .draw_series(LineSeries::new(
                points.iter().enumerate().map(|(i, p)| (at(i), p.value)),
                color.stroke_width(2),
            ))
            .map_err(err(PLOT))?;
        chart
            .draw_series(points.iter().enumerate().filter_map(|(i, p)| {
                let [lo, hi] = p.interval?;
                Some(PathElement::new(
                    vec![(at(i), lo), (at(i), hi)],
                    color.mix(0.5).stroke_width(6),
                ))
            }))
            .map_err(err(PLOT))?;
        chart
            .draw_series(
                points
                    .iter()
                    .enumerate()
                    .map(|(i, p)| Circle::new((at(i), p.value), 4, color.filled())),
            )
            .map_err(err(PLOT))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trend_draws_each_run_and_its_interval() {
        let pts = vec![
            TrendPoint {
                label: "a1b2".into(),
                value: 1000.0,
                interval: Some([950.0, 1040.0]),
            },
            TrendPoint {
                label: "c3d4".into(),
                value: 700.0,
                interval: None,
            },
        ];
        let svg = trend_plot(&pts, "output tokens/s at the operating level", "tokens/s").unwrap();
        assert!(svg.contains("output tokens/s at the operating level"));
        assert!(svg.contains("a1b2") && svg.contains("c3d4"));
        assert!(trend_plot(&[], "empty", "ms").is_ok());
    }
}
