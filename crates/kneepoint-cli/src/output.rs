//! The table printed at the end of a sweep.

use crate::config::LevelRow;
use crate::SweepOutcome;
use std::io::Write as _;

fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 10_000.0 => format!("{:.1}s", v / 1000.0),
        Some(v) => format!("{v:.1}"),
        None => "-".into(),
    }
}

/// The per-level table as text.
pub(crate) fn table(rows: &[LevelRow]) -> String {
    let mut out = format!(
        "{:>11} {:>8} {:>11} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>7}\n",
        "concurrency",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p95",
        "ITL p95",
        "e2e p50",
        "e2e p99",
        "p99-p50",
        "err %"
    );
    for r in rows {
        out.push_str(&format!(
            "{:>11} {:>8.2} {:>11.1} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>7.2}{}\n",
            r.concurrency,
            r.request_throughput,
            r.output_token_throughput,
            ms(r.ttft_p50_ms),
            ms(r.ttft_p95_ms),
            ms(r.itl_p95_ms),
            ms(r.e2e_p50_ms),
            ms(r.e2e_p99_ms),
            ms(r.e2e_spread_ms),
            r.error_rate * 100.0,
            if r.is_knee { "  <- knee" } else { "" }
        ));
    }
    out
}

/// Prints the table, the knee, warnings and where the files are.
pub(crate) fn print_table(outcome: &SweepOutcome) {
    let (rows, knee, summaries, dir) = (
        &outcome.rows,
        &outcome.knee,
        &outcome.summaries,
        &outcome.artifact_dir,
    );
    let mut text = format!("\nlatencies in ms unless marked s\n{}", table(rows));
    match knee.knee {
        Some(k) => text.push_str(&format!("knee: concurrency {k} ({})\n", knee.reason)),
        None => text.push_str(&format!("knee: not found ({})\n", knee.reason)),
    }
    for s in summaries {
        for w in &s.warnings {
            text.push_str(&format!("warning (concurrency {}): {w}\n", s.concurrency));
        }
    }
    text.push_str(&format!("artifacts: {}\n", dir.display()));
    // A closed stdout must not turn a finished sweep into a crash: the files are written.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}
