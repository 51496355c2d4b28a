//! A length sweep's curves: TTFT (p50, p95) against the prompt's input tokens with the fitted
//! prefill line above, ITL (p50, p95) against the same lengths below.

use plotters::prelude::*;

use super::{err, legend, linear_chart, marked_line, render_sized, span, Mark, PALETTE};
use crate::Error;

/// One length's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LengthCurvePoint {
    /// Input tokens (the measured mean).
    pub input_tokens: f64,
    /// TTFT p50, ms.
    pub ttft_p50_ms: Option<f64>,
    /// TTFT p95, ms.
    pub ttft_p95_ms: Option<f64>,
    /// ITL p50, ms.
    pub itl_p50_ms: Option<f64>,
    /// ITL p95, ms.
    pub itl_p95_ms: Option<f64>,
}

type Get = fn(&LengthCurvePoint) -> Option<f64>;

/// Draws `points` (sorted by length here) and, given `(intercept ms, ms per token, label)`,
/// the fitted line.
pub fn lengths_plot(
    points: &[LengthCurvePoint],
    fit: Option<(f64, f64, String)>,
) -> Result<String, Error> {
    const PLOT: &str = "length curves";
    let mut pts = points.to_vec();
    pts.sort_by(|a, b| a.input_tokens.total_cmp(&b.input_tokens));
    let (x0, x1) = span(pts.iter().map(|p| p.input_tokens), true);
    let (t0, t1) = span(
        pts.iter()
            .flat_map(|p| [p.ttft_p50_ms, p.ttft_p95_ms])
            .flatten(),
        true,
    );
    let (i0, i1) = span(
        pts.iter()
            .flat_map(|p| [p.itl_p50_ms, p.itl_p95_ms])
            .flatten(),
        true,
    );
    render_sized(PLOT, (760, 680), |root| {
        let (top, bottom) = root.split_vertically(400);
        let mut up = linear_chart(
            &top,
            PLOT,
            "TTFT against the prompt's length",
            (x0..x1, t0..t1),
            ("input tokens", "TTFT, ms"),
        )?;
        // p50 and p95 coincide where nothing queues: shapes apart as well as colours.
        let ttft: [(&str, Get, Mark); 2] = [
            ("TTFT p50", |p| p.ttft_p50_ms, Mark::Ring),
            ("TTFT p95", |p| p.ttft_p95_ms, Mark::Dot),
        ];
        for (i, (name, get, mark)) in ttft.into_iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let line = pts
                .iter()
                .filter_map(|p| Some((p.input_tokens, get(p)?)))
                .collect();
            marked_line(&mut up, line, (color, 2), mark, name, PLOT)?;
        }
        if let Some((intercept, per_token, label)) = fit {
            let color = PALETTE[2 % PALETTE.len()];
            let line = [x0.max(0.0), x1].map(|x| (x, intercept + per_token * x));
            up.draw_series(DashedLineSeries::new(line, 6, 4, color.stroke_width(2)))
                .map_err(err(PLOT))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        legend(&mut up, SeriesLabelPosition::UpperLeft, PLOT)?;
        let mut down = linear_chart(
            &bottom,
            PLOT,
            "",
            (x0..x1, i0..i1),
            ("input tokens", "ITL, ms"),
        )?;
        let itl: [(&str, Get, Mark); 2] = [
            ("ITL p50", |p| p.itl_p50_ms, Mark::Triangle),
            ("ITL p95", |p| p.itl_p95_ms, Mark::Cross),
        ];
        for (i, (name, get, mark)) in itl.into_iter().enumerate() {
            let color = PALETTE[(i + 3) % PALETTE.len()];
            let line = pts
                .iter()
                .filter_map(|p| Some((p.input_tokens, get(p)?)))
                .collect();
            marked_line(&mut down, line, (color, 2), mark, name, PLOT)?;
        }
        legend(&mut down, SeriesLabelPosition::UpperLeft, PLOT)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curves_and_the_fitted_line_are_drawn() {
        let p = |isl: f64, ttft: f64| LengthCurvePoint {
            input_tokens: isl,
            ttft_p50_ms: Some(ttft),
            ttft_p95_ms: Some(ttft * 1.1),
            itl_p50_ms: Some(10.0),
            itl_p95_ms: None,
        };
        let svg = lengths_plot(
            &[p(4096.0, 100.0), p(128.0, 21.0)],
            Some((20.0, 0.02, "fit: 50000 tokens/s".into())),
        )
        .unwrap();
        for text in [
            "TTFT against the prompt",
            "TTFT p95",
            "fit: 50000 tokens/s",
            "ITL p50",
        ] {
            assert!(svg.contains(text), "{text}");
        }
        // a series with no value draws no line, and no fit draws none
        let svg = lengths_plot(&[p(128.0, 21.0)], None).unwrap();
        assert!(!svg.contains("fit:"));
    }
}
