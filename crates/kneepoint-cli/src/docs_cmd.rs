//! `kneepoint completions SHELL` and `kneepoint man`: shell completion scripts and man pages,
//! made from the same argument definitions as the parser (`clap_complete`, `clap_mangen`), so
//! they cannot drift from the flags. The wheel and the container image install them.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs, ManArgs};

/// Prints the completion script of `args.shell` to stdout.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<()> {
    let mut cmd = Cli::command();
    // Into a buffer first: the generator panics on a write error (a closed pipe).
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "kneepoint", &mut out);
    print_all(&out)
}

/// Writes `bytes` to stdout; a reader that went away (`| head`) is not an error.
fn print_all(bytes: &[u8]) -> anyhow::Result<()> {
    match std::io::stdout().write_all(bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Writes the man pages into `args.dir` (listing them), or prints `kneepoint.1`.
pub fn man(args: &ManArgs) -> anyhow::Result<()> {
    match &args.dir {
        Some(dir) => {
            for path in write_man_pages(dir)? {
                println!("{}", path.display());
            }
        }
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut out)?;
            print_all(&out)?;
        }
    }
    Ok(())
}

/// Writes `kneepoint.1` and `kneepoint-<subcommand>.1` for every subcommand (nested ones too)
/// into `dir`; returns the files written.
pub fn write_man_pages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let mut stack = vec![(String::from("kneepoint"), Cli::command())];
    while let Some((name, cmd)) = stack.pop() {
        for sub in cmd.get_subcommands() {
            if sub.get_name() != "help" {
                stack.push((format!("{name}-{}", sub.get_name()), sub.clone()));
            }
        }
        let path = dir.join(format!("{name}.1"));
        let mut out = Vec::new();
        let cmd = cmd.display_name(&name).bin_name(name.replace('-', " "));
        clap_mangen::Man::new(cmd).render(&mut out)?;
        std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    written.sort();
    Ok(written)
}
