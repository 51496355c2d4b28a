//! `inputs.json`: the payloads sent, AIPerf's `{"data": [{"session_id", "payloads"}]}` shape.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::export::unlisted::{Unlisted, UnlistedLog};
use crate::export::write_atomic;
use crate::Error;

/// One request's payload.
#[derive(Debug, Clone, Serialize)]
pub struct InputEntry {
    /// The request id in decimal (matches `session_num` in the JSONL; `x_request_id` there is
    /// the id the server was sent, a UUID that differs between runs by design).
    pub session_id: String,
    /// The body sent (one entry: single-turn).
    pub payloads: Vec<serde_json::Value>,
}

/// Writes `inputs.json`.
pub fn write_inputs_json(path: &Path, entries: &[InputEntry]) -> Result<(), Error> {
    #[derive(Serialize)]
    struct File<'a> {
        data: &'a [InputEntry],
    }
    let bytes =
        serde_json::to_vec_pretty(&File { data: entries }).map_err(|source| Error::Json {
            what: "inputs",
            source,
        })?;
    write_atomic(path, &bytes)
}

/// Where `inputs.json` says how much of a long level it lists: AIPerf reads `data` and
/// ignores this key.
pub const INPUTS_NOTE_KEY: &str = "kneepoint_inputs";

/// One entry as `inputs.json` holds it: pretty JSON indented to its place in the `data` list
/// (made off the timed path, ahead of the request it describes).
///
/// Written by [`kneepoint_core::json_text`] (the prompts are most of it), byte for byte what
/// `serde_json`'s pretty printer writes for the entry with every line indented by four.
pub fn render_input_entry(entry: &InputEntry) -> Vec<u8> {
    use kneepoint_core::json_text::{new_line, write_json_str, write_pretty_list};
    let text: usize = entry.payloads.iter().map(payload_text_len).sum();
    let mut out = Vec::with_capacity(text + text / 16 + 256);
    out.extend_from_slice(b"    {");
    new_line(&mut out, 6);
    out.extend_from_slice(b"\"session_id\": ");
    write_json_str(&mut out, &entry.session_id);
    out.push(b',');
    new_line(&mut out, 6);
    out.extend_from_slice(b"\"payloads\": ");
    write_pretty_list(&mut out, &entry.payloads, 6);
    new_line(&mut out, 4);
    out.push(b'}');
    out
}

/// The length of the strings in `v`, to size the entry's buffer once.
fn payload_text_len(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::String(s) => s.len() + 2,
        Value::Array(a) => a.iter().map(payload_text_len).sum(),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| k.len() + 8 + payload_text_len(v))
            .sum(),
        _ => 8,
    }
}

/// `inputs.json` written entry by entry as requests are sent, listing at most `limit` of
/// them: a level of millions of requests neither holds their payloads in memory nor writes
/// them all (a seed reproduces synthetic prompts). Up to the limit the file is byte for byte
/// what [`write_inputs_json`] writes; past it the file adds [`INPUTS_NOTE_KEY`] with the
/// counts, the seed and, under `unlisted`, each later request's id and lengths
/// ([`InputsWriter::push_unlisted`]: about 80 bytes a request, where a listed 1,024-token
/// prompt takes some 6 KB; they wait in a side file until the list is closed). It is written to a temporary file and renamed by
/// [`InputsWriter::finish`].
#[derive(Debug)]
pub struct InputsWriter {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    out: Option<std::io::BufWriter<std::fs::File>>,
    failed: Option<std::io::Error>,
    limit: usize,
    listed: usize,
    requests: usize,
    /// Bytes written so far, and where each listed entry (its separator first) begins: a
    /// level that stops early keeps the entries of the requests that went out.
    written: u64,
    starts: Vec<u64>,
    /// The workload's seed, for the note of a file dropped before `finish`.
    seed: u64,
    /// The requests counted past the limit by [`Self::push_unlisted`], one line each.
    unlisted: UnlistedLog,
}

impl InputsWriter {
    /// Starts `path` (its temporary file beside it), listing at most `limit` entries.
    pub fn create(path: &Path, limit: usize) -> Result<Self, Error> {
        let tmp = path.with_extension("json.partial");
        let file = std::fs::File::create(&tmp).map_err(Error::io(&tmp))?;
        Ok(InputsWriter {
            path: path.to_owned(),
            tmp,
            out: Some(std::io::BufWriter::with_capacity(1 << 18, file)),
            failed: None,
            limit,
            listed: 0,
            requests: 0,
            written: 0,
            starts: Vec::new(),
            seed: 0,
            unlisted: UnlistedLog::new(path.with_extension("json.unlisted.partial")),
        })
    }

