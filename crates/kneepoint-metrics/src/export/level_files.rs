//! A level's summary files, written together: `profile_export_aiperf.json`,
//! `profile_export_aiperf.csv` and `benchmark_summary.txt`. A run, a pooled set of runs, a
//! merge of shards and `report` all write them through here, so the three always agree.

use std::path::{Path, PathBuf};

use kneepoint_core::folder;

use super::{write_aiperf_csv, write_aiperf_json, write_summary_text, LevelInfo};
use crate::{Error, LevelSummary};

/// Writes the level's three summary files into `dir` and returns their paths.
pub fn write_level_summary(
    dir: &Path,
    summary: &LevelSummary,
    info: &LevelInfo,
) -> Result<[PathBuf; 3], Error> {
    let paths = [
        dir.join(folder::AIPERF_JSON),
        dir.join(folder::AIPERF_CSV),
        dir.join(folder::SUMMARY_TEXT),
    ];
    write_aiperf_json(&paths[0], summary, info)?;
    write_aiperf_csv(&paths[1], summary)?;
    write_summary_text(&paths[2], summary, info)?;
    Ok(paths)
}
