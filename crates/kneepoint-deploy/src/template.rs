//! Command templates: `{name}` placeholders filled from a candidate's settings (`{port}`,
//! `{host}`, `{model}`, `{max_num_seqs}`...), `{{` and `}}` for literal braces. Every
//! placeholder is checked against the known names before anything is started.

use std::collections::{BTreeMap, BTreeSet};

use crate::Error;

/// The placeholders in `text`, in order of appearance (repeats kept once).
pub fn placeholders(text: &str) -> Result<Vec<String>, Error> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for piece in pieces(text)? {
        if let Piece::Name(n) = piece {
            if seen.insert(n.to_owned()) {
                out.push(n.to_owned());
            }
        }
    }
    Ok(out)
}

/// `text` with each `{name}` replaced by `values[name]`; an unknown name is an error naming the
/// known ones.
pub fn render(text: &str, values: &BTreeMap<String, String>) -> Result<String, Error> {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text)? {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Brace(c) => out.push(c),
            Piece::Name(n) => match values.get(n) {
                Some(v) => out.push_str(v),
                None => {
                    return Err(Error::Invalid(format!(
                        "the command names {{{n}}}, which is not a setting of this candidate (known: {})",
                        values.keys().map(|k| format!("{{{k}}}")).collect::<Vec<_>>().join(", ")
                    )))
                }
            },
        }
    }
    Ok(out)
}

enum Piece<'a> {
    Text(&'a str),
    Brace(char),
    Name(&'a str),
}

fn pieces(text: &str) -> Result<Vec<Piece<'_>>, Error> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(['{', '}']) {
        if i > 0 {
            out.push(Piece::Text(&rest[..i]));
        }
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push(Piece::Brace('{'));
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push(Piece::Brace('}'));
            rest = after;
        } else if tail.starts_with('}') {
            return Err(Error::Invalid(format!(
                "a lone '}}' in {text:?}: write '}}}}' for a literal brace"
            )));
        } else {
            let Some(end) = tail.find('}') else {
                return Err(Error::Invalid(format!(
                    "an unclosed '{{' in {text:?}: write '{{{{' for a literal brace"
                )));
            };
            let name = &tail[1..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(Error::Invalid(format!(
                    "{{{name}}} in {text:?} is not a placeholder (letters, digits and _ only)"
                )));
            }
            out.push(Piece::Name(name));
            rest = &tail[end + 1..];
        }
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// `argv` as one line a shell reads back the same (single quotes where needed).
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn fills_placeholders_and_keeps_escaped_braces() {
        let v = values(&[("port", "8123"), ("max_num_seqs", "64")]);
        assert_eq!(
            render("--port={port} --max-num-seqs {max_num_seqs}", &v).unwrap(),
            "--port=8123 --max-num-seqs 64"
        );
        assert_eq!(render(r#"{{"a": {port}}}"#, &v).unwrap(), r#"{"a": 8123}"#);
        assert_eq!(
            placeholders("{port} {max_num_seqs} {port}").unwrap(),
            ["port", "max_num_seqs"]
        );
    }

    #[test]
    fn unknown_and_malformed_placeholders_are_named() {
        let v = values(&[("port", "1")]);
        let e = render("--tp {tensor_parallel}", &v)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("{tensor_parallel}") && e.contains("{port}"),
            "{e}"
        );
        assert!(render("{port", &v)
            .unwrap_err()
            .to_string()
            .contains("unclosed"));
        assert!(render("port}", &v)
            .unwrap_err()
            .to_string()
            .contains("lone"));
        assert!(render("{a b}", &v)
            .unwrap_err()
            .to_string()
            .contains("not a placeholder"));
    }

    #[test]
    fn shell_line_quotes_what_a_shell_would_split() {
        let argv: Vec<String> = ["vllm", "serve", "--x", "a b", "it's", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shell_line(&argv), r"vllm serve --x 'a b' 'it'\''s' ''");
    }
}
