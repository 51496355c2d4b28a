//! The table printed at the end of a sweep.

use std::path::Path;

use kneepoint_metrics::LevelSummary;
use kneepoint_planner::KneeEstimate;

use crate::config::LevelRow;

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

pub(crate) fn print_table(
    rows: &[LevelRow],
    knee: &KneeEstimate,
    summaries: &[LevelSummary],
    dir: &Path,
) {
    println!("\nlatencies in ms unless marked s\n{}", table(rows));
    match knee.knee {
        Some(k) => println!("knee: concurrency {k} ({})", knee.reason),
        None => println!("knee: not found ({})", knee.reason),
    }
    for s in summaries {
        for w in &s.warnings {
            println!("warning (concurrency {}): {w}", s.concurrency);
        }
    }
    println!("artifacts: {}", dir.display());
}
