//! The results store as text: `kneepoint history`'s table of runs and `kneepoint check`'s
//! table of figures, for any tool that prints them.

use std::fmt::Write as _;

use crate::{CheckReport, RunRecord};

/// A 90 % interval as ` [lo–hi]` (nothing without one).
fn interval(i: Option<[f64; 2]>) -> String {
    i.map_or_else(String::new, |[lo, hi]| format!(" [{lo:.1}–{hi:.1}]"))
}

impl CheckReport {
    /// One line per figure: both values with their 90 % intervals, the change, the verdict
    /// (what `kneepoint check` prints).
    pub fn table(&self) -> String {
        let r = self;
        let mut out = format!(
            "baseline {} against run {} (fails beyond {:.1} % worse, when the intervals say it is real)\n",
            r.baseline,
            r.run,
            r.max_regression * 100.0
        );
        let _ = writeln!(
            out,
            "{:<28} {:<13} {:>26} {:>26} {:>9}  verdict",
            "level", "figure", "baseline [90 %]", "run [90 %]", "worse by"
        );
        for f in &r.figures {
            let verdict = match (f.regressed, f.z) {
                (true, _) => "REGRESSED",
                (false, None) if r.point_comparisons => "ok (values alone)",
                (false, None) => "not judged (no interval)",
                (false, Some(_)) if f.worse_by > r.max_regression => "within noise",
                _ => "ok",
            };
            let _ = writeln!(
                out,
                "{:<28} {:<13} {:>26} {:>26} {:>8.1}%  {verdict}",
                f.level,
                f.figure,
                format!("{:.1}{}", f.baseline, interval(f.baseline_interval)),
                format!("{:.1}{}", f.run, interval(f.run_interval)),
                f.worse_by * 100.0,
            );
        }
        out
    }
}

/// The runs as aligned text, newest first as given.
pub fn history_table(runs: &[RunRecord]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16}  {:<16}  {:<12}  {:<11}  {:<32}  {:<24}  {:>7}  {:>10}  {:>9}  {:>9}  labels",
        "run",
        "recorded (UTC)",
        "command",
        "status",
        "endpoint",
        "model",
        "operate",
        "out tok/s",
        "TTFT p95",
        "e2e p99"
    );
    for r in runs {
        let f = &r.figures;
        let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0} ms"));
        let labels = r
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let operate = match (&f.winner, f.operate_at) {
            (Some(_), Some(c)) | (None, Some(c)) => c.to_string(),
            _ => "-".into(),
        };
        let _ =
            writeln!(
            out,
            "{:<16}  {:<16}  {:<12}  {:<11}  {:<32}  {:<24}  {:>7}  {:>10}  {:>9}  {:>9}  {labels}",
            r.id,
            r.recorded_at.get(..16).unwrap_or(&r.recorded_at).replace('T', " "),
            r.command,
            r.status.as_str(),
            clip(r.endpoint.as_deref().unwrap_or("-"), 32),
            clip(r.model.as_deref().unwrap_or("-"), 24),
            operate,
            f.output_token_throughput
                .map_or("-".into(), kneepoint_planner::grouped),
            ms(f.ttft_p95_ms),
            ms(f.e2e_p99_ms),
        );
    }
    out
}

/// `text` cut to `n` characters, the cut marked.
fn clip(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_owned();
    }
    let keep: String = text.chars().take(n.saturating_sub(1)).collect();
    format!("{keep}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CheckedFigure;

    #[test]
    fn the_check_table_names_each_verdict() {
        let figure = |name: &str, run: f64, z: Option<f64>, regressed: bool| CheckedFigure {
            level: "concurrency_64".into(),
            figure: name.into(),
            baseline: 100.0,
            baseline_interval: z.map(|_| [95.0, 105.0]),
            run,
            run_interval: z.map(|_| [run - 5.0, run + 5.0]),
            worse_by: run / 100.0 - 1.0,
            z,
            regressed,
        };
        let r = CheckReport {
            baseline: "base".into(),
            run: "new".into(),
            max_regression: 0.05,
            point_comparisons: false,
            figures: vec![
                figure("ttft_p95_ms", 150.0, Some(4.0), true),
                figure("e2e_p99_ms", 107.0, Some(1.0), false),
                figure("itl_p95_ms", 130.0, None, false),
                figure("tpot_ms", 101.0, Some(0.2), false),
            ],
        };
        let t = r.table();
        let line = |name: &str| t.lines().find(|l| l.contains(name)).unwrap().to_owned();
        assert!(line("ttft_p95_ms").ends_with("REGRESSED"), "{t}");
        assert!(line("ttft_p95_ms").contains("150.0 [145.0–155.0]"), "{t}");
        assert!(line("e2e_p99_ms").ends_with("within noise"), "{t}");
        assert!(
            line("itl_p95_ms").ends_with("not judged (no interval)"),
            "{t}"
        );
        assert!(line("tpot_ms").ends_with("ok"), "{t}");
        assert!(t.starts_with("baseline base against run new"), "{t}");
    }

    #[test]
    fn an_empty_history_is_its_header() {
        let t = history_table(&[]);
        assert_eq!(t.lines().count(), 1);
        assert!(t.starts_with("run "), "{t}");
    }
}