    /// Sets the seed the note names when the writer is dropped without [`Self::finish`].
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Writes out what is buffered and reports the first write error so far: a caller that
    /// wrote the entries ahead of its level learns of a full disk before the level starts.
    pub fn flush(&mut self) -> Result<(), Error> {
        if let (Some(out), None) = (self.out.as_mut(), &self.failed) {
            if let Err(e) = std::io::Write::flush(out) {
                self.failed = Some(e);
            }
        }
        match &self.failed {
            Some(e) => Err(Error::io(&self.tmp)(std::io::Error::new(
                e.kind(),
                e.to_string(),
            ))),
            None => Ok(()),
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if let (Some(out), None) = (self.out.as_mut(), &self.failed) {
            match std::io::Write::write_all(out, bytes) {
                Ok(()) => self.written += bytes.len() as u64,
                Err(e) => self.failed = Some(e),
            }
        }
    }

    /// Keeps the first `listed` entries (fewer than were pushed: the rest are cut from the
    /// file) and counts `requests` sent: for a level that stopped early, whose unsent
    /// requests' entries were written ahead of it. The file then reads as if only those had
    /// been pushed.
    pub fn keep_first(&mut self, listed: usize, requests: usize) {
        use std::io::{Seek, SeekFrom, Write};
        self.requests = requests;
        self.unlisted
            .keep_first(requests.saturating_sub(listed.min(self.listed)));
        let Some(&at) = self.starts.get(listed) else {
            return;
        };
        self.listed = listed;
        self.starts.truncate(listed);
        self.written = at;
        if let (Some(out), None) = (self.out.as_mut(), &self.failed) {
            let cut = out.flush().and_then(|()| {
                let file = out.get_mut();
                file.set_len(at)?;
                file.seek(SeekFrom::Start(at)).map(|_| ())
            });
            if let Err(e) = cut {
                self.failed = Some(e);
            }
        }
    }

    /// Counts one sent request and lists its entry (from [`render_input_entry`]) while under
    /// the limit.
    pub fn push(&mut self, rendered: &[u8]) {
        self.requests += 1;
        if self.listed >= self.limit {
            return;
        }
        let head: &[u8] = if self.listed == 0 {
            b"{\n  \"data\": [\n"
        } else {
            b",\n"
        };
        self.starts.push(self.written);
        self.write(head);
        self.write(rendered);
        self.listed += 1;
    }

    /// True once `limit` entries are listed (later ones are only counted).
    pub fn is_full(&self) -> bool {
        self.listed >= self.limit
    }

    /// Counts `n` sent requests without listing them (past the limit anyway).
    pub fn skip(&mut self, n: usize) {
        self.requests += n;
    }

    /// Counts one sent request past the limit, keeping its id and lengths for the note's
    /// `unlisted` list (listed in full instead while under the limit is the caller's job:
    /// see [`Self::is_full`]).
    pub fn push_unlisted(&mut self, entry: Unlisted) {
        self.requests += 1;
        if self.failed.is_none() {
            if let Err(e) = self.unlisted.push(&entry) {
                self.failed = Some(e);
            }
        }
    }

    /// Requests counted so far.
    pub fn requests(&self) -> usize {
        self.requests
    }

    /// Closes the list (with the counts when some requests were not listed; `seed` is the
    /// workload's, which regenerates synthetic prompts) and renames the file into place.
    pub fn finish(mut self, seed: u64) -> Result<(), Error> {
        self.seed = seed;
        self.close()
    }

    /// [`Self::finish`] with the seed given at creation; once.
    fn close(&mut self) -> Result<(), Error> {
        if self.out.is_none() && self.failed.is_none() {
            return Ok(());
        }
        let seed = self.seed;
        let tail = if self.listed == 0 {
            "{\n  \"data\": []".to_owned()
        } else {
            "\n  ]".to_owned()
        };
        self.write(tail.as_bytes());
        if self.requests > self.listed {
            // Every request past the listed ones is in `unlisted` unless some were only
            // counted (`skip`, or `push` past the limit).
            let complete = self.unlisted.kept() == self.requests - self.listed;
            let note = format!(
                "the first {} of {} requests are listed (--inputs-limit); the workload's settings and seed regenerate the rest{}",
                self.listed,
                self.requests,
                if complete { ", whose ids and lengths `unlisted` gives" } else { "" },
            );
            let mut head = format!(
                ",\n  \"{INPUTS_NOTE_KEY}\": {{\n    \"listed\": {},\n    \"requests\": {},\n    \"seed\": {seed},\n    \"note\": ",
                self.listed, self.requests
            )
            .into_bytes();
            kneepoint_core::json_text::write_json_str(&mut head, &note);
            head.extend_from_slice(b",\n    \"unlisted\": [");
            self.write(&head);
            let mut log = std::mem::replace(&mut self.unlisted, UnlistedLog::new(PathBuf::new()));
            let any = log.kept() > 0;
            if any {
                self.write(b"\n      ");
            }
            if let Err(e) = log.copy_into(",\n      ", |bytes| self.write(bytes)) {
                self.failed.get_or_insert(e);
            }
            self.write(if any {
                &b"\n    ]\n  }"[..]
            } else {
                &b"]\n  }"[..]
            });
        }
        self.write(b"\n}");
        let flushed = match self.out.take() {
            Some(mut out) => std::io::Write::flush(&mut out),
            None => Ok(()),
        };
        let done = match self.failed.take().map_or(flushed, Err) {
            Ok(()) => std::fs::rename(&self.tmp, &self.path).map_err(Error::io(&self.path)),
            Err(e) => Err(Error::io(&self.tmp)(e)),
        };
        if done.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        done
    }
}

/// A writer dropped before [`InputsWriter::finish`] (its level ended in an error) still leaves
/// a whole `inputs.json` listing what it was given, as one written before the level did.
impl Drop for InputsWriter {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entry(i: usize) -> InputEntry {
        InputEntry {
            session_id: i.to_string(),
            payloads: vec![
                serde_json::json!({"messages": [{"role": "user", "content": format!("prompt {i}\nline")}], "max_tokens": 4}),
            ],
        }
    }

