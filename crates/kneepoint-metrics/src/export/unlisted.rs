//! The requests past `inputs.json`'s limit, each as one line of JSON (its id and lengths), kept
//! in a side file beside the partial `inputs.json` until it is closed: a level of millions of
//! requests holds none of them in memory, and adding one is a buffered write (no list to
//! grow and copy while the senders wait).

use std::io::{BufRead, Write};
use std::path::PathBuf;

/// A request counted past [`InputsWriter`](super::InputsWriter)'s limit: its id and lengths,
/// which with the workload's settings and seed say what was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unlisted {
    /// The request id (`session_id` of a listed entry, `session_num` in the JSONL).
    pub id: u64,
    /// The prompt's tokens as the workload counted them.
    pub input_tokens: Option<u32>,
    /// The output length asked for.
    pub max_output_tokens: Option<u32>,
}

/// Writes one unlisted request as a line of JSON: `{"session_id": "7", "input_tokens": 1024,
/// "max_output_tokens": 256}` (a length the workload did not set is `null`).
fn write_line(out: &mut impl Write, u: &Unlisted) -> std::io::Result<()> {
    struct N(Option<u32>);
    impl std::fmt::Display for N {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self.0 {
                Some(v) => write!(f, "{v}"),
                None => f.write_str("null"),
            }
        }
    }
    writeln!(
        out,
        "{{\"session_id\": \"{}\", \"input_tokens\": {}, \"max_output_tokens\": {}}}",
        u.id,
        N(u.input_tokens),
        N(u.max_output_tokens)
    )
}

/// The side file of unlisted requests (created with the first one, removed when dropped).
#[derive(Debug)]
pub(crate) struct UnlistedLog {
    path: PathBuf,
    out: Option<std::io::BufWriter<std::fs::File>>,
    /// Lines written, and how many of the first of them count (a level that stopped early
    /// keeps those of the requests that went out).
    lines: usize,
    keep: usize,
}

impl UnlistedLog {
    /// A log at `path`, not yet created.
    pub(crate) fn new(path: PathBuf) -> Self {
        UnlistedLog {
            path,
            out: None,
            lines: 0,
            keep: usize::MAX,
        }
    }

    /// Appends `u`'s line.
    pub(crate) fn push(&mut self, u: &Unlisted) -> std::io::Result<()> {
        let out = match &mut self.out {
            Some(out) => out,
            None => self.out.insert(std::io::BufWriter::with_capacity(
                1 << 16,
                std::fs::File::create(&self.path)?,
            )),
        };
        write_line(out, u)?;
        self.lines += 1;
        Ok(())
    }

    /// Keeps at most the first `n` lines.
    pub(crate) fn keep_first(&mut self, n: usize) {
        self.keep = self.keep.min(n);
    }

    /// The lines that count.
    pub(crate) fn kept(&self) -> usize {
        self.lines.min(self.keep)
    }

    /// Hands the kept lines to `write`, each after `sep` (none before the first), in pieces of
    /// about 64 KB.
    pub(crate) fn copy_into(
        &mut self,
        sep: &str,
        mut write: impl FnMut(&[u8]),
    ) -> std::io::Result<()> {
        let Some(mut out) = self.out.take() else {
            return Ok(());
        };
        out.flush()?;
        drop(out);
        let mut lines = std::io::BufReader::new(std::fs::File::open(&self.path)?).lines();
        let mut piece = String::with_capacity(1 << 16);
        for k in 0..self.kept() {
            let Some(line) = lines.next().transpose()? else {
                break;
            };
            if k > 0 {
                piece.push_str(sep);
            }
            piece.push_str(&line);
            if piece.len() >= 1 << 16 {
                write(piece.as_bytes());
                piece.clear();
            }
        }
        write(piece.as_bytes());
        Ok(())
    }
}

impl Drop for UnlistedLog {
    fn drop(&mut self) {
        if self.out.take().is_some() || self.lines > 0 {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lines_are_kept_in_order_cut_and_removed_with_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("u.partial");
        let mut log = UnlistedLog::new(path.clone());
        assert!(!path.exists(), "created with the first line");
        for id in 0..5000u64 {
            let u = Unlisted {
                id,
                input_tokens: Some(7),
                max_output_tokens: None,
            };
            log.push(&u).unwrap();
        }
        log.keep_first(4000);
        log.keep_first(4500);
        assert_eq!(log.kept(), 4000);
        let mut text = Vec::new();
        log.copy_into(",", |b| text.extend_from_slice(b)).unwrap();
        let list: serde_json::Value =
            serde_json::from_slice(&[b"[", &text[..], b"]"].concat()).unwrap();
        let list = list.as_array().unwrap();
        assert_eq!(list.len(), 4000);
        assert_eq!(list[3999]["session_id"], "3999");
        assert_eq!(list[0]["input_tokens"], 7);
        assert!(list[0]["max_output_tokens"].is_null());
        drop(log);
        assert!(!path.exists());
    }
}
