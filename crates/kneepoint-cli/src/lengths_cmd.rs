//! `kneepoint sweep --isl A,B,...`: a length sweep, with progress drawn on stderr, and what it
//! prints at the end.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;

use kneepoint_config::SweepSettings;
use kneepoint_runner::CancelToken;

use crate::lines::ms;
use crate::progress::Progress;

/// What a length sweep produced (the engine's report).
pub type LengthOutcome = kneepoint_engine::LengthReport;

/// Runs the length sweep described by `settings` (`--isl`/`--osl` lists), writing every
/// artifact; stops after the current length when `cancel` fires.
pub async fn run_length_sweep_with(
    settings: &SweepSettings,
    progress: bool,
    cancel: &CancelToken,
) -> anyhow::Result<LengthOutcome> {
    let sweep = settings
        .prepare_lengths(Arc::new(Progress::new(progress)))
        .await?;
    Ok(sweep.run(cancel).await?)
}

/// The table of lengths, the prefill rate and where the files are.
pub(crate) fn lengths_text(o: &LengthOutcome) -> String {
    let mut t = format!(
        "\n{:>7} {:>7} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>10} {:>6}\n",
        "ISL",
        "OSL",
        "ISL seen",
        "TTFT p50",
        "TTFT p95",
        "ITL p50",
        "ITL p95",
        "e2e p99",
        "in tok/s",
        "err %"
    );
    for r in &o.rows {
        let _ = writeln!(
            t,
            "{:>7} {:>7} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>10.0} {:>6.2}",
            r.isl,
            r.osl,
            r.input_tokens_mean
                .map_or("-".into(), |v| format!("{v:.1}")),
            ms(r.ttft_p50_ms),
            ms(r.ttft_p95_ms),
            ms(r.itl_p50_ms),
            ms(r.itl_p95_ms),
            ms(r.e2e_p99_ms),
            r.input_token_throughput,
            r.error_rate * 100.0
        );
    }
    let _ = writeln!(t);
    match o.prefill.as_ref() {
        Some(f) => {
            match f.rate_tokens_per_s {
                Some(r) => {
                    let _ = write!(t, "prefill: {r:.0} prompt tokens/s");
                    if let Some([lo, hi]) = f.rate_interval {
                        let _ = write!(t, " (90 % interval {lo:.0}-{hi:.0})");
                    }
                }
                None => t.push_str("prefill: not measured (TTFT did not grow with the prompt)"),
            }
            let _ = writeln!(
                t,
                "; TTFT = {:.1} ms + {:.2} ms per 1,000 prompt tokens (r² {:.3}, {} lengths, {} requests)",
                f.intercept_ms, f.ms_per_1k_tokens, f.r_squared, f.lengths, f.requests
            );
        }
        None => t.push_str(no_fit(o.rows.len())),
    }
    if o.interrupted {
        t.push_str("INTERRUPTED: the length in progress is partial\n");
    }
    let _ = writeln!(t, "artifacts: {}", o.artifact_dir.display());
    t
}

/// Why there is no prefill fit, given how many lengths ran.
fn no_fit(lengths: usize) -> &'static str {
    if lengths >= 2 {
        "prefill: not fitted: fewer than two lengths have a measured TTFT (every request failed, or no token arrived)\n"
    } else {
        "prefill: needs at least two input lengths\n"
    }
}

/// Prints [`lengths_text`] (a closed stdout is not an error: the files are written).
pub(crate) fn print_lengths(o: &LengthOutcome) {
    let _ = std::io::stdout()
        .lock()
        .write_all(lengths_text(o).as_bytes());
}
