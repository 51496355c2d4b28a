//! `benchmark_summary.txt`: a completion summary for people.

use std::fmt::Write as _;
use std::path::Path;

use crate::export::{write_atomic, LevelInfo};
use crate::summary::LevelSummary;
use crate::Error;

/// The summary text of one level.
pub fn summary_text(s: &LevelSummary, info: &LevelInfo) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "kneepoint level summary: concurrency {}", s.concurrency);
    if info.partial {
        let _ = writeln!(
            o,
            "PARTIAL: the level was interrupted before all requests finished"
        );
    }
    let _ = writeln!(
        o,
        "requests: {} recorded, {} ok, {} failed (error rate {:.2} %)",
        s.request_count,
        s.ok_count,
        s.error_count,
        s.error_rate * 100.0
    );
    let _ = writeln!(o, "duration: {:.3} s", s.benchmark_duration_s);
    let _ = writeln!(
        o,
        "request throughput: {:.3} requests/s",
        s.request_throughput
    );
    let _ = writeln!(
        o,
        "output token throughput: {:.1} tokens/s",
        s.output_token_throughput
    );
    if let Some(g) = s.goodput {
        let _ = writeln!(o, "goodput: {g:.3} requests/s");
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<36} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "metric", "avg", "min", "p50", "p90", "p99", "max"
    );
    for (metric, m) in &s.metrics {
        let (title, unit) = (metric.label(), metric.client_unit());
        {
            let st = &m.stats;
            let _ = writeln!(
                o,
                "{:<36} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
                format!("{title} ({unit})"),
                st.avg,
                st.min,
                st.p50,
                st.p90,
                st.p99,
                st.max
            );
        }
    }
    if !s.error_summary.is_empty() {
        let _ = writeln!(o, "\nerrors:");
        for g in &s.error_summary {
            let code = g.code.map(|c| format!(" {c}")).unwrap_or_default();
            let _ = writeln!(o, "  {:>6} × {}{}: {}", g.count, g.kind, code, g.message);
        }
    }
    for w in &s.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    o
}

/// Writes `benchmark_summary.txt`.
pub fn write_summary_text(path: &Path, s: &LevelSummary, info: &LevelInfo) -> Result<(), Error> {
    write_atomic(path, summary_text(s, info).as_bytes())
}
