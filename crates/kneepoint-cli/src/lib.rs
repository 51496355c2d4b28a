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

pub use args::{Cli, Command, CommonArgs, SearchArgs, SimArgs, SimCommand, SlaArgs, SweepArgs};
use clap::Parser;
pub use config::{CommonSettings, FileConfig, LevelRow, SearchSettings, SweepSettings, Target};
pub use search_cmd::{run_search, SearchOutcome};
pub use sweep::{run_sweep, SweepOutcome};

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

/// Runs a parsed command on a new Tokio runtime.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Sweep(args) => {
                let settings = SweepSettings::resolve(&args)?;
                let outcome = run_sweep(&settings, !args.common.quiet).await?;
                output::print_sweep(&outcome);
                Ok(())
            }
            Command::Search(args) => {
                let settings = SearchSettings::resolve(&args)?;
                let outcome = run_search(&settings, !args.common.quiet).await?;
                output::print_search(&outcome);
                Ok(())
            }
            Command::Sim(args) => sim_cmd::run(args).await,
        }
    })
}
