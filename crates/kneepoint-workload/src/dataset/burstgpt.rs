//! BurstGPT's CSV (the Azure OpenAI traces published with the BurstGPT paper): one row per
//! request, `Timestamp` (seconds from the trace's start), `Model`, `Request tokens`,
//! `Response tokens`, `Total tokens`, `Log Type`. Read as a trace: the send time in ms and the
//! two lengths; rows the original service failed (no response tokens) or that asked nothing
//! are left out. The fields hold no quotes or commas, so the rows are split by hand rather than
//! with a CSV crate; a row that does not fit the header is refused with its line.

use std::path::Path;

use super::parse::TraceEntry;
use crate::Error;

fn err(path: &Path, line: usize, reason: impl Into<String>) -> Error {
    Error::Dataset {
        path: path.to_owned(),
        line: Some(line),
        reason: reason.into(),
    }
}

/// Parses a BurstGPT CSV into trace entries, in file order.
pub fn parse_burstgpt(path: &Path, text: &str) -> Result<Vec<TraceEntry>, Error> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((h, header)) = lines.next() else {
        return Ok(Vec::new());
    };
    // a file saved by a spreadsheet may start with a byte-order mark
    let header = header.trim_start_matches('\u{feff}');
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    let column = |name: &str| {
        names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                err(
                    path,
                    h + 1,
                    format!("no {name:?} column: a BurstGPT CSV has Timestamp, Request tokens and Response tokens"),
                )
            })
    };
    let (t, req, resp) = (
        column("Timestamp")?,
        column("Request tokens")?,
        column("Response tokens")?,
    );
    let mut out = Vec::new();
    for (i, line) in lines {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != names.len() {
            return Err(err(
                path,
                i + 1,
                format!("{} fields, the header has {}", fields.len(), names.len()),
            ));
        }
        let seconds: f64 = fields[t]
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s >= 0.0)
            .ok_or_else(|| {
                err(
                    path,
                    i + 1,
                    format!("Timestamp {:?} is not seconds", fields[t]),
                )
            })?;
        let tokens = |k: usize, what: &str| -> Result<u32, Error> {
            fields[k]
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0 && v.fract() == 0.0)
                .ok_or_else(|| {
                    err(
                        path,
                        i + 1,
                        format!("{what} {:?} is not a token count", fields[k]),
                    )
                })
                .and_then(|v| {
                    if v > f64::from(crate::MAX_TOKENS) {
                        return Err(err(
                            path,
                            i + 1,
                            format!(
                                "{what} {:?}: at most {} tokens",
                                fields[k],
                                crate::MAX_TOKENS
                            ),
                        ));
                    }
                    Ok(v as u32)
                })
        };
        let (input, output) = (
            tokens(req, "Request tokens")?,
            tokens(resp, "Response tokens")?,
        );
        if input == 0 || output == 0 {
            continue;
        }
        out.push(TraceEntry {
            timestamp: Some((seconds * 1000.0).round() as u64),
            session_id: None,
            delay: None,
            input_length: input,
            output_length: output,
            hash_ids: Vec::new(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_trace_entries_and_failed_ones_are_left_out() {
        let csv =
            "\u{feff}Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\r\n\
                   5,ChatGPT,472,18,490,Conversation log\n\
                   45.5,GPT-4,1087,0,1087,Conversation log\n\
                   \n\
                   118,ChatGPT,417,218,635,API log\n";
        let e = parse_burstgpt(Path::new("b.csv"), csv).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(
            (
                e[0].timestamp.unwrap(),
                e[0].input_length,
                e[0].output_length
            ),
            (5000, 472, 18)
        );
        assert_eq!(
            (
                e[1].timestamp.unwrap(),
                e[1].input_length,
                e[1].output_length
            ),
            (118_000, 417, 218)
        );
        assert!(e.iter().all(|e| e.hash_ids.is_empty()));
    }

    #[test]
    fn broken_rows_are_refused_with_their_line() {
        let head = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
        for (row, says) in [
            ("5,ChatGPT,472,18,490\n", "5 fields"),
            ("soon,ChatGPT,472,18,490,x\n", "Timestamp"),
            ("5,ChatGPT,47.5,18,490,x\n", "Request tokens"),
            ("5,ChatGPT,472,-1,490,x\n", "Response tokens"),
        ] {
            let e = parse_burstgpt(Path::new("b.csv"), &format!("{head}{row}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says) && e.contains(":2"), "{row}: {e}");
        }
        let e = parse_burstgpt(Path::new("b.csv"), "time,in,out\n1,2,3\n").unwrap_err();
        assert!(e.to_string().contains("Timestamp"), "{e}");
    }
}
