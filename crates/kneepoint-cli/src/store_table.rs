//! `kneepoint history`'s table: one line per run, its key figures in fixed columns.

use std::fmt::Write as _;

use kneepoint_store::RunRecord;

/// The runs as aligned text, newest first as given.
pub fn table(runs: &[RunRecord]) -> String {
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
