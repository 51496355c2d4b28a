//! `profile_export.jsonl`: one line per request, appended and flushed as each finishes; or,
//! on request, `profile_export.jsonl.zst`, the same lines through a zstd stream (the `zstd`
//! crate, level 3), flushed every [`ZSTD_FLUSH_EVERY`] records and finished when the sink is
//! dropped. A run killed mid-way keeps every record up to the last flush.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use kneepoint_core::{RecordSink, RequestRecord};
use serde_json::Value;

use super::record_line::RecordLine;
use crate::Error;

/// One record as an AIPerf-style JSON line (`metadata`, `metrics`, `error`), with kneepoint's
/// extra fields in `metadata`, as a JSON value. [`JsonlSink`] writes the same line without
/// building the value.
pub fn record_json(r: &RequestRecord) -> Value {
    // Plain structs of numbers, strings and options: serialising them cannot fail.
    serde_json::to_value(RecordLine::of(r)).unwrap_or(Value::Null)
}

/// Appends `r`'s line and a newline to `buf`.
fn write_line(buf: &mut Vec<u8>, r: &RequestRecord) -> std::io::Result<()> {
    serde_json::to_writer(&mut *buf, &RecordLine::of(r)).map_err(std::io::Error::other)?;
    buf.push(b'\n');
    Ok(())
}

/// The records file of a level.
pub const RECORDS_FILE: &str = kneepoint_core::folder::RECORDS;
/// The compressed records file of a level.
pub const RECORDS_FILE_ZSTD: &str = kneepoint_core::folder::RECORDS_ZSTD;
/// Records between two flushes of a compressed records file.
pub const ZSTD_FLUSH_EVERY: u32 = 256;

/// The records file's name: [`RECORDS_FILE_ZSTD`] when compressed, else [`RECORDS_FILE`].
pub fn records_file_name(zstd: bool) -> &'static str {
    if zstd {
        RECORDS_FILE_ZSTD
    } else {
        RECORDS_FILE
    }
}

/// The records file in a level's folder: the compressed one when it is there.
pub fn records_path(dir: &Path) -> PathBuf {
    let z = dir.join(RECORDS_FILE_ZSTD);
    if z.is_file() {
        z
    } else {
        dir.join(RECORDS_FILE)
    }
}

enum Out {
    Plain(BufWriter<File>),
    Zstd {
        enc: zstd::stream::write::AutoFinishEncoder<'static, BufWriter<File>>,
        since_flush: u32,
    },
}

/// Appends one JSON line per record to a file and flushes it, so an interrupted run keeps every
/// finished request.
pub struct JsonlSink {
    path: PathBuf,
    out: Out,
    /// The line being written, reused.
    line: Vec<u8>,
}

impl std::fmt::Debug for JsonlSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlSink")
            .field("path", &self.path)
            .field("zstd", &matches!(self.out, Out::Zstd { .. }))
            .finish()
    }
}

impl JsonlSink {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> Result<Self, Error> {
        let file = File::create(path).map_err(Error::io(path))?;
        Ok(JsonlSink {
            path: path.to_owned(),
            out: Out::Plain(BufWriter::new(file)),
            line: Vec::new(),
        })
    }

    /// Creates the records file of the level folder `dir`: `profile_export.jsonl`, or
    /// `profile_export.jsonl.zst` when `zstd`.
    pub fn in_dir(dir: &Path, zstd: bool) -> Result<Self, Error> {
        let path = dir.join(records_file_name(zstd));
        if !zstd {
            return Self::create(&path);
        }
        let file = File::create(&path).map_err(Error::io(&path))?;
        let enc = zstd::stream::write::Encoder::new(BufWriter::new(file), 3)
            .map_err(Error::io(&path))?
            .auto_finish();
        Ok(JsonlSink {
            path,
            out: Out::Zstd {
                enc,
                since_flush: 0,
            },
            line: Vec::new(),
        })
    }

    /// Where the records go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sink_error(&self, e: std::io::Error) -> kneepoint_core::Error {
        kneepoint_core::Error::Sink {
            sink: self.path.display().to_string(),
            source: Box::new(e),
        }
    }
}

impl RecordSink for JsonlSink {
    fn record(&mut self, record: &RequestRecord) -> Result<(), kneepoint_core::Error> {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let written = write_line(&mut line, record).and_then(|()| match &mut self.out {
            Out::Plain(w) => w.write_all(&line).and_then(|_| w.flush()),
            Out::Zstd { enc, since_flush } => {
                *since_flush += 1;
                enc.write_all(&line).and_then(|_| {
                    if *since_flush >= ZSTD_FLUSH_EVERY {
                        *since_flush = 0;
                        enc.flush()
                    } else {
                        Ok(())
                    }
                })
            }
        });
        self.line = line;
        written.map_err(|e| self.sink_error(e))
    }

    fn flush(&mut self) -> Result<(), kneepoint_core::Error> {
        let flushed = match &mut self.out {
            Out::Plain(w) => w.flush(),
            Out::Zstd { enc, .. } => enc.flush(),
        };
        flushed.map_err(|e| self.sink_error(e))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use kneepoint_core::{ErrorKind, ErrorRecord, Phase};

    /// The read-back fixtures, and the shapes they lack: a cancelled request with partial
    /// chunks, a timeout, a request without any count, an empty message.
    fn records() -> Vec<RequestRecord> {
        let mut v = crate::export::read::tests::sample();
        let mut cancelled = v[1].clone();
        cancelled.request_id = 9;
        cancelled.error = Some(ErrorRecord {
            kind: ErrorKind::Cancelled,
            code: None,
            message: "cancelled \"at\" the end\n\u{1}".into(),
        });
        let mut timeout = v[0].clone();
        timeout.request_id = 10;
        timeout.error = Some(ErrorRecord {
            kind: ErrorKind::Timeout,
            code: None,
            message: String::new(),
        });
        let mut bare = RequestRecord::new(11, Phase::Profiling);
        bare.end_ns = 7;
        // Failed with no input length: `"metrics": null`.
        let mut refused = RequestRecord::new(12, Phase::Profiling);
        refused.end_ns = 9;
        refused.error = Some(ErrorRecord {
            kind: ErrorKind::HttpStatus,
            code: Some(400),
            message: "bad request".into(),
        });
        // Gaps of zero: an infinite rate per user, written as `null`.
        let mut instant = RequestRecord::new(13, Phase::Profiling);
        instant.chunk_ns = vec![5, 5, 5];
        instant.end_ns = 5;
        instant.output_tokens = Some(3);
        v.extend([cancelled, timeout, bare, refused, instant]);
        v
    }

    /// The lines are those the earlier `serde_json::Value` tree wrote, byte for byte, through
    /// the sink and through [`record_json`].
    #[test]
    fn lines_match_the_golden_file() {
        let golden = include_str!("testdata/record_lines.jsonl");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jsonl");
        let mut sink = JsonlSink::create(&path).unwrap();
        for r in records() {
            sink.record(&r).unwrap();
        }
        drop(sink);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), golden);
        let by_value: String = records()
            .iter()
            .map(|r| record_json(r).to_string() + "\n")
            .collect();
        assert_eq!(by_value, golden);
    }
}
