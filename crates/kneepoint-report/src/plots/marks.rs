//! Lines with point marks of different shapes and sizes, so that series which coincide (p50,
//! p90 and p99 of a level with no tail; client and server TTFT) stay distinguishable: a ring
//! around a triangle around a dot reads as three series on one point.

use plotters::coord::CoordTranslate;
use plotters::prelude::*;

use super::err;
use crate::Error;

/// A point mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// A small filled dot.
    Dot,
    /// A large hollow ring (drawn around the others).
    Ring,
    /// A mid-sized hollow triangle.
    Triangle,
    /// A cross.
    Cross,
}

/// Draws `points` as a line of `color` (`width` pixels) with `mark` on each point, named
/// `name` in the legend (swatch: the line and the mark).
pub(crate) fn marked_line<'a, 'b: 'a, CT>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
    points: Vec<(f64, f64)>,
    (color, width): (RGBColor, u32),
    mark: Mark,
    name: &str,
    plot: &'static str,
) -> Result<(), Error>
where
    CT: CoordTranslate<From = (f64, f64)>,
{
    let line = color.stroke_width(width);
    chart
        .draw_series(LineSeries::new(points.clone(), line))
        .map_err(err(plot))?
        .label(name)
        .legend(move |(x, y)| {
            // The legend's marks as paths (one element type for every shape).
            EmptyElement::at((x, y))
                + PathElement::new(vec![(0, 0), (18, 0)], line)
                + PathElement::new(outline(mark), color.stroke_width(2))
        });
    let drawn = match mark {
        Mark::Dot => chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled()))),
        Mark::Ring => chart.draw_series(
            points
                .iter()
                .map(|&p| Circle::new(p, 7, color.stroke_width(2))),
        ),
        Mark::Triangle => chart.draw_series(
            points
                .iter()
                .map(|&p| TriangleMarker::new(p, 5, color.stroke_width(2))),
        ),
        Mark::Cross => chart.draw_series(
            points
                .iter()
                .map(|&p| Cross::new(p, 4, color.stroke_width(2))),
        ),
    };
    drawn.map_err(err(plot))?;
    Ok(())
}

/// A mark's outline around `(9, 0)` (the middle of a legend swatch), as one path.
fn outline(mark: Mark) -> Vec<(i32, i32)> {
    let polygon = |r: f64, sides: u32| -> Vec<(i32, i32)> {
        (0..=sides)
            .map(|k| {
                let a = std::f64::consts::TAU * f64::from(k) / f64::from(sides)
                    - std::f64::consts::FRAC_PI_2;
                (
                    9 + (r * a.cos()).round() as i32,
                    (r * a.sin()).round() as i32,
                )
            })
            .collect()
    };
    match mark {
        Mark::Dot => polygon(1.5, 8),
        Mark::Ring => polygon(6.0, 12),
        Mark::Triangle => polygon(5.0, 3),
        Mark::Cross => vec![(5, -4), (13, 4), (9, 0), (5, 4), (13, -4)],
    }
}

/// Labels for points `(x, y, concurrency)`: points closer than 3 % of the axes' spans to an
/// earlier one share its label (`256, 1024`), instead of drawing one number over the other.
pub(crate) fn merged_labels(
    points: &[(f64, f64, u32)],
    (x_span, y_span): (f64, f64),
) -> Vec<(f64, f64, String)> {
    let near = |a: &(f64, f64, u32), b: &(f64, f64, u32)| {
        (a.0 - b.0).abs() <= 0.03 * x_span && (a.1 - b.1).abs() <= 0.03 * y_span
    };
    let mut groups: Vec<((f64, f64, u32), Vec<u32>)> = Vec::new();
    for p in points {
        match groups.iter_mut().find(|(first, _)| near(first, p)) {
            Some((_, members)) => members.push(p.2),
            None => groups.push((*p, vec![p.2])),
        }
    }
    groups
        .into_iter()
        .map(|((x, y, _), mut members)| {
            members.sort_unstable();
            members.dedup();
            let text = members
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            (x, y, text)
        })
        .collect()
}

/// A logarithmic axis's tick label: only at 1, 2 and 5 times a power of ten (the others are
/// left blank, so that `900` and `1000` never run together).
pub(crate) fn log_tick(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let decade = 10f64.powf(v.log10().floor());
    let lead = v / decade;
    if [1.0, 2.0, 5.0].iter().any(|m| (lead - m).abs() < 1e-6) {
        super::tick(v)
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_on_one_spot_share_one_label() {
        let labels = merged_labels(
            &[(1.0, 100.0, 256), (9.0, 100.0, 64), (1.01, 100.5, 1024)],
            (10.0, 100.0),
        );
        let texts: Vec<&str> = labels.iter().map(|l| l.2.as_str()).collect();
        assert_eq!(texts, ["256, 1024", "64"]);
    }

    #[test]
    fn log_ticks_are_one_two_five() {
        let shown: Vec<String> = [100.0, 200.0, 300.0, 500.0, 900.0, 1000.0]
            .iter()
            .map(|v| log_tick(*v))
            .collect();
        assert_eq!(shown[0], super::super::tick(100.0));
        assert!(shown[2].is_empty() && shown[4].is_empty(), "{shown:?}");
        assert!(!shown[5].is_empty());
    }
}
