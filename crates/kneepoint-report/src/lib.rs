//! Reports for kneepoint runs: SVG plots (throughput vs p99 latency with the knee and the SLA,
//! latency percentiles vs concurrency, per-request TTFT timelines and distributions), a
//! self-contained `report.html`, re-rendering of a saved artifact folder, and the comparison of
//! two runs.
//!
//! Everything works from the files a run leaves behind (`sweep_summary.json`,
//! `search_history.json` or `recommendations.json`, and each level's `profile_export.jsonl`),
//! so reports can be made again later without re-running anything.
//!
//! Plots and pages need the `render` feature (on by default: `plotters`, SVG only); without
//! it the crate reads, re-summarises and compares saved folders.
//!
//! # Example
//! ```
//! # #[cfg(feature = "render")] {
//! use kneepoint_report::plots::{throughput_vs_latency, Curve, CurvePoint};
//!
//! let point = |c: u32, t: f64, p99_s: f64| CurvePoint {
//!     concurrency: c, throughput: t, e2e_p50_ms: None, e2e_p90_ms: None,
//!     e2e_p99_ms: Some(p99_s * 1000.0), meets_slas: None,
//! };
//! let curve = Curve {
//!     name: "sim".into(),
//!     points: vec![point(16, 500.0, 8.0), point(256, 2800.0, 28.0), point(1024, 2790.0, 98.0)],
//!     knee: Some(256),
//!     chosen: Some(256),
//! };
//! let svg = throughput_vs_latency(&[curve], Some(50_000.0)).unwrap();
//! assert!(svg.starts_with("<svg"));
//! # }
//! ```

mod artifact;
mod comparable;
mod compare;
mod curve;
mod error;
#[cfg(feature = "render")]
mod html;
#[cfg(feature = "render")]
mod html_lengths;
#[cfg(feature = "render")]
mod html_recommend;
#[cfg(feature = "render")]
mod html_text;
mod killed;
#[cfg(feature = "render")]
pub mod plots;
pub mod schema;
#[cfg(feature = "render")]
pub mod server_plots;

#[cfg(feature = "render")]
use std::path::PathBuf;

#[cfg(feature = "render")]
use kneepoint_core::folder;

pub use artifact::{Artifact, Level, RunKind, SHORT_RECORDS_WARNING};
pub use comparable::{differences, settings_differences};
pub use compare::{
    compare_runs, compare_runs_forced, comparison_text, Comparison, LevelComparison,
    MetricComparison, SINGLE_RUN_CAVEAT,
};
pub use curve::{Curve, CurvePoint};
pub use error::Error;
#[cfg(feature = "render")]
pub use html::{esc, render, Plot, Rendered};

/// A page can quote a failure's reason, and with it a server's log: what it writes is
/// scrubbed of every registered secret.
#[cfg(feature = "render")]
fn scrub(text: &str) -> std::borrow::Cow<'_, str> {
    kneepoint_core::secrets::scrub(text)
}

/// Renders `a`'s report and writes `plots/*.svg` and `report.html` into its folder (and those of
/// a recommendation's candidates). Returns the files written.
#[cfg(feature = "render")]
pub fn write_report(a: &Artifact) -> Result<Vec<PathBuf>, Error> {
    let mut written = Vec::new();
    for c in &a.candidates {
        written.extend(write_report(c)?);
    }
    let r = render(a)?;
    let dir = a.root.join(folder::PLOTS_DIR);
    std::fs::create_dir_all(&dir).map_err(Error::write(&dir))?;
    for p in &r.plots {
        let path = dir.join(&p.file);
        std::fs::write(&path, &*scrub(&p.svg)).map_err(Error::write(&path))?;
        written.push(path);
    }
    let path = a.root.join(folder::REPORT_HTML);
    std::fs::write(&path, &*scrub(&r.html)).map_err(Error::write(&path))?;
    written.push(path);
    Ok(written)
}
