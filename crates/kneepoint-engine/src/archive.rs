//! The results archive: a `.tar.gz` of an artifact folder, beside it (`DIR.tar.gz`), with
//! every path under the folder's own name, entries in sorted order and no owner names, so
//! the same folder gives the same archive. Uses the `tar` and `flate2` crates (pure Rust).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::Error;

/// Where [`write_archive`] puts the archive of `dir` (give it a folder with a name of its
/// own; `write_archive` resolves `.` and `..` first).
pub fn archive_path(dir: &Path) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "artifacts".into());
    dir.with_file_name(format!("{name}.tar.gz"))
}

fn add_dir(
    tar: &mut tar::Builder<GzEncoder<BufWriter<File>>>,
    dir: &Path,
    prefix: &Path,
) -> Result<u64, Error> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io("read", dir, e))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    let mut files = 0;
    for e in entries {
        let path = e.path();
        let name = prefix.join(e.file_name());
        let kind = e.file_type().map_err(|x| Error::io("read", &path, x))?;
        if kind.is_dir() {
            tar.append_dir(&name, &path)
                .map_err(|x| Error::io("archive", &path, x))?;
            files += add_dir(tar, &path, &name)?;
        } else if kind.is_file() {
            let mut f = File::open(&path).map_err(|x| Error::io("read", &path, x))?;
            tar.append_file(&name, &mut f)
                .map_err(|x| Error::io("archive", &path, x))?;
            files += 1;
        }
        // Symbolic links and other special files are left out.
    }
    Ok(files)
}

/// Writes `DIR.tar.gz` beside `dir` and returns its path and the number of files in it.
pub fn write_archive(dir: &Path) -> Result<(PathBuf, u64), Error> {
    if !dir.is_dir() {
        return Err(Error::invalid(format!(
            "{} is not an artifact folder",
            dir.display()
        )));
    }
    // `.` or `run/..` have no name of their own: the archive would land inside the folder.
    let dir = &dir.canonicalize().map_err(|e| Error::io("read", dir, e))?;
    if dir.parent().is_none() {
        return Err(Error::invalid(
            "the file system's root is not an artifact folder",
        ));
    }
    let out = archive_path(dir);
    let tmp = out.with_extension("gz.partial");
    let file = File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
    let mut tar = tar::Builder::new(GzEncoder::new(BufWriter::new(file), Compression::default()));
    tar.mode(tar::HeaderMode::Deterministic);
    tar.follow_symlinks(false);
    let root = PathBuf::from(
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "artifacts".into()),
    );
    tar.append_dir(&root, dir)
        .map_err(|e| Error::io("archive", dir, e))?;
    let files = add_dir(&mut tar, dir, &root)?;
    let gz = tar.into_inner().map_err(|e| Error::io("write", &tmp, e))?;
    let mut buf = gz.finish().map_err(|e| Error::io("write", &tmp, e))?;
    std::io::Write::flush(&mut buf).map_err(|e| Error::io("write", &tmp, e))?;
    drop(buf);
    std::fs::rename(&tmp, &out).map_err(|e| Error::io("rename", &out, e))?;
    Ok((out, files))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_holds_the_folder_and_is_reproducible() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        std::fs::create_dir_all(dir.join("concurrency_4")).unwrap();
        std::fs::write(dir.join("sweep_summary.json"), "{}").unwrap();
        std::fs::write(dir.join("concurrency_4/profile_export.jsonl"), "x\n").unwrap();
        let (path, files) = write_archive(&dir).unwrap();
        assert_eq!((path.clone(), files), (tmp.path().join("run.tar.gz"), 2));
        let first = std::fs::read(&path).unwrap();
        let mut names = Vec::new();
        let mut a = tar::Archive::new(flate2::read::GzDecoder::new(&first[..]));
        for e in a.entries().unwrap() {
            names.push(e.unwrap().path().unwrap().display().to_string());
        }
        assert_eq!(
            names,
            [
                "run",
                "run/concurrency_4",
                "run/concurrency_4/profile_export.jsonl",
                "run/sweep_summary.json"
            ]
        );
        write_archive(&dir).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), first);
        assert!(write_archive(&tmp.path().join("missing")).is_err());
    }
}
