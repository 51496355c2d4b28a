//! Config files: parsing and the validation that resolving settings does.

use clap::Parser;
use kneepoint_cli::{Cli, Command, FileConfig, SearchSettings, SweepSettings};

/// Parses the text as TOML and as JSON; whatever parses is resolved into sweep and search
/// settings with no command-line flags, which validates every value (errors, never panics).
pub fn config_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for is_json in [false, true] {
        let Ok(file) = FileConfig::parse(text, is_json) else {
            continue;
        };
        let sweep = Cli::try_parse_from(["kneepoint", "sweep"]);
        if let Ok(Command::Sweep(args)) = sweep.map(|c| c.command) {
            let _ = SweepSettings::resolve_with(&args, &file);
        }
        let search = Cli::try_parse_from(["kneepoint", "search"]);
        if let Ok(Command::Search(args)) = search.map(|c| c.command) {
            let _ = SearchSettings::resolve_with(&args, &file);
        }
    }
}
