//! Reading `profile_export.jsonl` back into records, so that summaries, plots and comparisons
//! can be made again from saved files without re-running anything.
//!
//! The file keeps absolute times and per-request metrics rather than the raw record; the reader
//! inverts [`record_json`](crate::export::record_json): chunk arrival times come back from the
//! first-token time and the inter-chunk gaps (exact to the nanosecond, as written), and times
//! are relative to the run's origin (`level_origin_unix_ns`; 0 for files written before it was
//! recorded, whose times are then absolute Unix nanoseconds). Summaries computed from the
//! read records equal those computed from the originals.

use std::path::Path;

use kneepoint_core::RequestRecord;
use serde_json::Value;

use crate::export::read_line::{parse_typed, Fields};
use crate::Error;

/// Rebuilds a record from one line of `profile_export.jsonl`; the reason when it cannot.
pub fn record_from_json(v: &Value) -> Result<RequestRecord, String> {
    Fields::from_value(v).to_record()
}

/// One line: the typed path when the line has the shape kneepoint writes, else the lenient
/// one (see `read_line`), whose verdicts and errors are the reader's.
fn record_from_line(text: &str) -> Result<RequestRecord, String> {
    if let Some(fields) = parse_typed(text) {
        return fields.to_record();
    }
    let v = serde_json::from_str::<Value>(text).map_err(|e| line_error(&e))?;
    record_from_json(&v)
}

/// A JSON error within one line, placed by its column: serde's own "at line 1 column N" would
/// read as a line number of the file.
fn line_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let what = text.split(" at line ").next().unwrap_or(&text);
    format!("{what} (at column {})", e.column())
}

/// The longest line a records file may hold (a record of a million chunk times is ~16 MB).
const MAX_LINE: usize = 64 * 1024 * 1024;

/// Reads one line (up to and with its `\n`) into `line`, keeping at most `max` bytes of it and
/// skipping the rest; returns how many bytes the line had and whether a `\n` ended it.
fn read_line_bounded(
    reader: &mut dyn std::io::BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<(usize, bool)> {
    let mut total = 0;
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((total, false));
        }
        let (take, ended) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        total += take;
        reader.consume(take);
        if ended {
            return Ok((total, true));
        }
    }
}

/// Reads every record of a `profile_export.jsonl` (or `.jsonl.zst`); a malformed line is an
/// error naming it. A torn last line (a run killed mid-write) is skipped, as the file is
/// appended line by line; a compressed file cut short keeps what decodes. Memory is bounded by
/// the records, not the file: a line past 64 MiB, or a tail that is not the start of a record
/// (zero bytes, junk), is an error naming its line and byte offset.
pub fn read_jsonl(path: &Path) -> Result<Vec<RequestRecord>, Error> {
    let mut out = Vec::new();
    read_jsonl_each(path, |r| out.push(r))?;
    Ok(out)
}

/// How every record line starts (a JSON object): a torn last line that starts so is the start
/// of a record cut short by a killed run.
const RECORD_START: &str = "{";

