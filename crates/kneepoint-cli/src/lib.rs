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
//!     "--artifact-dir", dir.to_str().unwrap(),
//! ]).unwrap();
//! kneepoint_cli::run(cli).unwrap();
//! assert!(dir.join("concurrency_4/profile_export_aiperf.json").is_file());
//! ```

mod args;
mod config;
mod output;
mod search_cmd;
mod session;
mod sim_cmd;
mod sweep;

use std::ffi::OsString;
use std::process::ExitCode;

use kneepoint_runner::CancelToken;

pub use args::{Cli, Command, CommonArgs, SearchArgs, SimArgs, SimCommand, SlaArgs, SweepArgs};
use clap::Parser;
pub use config::{CommonSettings, FileConfig, LevelRow, SearchSettings, SweepSettings, Target};
pub use search_cmd::{run_search, run_search_with, Interrupted, SearchOutcome};
pub use sweep::{run_sweep, run_sweep_with, SweepOutcome};

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
    init_tracing(cli.verbose);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<Interrupted>() => {
            eprintln!("interrupted: everything measured so far is written; the last level is marked partial");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
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
        .with_writer(std::io::stderr)
        .try_init();
}

/// A token cancelled by the first Ctrl-C (SIGINT) or SIGTERM; a second one exits at once.
fn on_signals() -> CancelToken {
    let cancel = CancelToken::new();
    let token = cancel.clone();
    tokio::spawn(async move {
        for n in 0.. {
            if !next_signal().await {
                return;
            }
            if n == 0 {
                eprintln!("\ninterrupt: cancelling in-flight requests and writing what was measured (again to quit at once)");
                token.cancel();
            } else {
                std::process::exit(130);
            }
        }
    });
    cancel
}

/// Waits for SIGINT or SIGTERM; false when signals cannot be watched.
async fn next_signal() -> bool {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return false;
        };
        tokio::select! {
            _ = int.recv() => true,
            _ = term.recv() => true,
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.is_ok()
    }
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
                let cancel = on_signals();
                let outcome = run_sweep_with(&settings, !args.common.quiet, &cancel).await?;
                output::print_sweep(&outcome);
                if outcome.interrupted {
                    return Err(Interrupted.into());
                }
                Ok(())
            }
            Command::Search(args) => {
                let settings = SearchSettings::resolve(&args)?;
                let cancel = on_signals();
                let outcome = run_search_with(&settings, !args.common.quiet, &cancel).await?;
                output::print_search(&outcome);
                if outcome.interrupted {
                    return Err(Interrupted.into());
                }
                Ok(())
            }
            Command::Sim(args) => sim_cmd::run(args).await,
        }
    })
}