    /// The entry as `serde_json` pretty-prints it, every line indented by four: what
    /// [`render_input_entry`] must write.
    fn rendered_by_serde_json(entry: &InputEntry) -> Vec<u8> {
        let body = serde_json::to_string_pretty(entry).unwrap();
        format!("    {}", body.replace('\n', "\n    ")).into_bytes()
    }

    #[test]
    fn an_entry_is_what_serde_json_pretty_prints_indented() {
        let odd = InputEntry {
            session_id: "7\"\u{1}".into(),
            payloads: vec![
                serde_json::json!({"model": "m", "messages": [{"role": "system", "content": "é\t"},
                    {"role": "user", "content": [{"type": "text", "text": "x"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}],
                    "stream": false, "temperature": 0.7, "stop": [], "logit_bias": {}, "seed": null}),
                serde_json::json!([]),
            ],
        };
        let none = InputEntry {
            session_id: "0".into(),
            payloads: vec![],
        };
        for e in [entry(3), odd, none] {
            assert_eq!(render_input_entry(&e), rendered_by_serde_json(&e));
        }
    }

    #[test]
    fn the_streamed_file_is_the_plain_one_up_to_its_limit_and_says_how_much_it_lists() {
        let dir = tempfile::tempdir().unwrap();
        for n in [0usize, 1, 3] {
            let entries: Vec<InputEntry> = (0..n).map(entry).collect();
            let (plain, streamed) = (dir.path().join("a.json"), dir.path().join("b.json"));
            write_inputs_json(&plain, &entries).unwrap();
            let mut w = InputsWriter::create(&streamed, 10).unwrap();
            entries.iter().for_each(|e| w.push(&render_input_entry(e)));
            w.finish(7).unwrap();
            assert_eq!(
                std::fs::read(&plain).unwrap(),
                std::fs::read(&streamed).unwrap()
            );
            assert!(!dir.path().join("b.json.partial").exists());
        }
        let path = dir.path().join("c.json");
        let mut w = InputsWriter::create(&path, 2).unwrap();
        (0..5).for_each(|i| w.push(&render_input_entry(&entry(i))));
        assert_eq!(w.requests(), 5);
        w.finish(42).unwrap();
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(doc["data"].as_array().unwrap().len(), 2);
        assert_eq!(doc["data"][1]["session_id"], "1");
        assert_eq!(doc[INPUTS_NOTE_KEY]["requests"], 5);
        assert_eq!(doc[INPUTS_NOTE_KEY]["listed"], 2);
        assert_eq!(doc[INPUTS_NOTE_KEY]["seed"], 42);
    }

    #[test]
    fn requests_past_the_limit_are_kept_as_ids_and_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let u = |id: u64| Unlisted {
            id,
            input_tokens: Some(100 + id as u32),
            max_output_tokens: id.is_multiple_of(2).then_some(8),
        };
        for (limit, cut) in [(2usize, None), (0, None), (2, Some(3usize))] {
            let path = dir.path().join(format!("u{limit}{cut:?}.json"));
            let mut w = InputsWriter::create(&path, limit).unwrap();
            for i in 0..5u64 {
                if w.is_full() {
                    w.push_unlisted(u(i));
                } else {
                    w.push(&render_input_entry(&entry(i as usize)));
                }
            }
            if let Some(sent) = cut {
                // a level that stopped after three of its five requests went out
                w.keep_first(sent.min(limit), sent);
            }
            w.finish(11).unwrap();
            let doc: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let sent = cut.unwrap_or(5);
            let note = &doc[INPUTS_NOTE_KEY];
            assert_eq!(note["requests"], sent);
            assert_eq!(note["listed"], limit);
            assert_eq!(note["seed"], 11);
            assert_eq!(doc["data"].as_array().unwrap().len(), limit);
            let unlisted = note["unlisted"].as_array().unwrap();
            assert_eq!(unlisted.len(), sent - limit);
            for (k, e) in unlisted.iter().enumerate() {
                let id = (limit + k) as u64;
                assert_eq!(e["session_id"], id.to_string());
                assert_eq!(e["input_tokens"], 100 + id);
                let osl = if id.is_multiple_of(2) {
                    serde_json::json!(8)
                } else {
                    serde_json::Value::Null
                };
                assert_eq!(e["max_output_tokens"], osl);
            }
            let text = note["note"].as_str().unwrap();
            assert_eq!(text.contains("`unlisted` gives"), sent > limit, "{text}");
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
                .collect();
            assert!(left.is_empty(), "side files left: {left:?}");
        }
        // Requests only counted (`skip`) are not in the list, and the note does not claim
        // they are.
        let path = dir.path().join("skipped.json");
        let mut w = InputsWriter::create(&path, 1).unwrap();
        w.push(&render_input_entry(&entry(0)));
        w.push_unlisted(u(1));
        w.skip(2);
        w.finish(3).unwrap();
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let note = &doc[INPUTS_NOTE_KEY];
        assert_eq!(note["requests"], 4);
        assert_eq!(note["unlisted"].as_array().unwrap().len(), 1);
        assert!(!note["note"].as_str().unwrap().contains("`unlisted` gives"));
    }

    #[test]
    fn a_writer_dropped_unfinished_still_leaves_a_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let (dropped, plain) = (dir.path().join("d.json"), dir.path().join("p.json"));
        {
            let mut w = InputsWriter::create(&dropped, 2).unwrap().with_seed(5);
            (0..3).for_each(|i| w.push(&render_input_entry(&entry(i))));
            w.flush().unwrap();
        }
        let mut p = InputsWriter::create(&plain, 2).unwrap();
        (0..3).for_each(|i| p.push(&render_input_entry(&entry(i))));
        p.finish(5).unwrap();
        assert_eq!(
            std::fs::read(&dropped).unwrap(),
            std::fs::read(&plain).unwrap()
        );
        assert!(!dir.path().join("d.json.partial").exists());
    }

    #[test]
    fn keeping_the_first_entries_writes_what_pushing_only_them_would() {
        let dir = tempfile::tempdir().unwrap();
        // (pushed, limit, kept, requests counted)
        for (pushed, limit, keep, requests) in
            [(5, 10, 3, 3), (5, 10, 0, 0), (5, 2, 1, 4), (3, 10, 3, 3)]
        {
            let (cut, plain) = (dir.path().join("cut.json"), dir.path().join("plain.json"));
            let mut w = InputsWriter::create(&cut, limit).unwrap();
            (0..pushed).for_each(|i| w.push(&render_input_entry(&entry(i))));
            w.keep_first(keep.min(limit), requests);
            w.finish(9).unwrap();
            let mut p = InputsWriter::create(&plain, limit).unwrap();
            (0..keep).for_each(|i| p.push(&render_input_entry(&entry(i))));
            p.skip(requests - keep.min(requests));
            p.finish(9).unwrap();
            assert_eq!(
                std::fs::read_to_string(&cut).unwrap(),
                std::fs::read_to_string(&plain).unwrap(),
                "{pushed} pushed, {keep} kept"
            );
        }
    }
}