/// Reads the records of a `profile_export.jsonl` (or `.jsonl.zst`) one at a time into `each`,
/// in the file's order and in memory of one line, with [`read_jsonl`]'s rules; returns how
/// many were read. Levels of millions of records are summarised this way.
pub fn read_jsonl_each(path: &Path, mut each: impl FnMut(RequestRecord)) -> Result<usize, Error> {
    use std::io::BufRead;
    let read_err = |source| Error::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let zst = path.extension().is_some_and(|e| e == "zst");
    let mut reader: Box<dyn BufRead> = if zst {
        Box::new(std::io::BufReader::new(
            zstd::stream::read::Decoder::new(file).map_err(read_err)?,
        ))
    } else {
        Box::new(std::io::BufReader::with_capacity(1 << 16, file))
    };
    let (mut line, mut n, mut count, mut decoded) = (Vec::new(), 0usize, 0usize, false);
    let mut offset = 0u64;
    let parse_error = |line: usize, reason: String| Error::Parse {
        path: path.to_owned(),
        line,
        reason,
    };
    loop {
        line.clear();
        let (got, ended) = match read_line_bounded(&mut *reader, &mut line, MAX_LINE) {
            Ok((0, _)) => break,
            Ok(k) => k,
            // A compressed stream cut short (a killed run) keeps what decoded; nothing
            // decoding at all is not a records file.
            Err(e) if zst && !decoded => return Err(read_err(e)),
            Err(_) if zst => break,
            Err(e) => return Err(read_err(e)),
        };
        decoded = true;
        n += 1;
        let start = offset;
        offset += got as u64;
        let junk = |what: &str| {
            let keep = if zst {
                String::new()
            } else {
                format!(" (`truncate -s {start}` keeps them)")
            };
            parse_error(
                n,
                format!(
                    "{got} bytes from byte {start} {what}: not a record, nor one cut short by a killed run; the {count} records before them are whole{keep}"
                ),
            )
        };
        if got > MAX_LINE {
            return Err(junk(if ended {
                "are one line longer than 64 MiB"
            } else {
                "run to the end of the file with no line break"
            }));
        }
        let torn_tail = !ended;
        // Valid UTF-8 (every line kneepoint writes) is borrowed as it is: checking it costs a
        // fraction of the lossy conversion's walk.
        let text = match std::str::from_utf8(&line) {
            Ok(t) => std::borrow::Cow::Borrowed(t),
            Err(_) => String::from_utf8_lossy(&line),
        };
        if text.trim().is_empty() {
            continue;
        }
        match record_from_line(text.trim_end()) {
            Ok(r) => {
                count += 1;
                each(r);
            }
            // A run killed mid-write leaves the start of a record: kneepoint never writes NUL
            // bytes, and every record starts with `{`.
            Err(_)
                if torn_tail
                    && text.trim_start().starts_with(RECORD_START)
                    && !text.contains('\0') => {}
            Err(_) if torn_tail => return Err(junk("end the file")),
            Err(reason) => return Err(parse_error(n, reason)),
        }
    }
    Ok(count)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
pub(crate) mod tests {
    use super::*;
    use crate::export::record_json;
    use crate::{GoodputSlo, LevelSummary};
    use kneepoint_core::{ErrorKind, ErrorRecord, Phase, TokenSource};

    fn rec(id: u64, start: u64, chunks: &[u64], end: u64, err: bool) -> RequestRecord {
        {
            let mut built = RequestRecord::new(
                id,
                if id == 0 {
                    Phase::Warmup
                } else {
                    Phase::Profiling
                },
            );
            built.x_request_id =
                (id == 2).then(|| "00000000-0000-4000-8000-000000000002".to_owned());
            built.worker = (id % 3) as u32;
            built.origin_unix_ns = 1_795_000_000_000_000_000;
            built.start_ns = start;
            built.response_ns = Some(start + 1_234);
            built.chunk_ns = chunks.to_vec();
            built.first_content_ns = chunks.get(1).copied();
            built.end_ns = end;
            built.input_tokens = Some(100 + id as u32);
            built.server_input_tokens = Some(100 + id as u32);
            built.output_tokens = (!err).then_some(chunks.len() as u32);
            built.output_tokens_source = Some(TokenSource::Usage);
            built.client_output_tokens = Some(chunks.len() as u32);
            built.output_bytes = 10;
            built.requested_output_tokens = Some(4);
            built.finish_reason = (!err).then(|| "length".to_owned());
            built.error = err.then(|| ErrorRecord {
                kind: ErrorKind::HttpStatus,
                code: Some(429),
                message: "too many".into(),
            });
            built.attempts = 1 + (id % 2) as u32;
            built.intended_start_ns = (id == 1).then_some(start / 2);
            // the fields of conversations, reasoning, routes, images and pooling
            if id == 3 {
                built.conversation_id = Some("conversation_7".into());
                built.turn_index = Some(2);
                built.history_tokens = Some(123);
                built.think_time_ns = Some(1_500_000);
                built.reasoning_tokens = Some(1);
                built.usage_reasoning_tokens = Some(1);
                built.model = Some("adapter-1".into());
                built.url = Some("http://127.0.0.1:8000".into());
                built.image_count = Some(2);
                built.audio_count = Some(1);
                built.connection = Some(
                    kneepoint_core::ConnectionTimings::opened(1_234_567, 89_012, 3_456_789)
                        .with_waiting(7_654_321),
                );
                built.audio_ms = Some(2_500);
            }
            if id == 4 {
                built.pooled_items = Some(4);
            }
            if id == 1 {
                built.connection = Some(kneepoint_core::ConnectionTimings::reused());
            }
            built
        }
    }

    pub(crate) fn sample() -> Vec<RequestRecord> {
        vec![
            rec(0, 5, &[1_000_003, 2_000_017], 2_500_000, false),
            rec(
                1,
                10,
                &[7_777_777, 9_123_457, 11_000_001, 12_345_679],
                13_000_000,
                false,
            ),
            rec(2, 20, &[], 40_000, true),
            rec(3, 30, &[333_333_333], 333_333_999, false),
            rec(4, 40, &[], 1_000_040, false),
        ]
    }

    #[test]
    fn summaries_from_read_records_equal_the_originals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jsonl");
        let text: String = sample()
            .iter()
            .map(|r| record_json(r).to_string() + "\n")
            .collect();
        std::fs::write(&path, text).unwrap();
        let back = read_jsonl(&path).unwrap();
        assert_eq!(back.len(), 5);
        let a = LevelSummary::from_records(4, &sample(), &GoodputSlo::default());
        let b = LevelSummary::from_records(4, &back, &GoodputSlo::default());
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        for (x, y) in sample().iter().zip(&back) {
            assert_eq!(y.origin_unix_ns, x.origin_unix_ns);
            assert_eq!(y.start_ns, x.start_ns);
            assert_eq!(y.response_ns, x.response_ns);
            assert_eq!(y.chunk_ns, x.chunk_ns);
            assert_eq!(y.intended_start_ns, x.intended_start_ns);
            assert_eq!(y.error, x.error);
            assert_eq!(y.phase, x.phase);
            assert_eq!(y.attempts, x.attempts);
            assert_eq!(y.x_request_id, x.x_request_id);
            assert_eq!(y.conversation_id, x.conversation_id);
            assert_eq!(y.turn_index, x.turn_index);
            assert_eq!(y.history_tokens, x.history_tokens);
            assert_eq!(y.think_time_ns, x.think_time_ns);
            assert_eq!(
                (y.reasoning_tokens, y.usage_reasoning_tokens),
                (x.reasoning_tokens, x.usage_reasoning_tokens)
            );
            assert_eq!((&y.model, &y.url), (&x.model, &x.url));
            assert_eq!(
                (y.image_count, y.pooled_items),
                (x.image_count, x.pooled_items)
            );
            assert_eq!((y.audio_count, y.audio_ms), (x.audio_count, x.audio_ms));
            assert_eq!(y.connection, x.connection);
        }
    }

    #[test]
    /// Issue 46 item 4: a junk tail (zero bytes, an endless line) is named with its line and
    /// offset, read in bounded memory; a record cut short is still skipped.
    fn a_junk_tail_is_named_and_never_held_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jsonl");
        let good = record_json(&sample()[1]).to_string();
        let head = format!("{good}\n{good}\n");
        std::fs::write(&path, format!("{head}{}", "\0".repeat(4096))).unwrap();
        let err = read_jsonl(&path).unwrap_err().to_string();
        assert!(
            err.contains(":3:") && err.contains(&format!("from byte {}", head.len())),
            "{err}"
        );
        assert!(err.contains("the 2 records before them are whole"), "{err}");
        // A line longer than the bound is cut off as it is read, not held.
        let mut line = Vec::new();
        let endless = vec![b'x'; 3 * 1024 * 1024];
        let (got, ended) =
            read_line_bounded(&mut std::io::Cursor::new(&endless), &mut line, 1024).unwrap();
        assert_eq!((got, ended, line.len()), (endless.len(), false, 1024));
        // Nothing but a record's start at the end: a killed run, skipped.
        std::fs::write(&path, format!("{head}{}", &good[..40])).unwrap();
        assert_eq!(read_jsonl(&path).unwrap().len(), 2);
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_a_bad_middle_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jsonl");
        let good = record_json(&sample()[1]).to_string();
        std::fs::write(&path, format!("{good}\n{}", &good[..40])).unwrap();
        assert_eq!(read_jsonl(&path).unwrap().len(), 1);
        std::fs::write(&path, format!("{good}\nnot json\n{good}\n")).unwrap();
        let err = read_jsonl(&path).unwrap_err().to_string();
        assert!(err.contains(":2"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_zstd_is_an_error_not_an_empty_level() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile_export.jsonl.zst");
        std::fs::write(&path, b"{\"not\": \"zstd\"}\n").unwrap();
        assert!(read_jsonl(&path).is_err());
    }
}
