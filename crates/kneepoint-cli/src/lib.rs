//! The `kneepoint` command line. The binary is a few lines; everything lives here so that tests
//! run the same code in-process (`run(Cli::try_parse_from([...]))`).
//!
//! # Example
//! ```
//! use clap::Parser;
//! let dir = std::env::temp_dir().join("kneepoint-doc-example");
//! let cli = kneepoint_cli::Cli::try_parse_from([
//!     "kneepoint", "sweep", "--sim-profile", "fast", "--concurrency", "1,4",
//!     "--request-count", "8", "--isl", "32", "--osl", "4", "--quiet",
//!     "--artifact-dir", dir.to_str().unwrap(), "--overwrite",
//! ]).unwrap();
//! kneepoint_cli::run(cli).unwrap();
//! assert!(dir.join("concurrency_4/profile_export_aiperf.json").is_file());
//! ```

mod args;
mod check_cmd;
mod cleanup_cmd;
mod dashboard_cmd;
mod docs_cmd;
mod k8s_cmd;
mod lengths_cmd;
mod lines;
mod output;
mod plan_cmd;
mod progress;
mod report_cmd;
mod search_cmd;
mod sim_cmd;
mod store_cmd;
mod sweep;

use std::ffi::OsString;
use std::process::ExitCode;

use kneepoint_runner::CancelToken;

pub use args::K8sJobArgs;
pub use args::{
    ArchiveArgs, CleanupArgs, Cli, Command, CommonArgs, CompareArgs, K8sArgs, K8sCommand,
    MergeArgs, RecommendArgs, ReportArgs, SearchArgs, SimArgs, SimCommand, SlaArgs, SweepArgs,
};
pub use check_cmd::CheckArgs;
use clap::Parser;
pub use dashboard_cmd::DashboardArgs;
pub use docs_cmd::write_man_pages;
pub use k8s_cmd::indexed_job;
pub use kneepoint_config::{
    CandidateSection, CommonSettings, FileConfig, LoadSection, OpenLoopSettings, PriceTable,
    Protocol, RunsSection, RunsSettings, SearchSettings, SweepSettings, Target,
};
pub use kneepoint_engine::schema::LevelRow;
pub use lengths_cmd::{run_length_sweep_with, LengthOutcome};
pub use plan_cmd::{plan, table as plan_table, PlanArgs};
pub use report_cmd::{run_report, ReportOutcome};
pub use search_cmd::{run_search, run_search_with, Interrupted, SearchOutcome};
use std::io::Write;
pub use store_cmd::{HistoryArgs, ImportArgs};
pub use sweep::{run_recommend_with, RecommendOutcome};
pub use sweep::{run_sweep, run_sweep_with, SweepOutcome};

/// `kneepoint compare` found a regression beyond the tolerance (exit status 1).
#[derive(Debug, Clone)]
pub struct Regressed(pub String);

impl std::fmt::Display for Regressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Regressed {}

/// `kneepoint compare` was given runs that measured different things (exit status 2).
#[derive(Debug, Clone)]
pub struct NotComparable(pub String);

impl std::fmt::Display for NotComparable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotComparable {}

/// Runs `kneepoint compare`: prints the table and fails with [`Regressed`] on a regression.
pub fn run_compare(args: &CompareArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    if !(0.0..1.0).contains(&args.confidence) || args.confidence <= 0.0 {
        anyhow::bail!("--confidence must be between 0 and 1");
    }
    if !args.tolerance.is_finite() || args.tolerance < 0.0 {
        anyhow::bail!("--tolerance must be a fraction ≥ 0");
    }
    let a = kneepoint_report::Artifact::load(&args.run_a)?;
    let b = kneepoint_report::Artifact::load(&args.run_b)?;
    let config = kneepoint_metrics::CompareConfig {
        confidence: args.confidence,
        resamples: args.resamples.max(100),
        tolerance: args.tolerance,
        ..Default::default()
    };
    let c = if args.force {
        kneepoint_report::compare_runs_forced(&a, &b, &config)?
    } else {
        match kneepoint_report::compare_runs(&a, &b, &config) {
            Err(e @ kneepoint_report::Error::NotComparable { .. }) => {
                return Err(NotComparable(e.to_string()).into())
            }
            other => other?,
        }
    };
    output::print_text(&kneepoint_report::comparison_text(&c));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&c)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let regressions = c.regressions();
    if !regressions.is_empty() {
        let list: Vec<String> = regressions
            .iter()
            .map(|(conc, m, d)| {
                format!(
                    "{m} {} at concurrency {conc} ({:+.1} %)",
                    d.stat,
                    d.change * 100.0
                )
            })
            .collect();
        return Err(Regressed(format!("regressed: {}", list.join("; "))).into());
    }
    Ok(())
}

/// `e` and its causes as one line, joined by `": "` as anyhow's `{:#}` joins them, but each
/// cause said once: a cause the error before it already quotes in its message
/// (`"cannot start {program:?}: {source}"` with `#[source]`) is left out
/// ([`kneepoint_core::with_causes`]).
pub fn error_text(e: &anyhow::Error) -> String {
    let inner: &(dyn std::error::Error + 'static) = e.as_ref();
    kneepoint_core::with_causes(inner)
}

/// Parses `args`, runs the command and maps errors to an exit code.
pub fn main_with_args<I: IntoIterator<Item = OsString>>(args: I) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // What kneepoint writes or prints is scrubbed of the secrets its environment holds.
    kneepoint_core::secrets::register_environment();
    init_tracing(cli.verbose);
    // The binary's only children are the servers it launches: a daemon one of them leaves
    // behind outside its process group is re-parented here and stopped with it.
    if let Err(e) = kneepoint_deploy::adopt_orphans() {
        tracing::debug!("{e}");
    }
    // Each connection in flight holds a descriptor: lift the soft limit to the hard one.
    let _ = kneepoint_transport::raise_fd_limit();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<Regressed>() => {
            eprintln!("{}", kneepoint_core::secrets::scrub(&e.to_string()));
            ExitCode::FAILURE
        }
        Err(e) if e.is::<NotComparable>() => {
            eprintln!("error: {}", kneepoint_core::secrets::scrub(&e.to_string()));
            ExitCode::from(2)
        }
        Err(e) if e.is::<Interrupted>() => {
            eprintln!("interrupted: everything measured so far is written; the last level is marked partial");
            ExitCode::from(130)
        }
        Err(e) => {
            // An error can quote a server's log or a command line.
            let text = format!("error: {}", error_text(&e));
            eprintln!("{}", kneepoint_core::secrets::scrub(&text));
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        2 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(|| ScrubbedStderr)
        // Colours only on a terminal: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Standard error with the process's secrets scrubbed from each write (a tracing event is
/// written whole, in one call).
struct ScrubbedStderr;

impl Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::stderr().write_all(&kneepoint_core::secrets::scrub_bytes(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Signals this close to the first one are the same request to stop, not a second one.
const SAME_REQUEST: std::time::Duration = std::time::Duration::from_millis(500);

/// A token cancelled by the first Ctrl-C (SIGINT), SIGTERM or SIGHUP (a closed terminal; left
/// ignored when it was ignored at start, under `nohup`); a second one exits at once (killing
/// the servers kneepoint launched).
fn on_signals() -> CancelToken {
    let cancel = CancelToken::new();
    let token = cancel.clone();
    tokio::spawn(async move {
        // Watched once for the whole run: a second signal arriving while the first is being
        // handled is not lost.
        let mut signals = Signals::watch();
        let mut first: Option<std::time::Instant> = None;
        loop {
            if !signals.next().await {
                return;
            }
            // `timeout`, supervisors and a terminal's Ctrl-C can deliver one request twice (to
            // the process and to its group) a few milliseconds apart: that is still the first.
            if first.is_some_and(|t| t.elapsed() < SAME_REQUEST) {
                continue;
            }
            if first.is_none() {
                first = Some(std::time::Instant::now());
                // Cancel first: writing to a terminal that is gone must not stop the cancel.
                token.cancel();
                let _ = writeln!(std::io::stderr(), "\ninterrupt: cancelling in-flight requests and writing what was measured (again to quit at once)");
            } else {
                let _ = writeln!(std::io::stderr(), "\nsecond interrupt: quitting at once; the records written so far are kept, and `kneepoint report <artifact folder>` rebuilds the summaries from them");
                // No time for an orderly teardown: the servers kneepoint launched get SIGKILL;
                // cloud endpoints cannot be deleted this fast, so they are named.
                kneepoint_deploy::kill_all_now();
                for name in kneepoint_deploy::remote_left() {
                    let _ = writeln!(std::io::stderr(), "SageMaker endpoint {name} may be left running: `kneepoint cleanup --sagemaker-region REGION` deletes it");
                }
                std::process::exit(130);
            }
        }
    });
    cancel
}

/// SIGINT, SIGTERM and SIGHUP, watched from the start of the run.
struct Signals {
    #[cfg(unix)]
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
    /// `None` when SIGHUP was ignored at start ([`hangup_ignored`]).
    #[cfg(unix)]
    hangup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn watch() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let streams = match (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) {
                (Ok(int), Ok(term)) => Some((int, term)),
                _ => None,
            };
            // Asked before SIGHUP gets a handler, which would hide that it was ignored.
            let hangup = if hangup_ignored() {
                None
            } else {
                signal(SignalKind::hangup()).ok()
            };
            Signals { streams, hangup }
        }
        #[cfg(not(unix))]
        {
            Signals {}
        }
    }

    /// Waits for the next SIGINT, SIGTERM or SIGHUP; false when signals cannot be watched.
    async fn next(&mut self) -> bool {
        #[cfg(unix)]
        {
            let Some((int, term)) = &mut self.streams else {
                return false;
            };
            let hangup = &mut self.hangup;
            let hangup = async move {
                match hangup {
                    Some(hup) => hup.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = int.recv() => true,
                _ = term.recv() => true,
                _ = hangup => true,
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.is_ok()
        }
    }
}

/// Whether SIGHUP was ignored when kneepoint started (`nohup`, `trap '' HUP`): a hangup is
/// then left ignored, as whoever started kneepoint asked. Read from `/proc/self/status`
/// (`SigIgn`), since querying the disposition (`sigaction`) takes `unsafe`, which the
/// workspace forbids; without `/proc` (not Linux) SIGHUP counts as ignored, and a hangup
/// ends kneepoint as it always did.
#[cfg(unix)]
fn hangup_ignored() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return true;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        // Signal n is bit n - 1; SIGHUP is 1.
        .is_none_or(|mask| mask & 1 != 0)
}

/// A run where no request succeeded is an error (exit 1) naming the most common failure: its
/// files are written, but there is nothing to operate at.
fn failed_run(summaries: &[kneepoint_metrics::LevelSummary]) -> anyhow::Result<()> {
    match kneepoint_engine::every_request_failed(summaries) {
        Some(why) => anyhow::bail!("no request succeeded: {why}"),
        None => Ok(()),
    }
}

/// Writes the archive (and uploads it) when asked, with a line saying where it went. Runs
/// after interrupted runs too: what was measured is archived.
pub async fn publish(p: &kneepoint_config::Publish, dir: &std::path::Path) -> anyhow::Result<()> {
    if let Some(done) = p.run(dir).await? {
        println!(
            "archive: {} ({} files, {} bytes){}",
            done.archive.display(),
            done.files,
            done.bytes,
            done.uploaded
                .map(|(url, etag)| format!("; uploaded to {url} (ETag {etag})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// Runs a parsed command on a new Tokio runtime.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Sweep(args) => {
                let settings = SweepSettings::resolve(&args)?;
                store_cmd::target(&settings.common.publish)?;
                let cancel = on_signals();
                let progress = !args.common.output.quiet;
                // `--isl`/`--osl` lists make a length sweep; its outcome prints its own table
                let (dir, interrupted, summaries) = if settings.common.lengths.is_some() {
                    let o = run_length_sweep_with(&settings, progress, &cancel).await?;
                    lengths_cmd::print_lengths(&o);
                    (o.artifact_dir, o.interrupted, o.summaries)
                } else {
                    let o = run_sweep_with(&settings, progress, &cancel).await?;
                    output::print_sweep(&o);
                    (o.artifact_dir, o.interrupted, o.summaries)
                };
                publish(&settings.common.publish, &dir).await?;
                store_cmd::record(&settings.common.publish, &dir);
                if interrupted {
                    return Err(Interrupted.into());
                }
                failed_run(&summaries)
            }
            Command::Search(args) => {
                let settings = SearchSettings::resolve(&args)?;
                store_cmd::target(&settings.common.publish)?;
                let cancel = on_signals();
                let outcome =
                    run_search_with(&settings, !args.common.output.quiet, &cancel).await?;
                output::print_search(&outcome);
                publish(&settings.common.publish, &outcome.artifact_dir).await?;
                store_cmd::record(&settings.common.publish, &outcome.artifact_dir);
                if outcome.interrupted {
                    return Err(Interrupted.into());
                }
                failed_run(&outcome.summaries)
            }
            Command::Recommend(args) => {
                // Checked before hours of measuring, not after.
                let file = FileConfig::load(&args.config)?;
                let p =
                    kneepoint_config::Publish::resolve(&args.publish, file.output.as_ref(), None)?;
                store_cmd::target(&p)?;
                let cancel = on_signals();
                let outcome = run_recommend_with(&args, !args.quiet, &cancel).await?;
                output::print_recommend(&outcome);
                publish(&p, &outcome.artifact_dir).await?;
                store_cmd::record(&p, &outcome.artifact_dir);
                if outcome.interrupted {
                    return Err(Interrupted.into());
                }
                if outcome.measured == 0 {
                    anyhow::bail!(
                        "no candidate was measured, so nothing can be recommended: the reasons are above and in {}",
                        outcome.artifact_dir.join("recommendations.json").display()
                    );
                }
                Ok(())
            }
            Command::Report(args) => {
                let o = run_report(&args.dir, args.recompute)?;
                for (level, read, saved) in &o.short_levels {
                    eprintln!(
                        "warning: {}: recomputed from {read} of the {saved} measured records the run saved (the records file was cut short); the level is marked partial",
                        level.display()
                    );
                }
                let kind = match o.kind {
                    kneepoint_report::RunKind::Sweep => "sweep",
                    kneepoint_report::RunKind::Search => "search",
                    kneepoint_report::RunKind::Recommend => "recommendation",
                    kneepoint_report::RunKind::Lengths => "length sweep",
                };
                println!(
                    "re-rendered {} files of a {kind} run; open {}",
                    o.files.len(),
                    o.html.display()
                );
                Ok(())
            }
            Command::Compare(args) => run_compare(&args),
            Command::K8s(args) => match &args.command {
                K8sCommand::Job(j) => k8s_cmd::run(j),
            },
            Command::Merge(args) => {
                let r = kneepoint_engine::merge(
                    &args.shards,
                    &args.out,
                    args.overwrite,
                    std::sync::Arc::new(progress::Progress::new(false)),
                )?;
                output::print_merge(&r);
                Ok(())
            }
            Command::Archive(args) => {
                let mut p = kneepoint_config::Publish::resolve(
                    &args.publish,
                    None,
                    args.aws_profile.clone(),
                )?;
                p.archive = true;
                publish(&p, &args.dir).await
            }
            Command::Plan(args) => plan_cmd::run(&args),
            Command::Sim(args) => sim_cmd::run(args).await,
            Command::Cleanup(args) => cleanup_cmd::run(&args).await,
            Command::Import(args) => store_cmd::import(&args),
            Command::History(args) => store_cmd::history(&args),
            Command::Check(args) => check_cmd::run(&args),
            Command::Dashboard(args) => dashboard_cmd::run(&args).await,
            Command::Completions(args) => docs_cmd::completions(&args),
            Command::Man(args) => docs_cmd::man(&args),
        }
    })
}
