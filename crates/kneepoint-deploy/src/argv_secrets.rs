//! The secrets a server's command line carries, found by where they stand: after a flag whose
//! name says secret (`--api-key X`, `--hf-token=X`, `--auth X`, `-k X`), in an assignment
//! (`HF_TOKEN=X vllm serve`), or in a header (`Authorization: Bearer X`), also inside one
//! argument that a shell splits again (`sh -c "vllm serve --api-key X"`). Each one found is
//! registered with [`kneepoint_core::secrets`] (so a server that prints its arguments has them
//! scrubbed from its log) and masked: `[redacted]` where the line is shown, a reference to a
//! Kubernetes Secret in a manifest.

use kneepoint_core::secrets::{self, name_is_secret};
use kneepoint_core::REDACTED;

/// `argv` with each secret value replaced by what `mask` makes of it, and every value already
/// registered as a secret scrubbed. Found values are registered.
pub(crate) fn mask_argv(argv: &[String], mut mask: impl FnMut(&str) -> String) -> Vec<String> {
    let mut out: Vec<String> = argv.to_vec();
    let mut hide_next = false;
    for a in out.iter_mut() {
        if a.chars().any(char::is_whitespace) {
            // One argument a shell splits again (`sh -c "..."`), or a header.
            hide_next = hide_next && !a.starts_with('-');
            *a = if std::mem::take(&mut hide_next) {
                secrets::register(a);
                mask(a)
            } else {
                mask_words(a, &mut mask)
            };
        } else {
            let (masked, next) = mask_word(a, hide_next, &mut mask);
            *a = masked;
            hide_next = next;
        }
        secrets::scrub_string(a);
    }
    out
}

/// `argv` as logs, recipes and error messages show it: secret values as `[redacted]`.
pub fn redact_argv(argv: &[String]) -> Vec<String> {
    mask_argv(argv, |_| REDACTED.to_owned())
}

/// Masks one word; returns it and whether the next word is a secret value.
fn mask_word(word: &str, hide: bool, mask: &mut impl FnMut(&str) -> String) -> (String, bool) {
    if hide && !word.starts_with('-') {
        secrets::register(word);
        return (mask(word), false);
    }
    if let Some(flag) = word.strip_prefix('-') {
        let flag = flag.trim_start_matches('-');
        return match flag.split_once('=') {
            Some((name, value)) if name_is_secret(name) => {
                secrets::register(value);
                let kept = &word[..word.len() - value.len()];
                (format!("{kept}{}", mask(value)), false)
            }
            Some(_) => (word.to_owned(), false),
            // `-k KEY` (curl-like clients, some servers): a short flag that takes a key.
            None => (word.to_owned(), name_is_secret(flag) || flag == "k"),
        };
    }
    if let Some((name, value)) = word.split_once('=') {
        // `HF_TOKEN=x vllm serve` (an assignment before a command).
        let is_name =
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if is_name && name_is_secret(name) && !value.is_empty() {
            secrets::register(value);
            return (format!("{name}={}", mask(value)), false);
        }
    }
    if let Some((name, value)) = word.split_once(':') {
        // `Authorization: Bearer X` or `api-key:X` as one word.
        let cred = value.trim_start();
        let cred = match cred.split_once(' ') {
            Some((scheme, rest)) if is_auth_scheme(scheme) => rest.trim_start(),
            _ => cred,
        };
        let is_name = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if is_name && name_is_secret(name) && !cred.is_empty() {
            secrets::register(cred);
            let kept = &word[..word.len() - cred.len()];
            return (format!("{kept}{}", mask(cred)), false);
        }
    }
    // `Authorization:` or `api-key:` ends a header's name; its value follows.
    let header_name = word.strip_suffix(':').is_some_and(name_is_secret);
    (word.to_owned(), header_name)
}

/// Masks the words of an argument that a shell splits again, keeping everything else of it
/// (quotes, spacing) as it was.
fn mask_words(text: &str, mask: &mut impl FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut hide_next = false;
    let mut at = 0;
    // `Authorization: Bearer X`: the scheme word and the credential both follow the name.
    let mut scheme_then_value = false;
    for (start, end) in word_spans(text) {
        out.push_str(&text[at..start]);
        let raw = &text[start..end];
        let word = unquote(raw);
        if hide_next && !scheme_then_value && is_auth_scheme(&word) {
            out.push_str(raw);
            scheme_then_value = true;
        } else {
            let (masked, next) = mask_word(&word, hide_next, mask);
            match raw.chars().next() {
                _ if masked == word => out.push_str(raw),
                // A quoted word stays one word.
                Some(q @ ('\'' | '"')) => {
                    out.push(q);
                    out.push_str(&masked);
                    out.push(q);
                }
                _ => out.push_str(&masked),
            }
            scheme_then_value = false;
            hide_next = next;
        }
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

fn is_auth_scheme(word: &str) -> bool {
    ["Bearer", "Basic", "Token", "Digest"]
        .iter()
        .any(|s| word.eq_ignore_ascii_case(s))
}

/// The byte spans of the words of `text` as a shell splits them (quotes keep spaces inside a
/// word; a backslash escapes the next character).
fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (_, '\\') if quote != Some('\'') => {
                start.get_or_insert(i);
                escaped = true;
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => {
                start.get_or_insert(i);
                quote = Some(c);
            }
            (None, c) if c.is_whitespace() || c == ';' || c == '&' || c == '|' => {
                if let Some(s) = start.take() {
                    spans.push((s, i));
                }
            }
            (None, _) => {
                start.get_or_insert(i);
            }
        }
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    spans
}

/// A word with its quotes and escapes taken away.
fn unquote(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut quote = None;
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (q, '\\') if q != Some('\'') => out.extend(chars.next()),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn secret_flags_are_redacted() {
        let argv = strings(&[
            "vllm",
            "serve",
            "--api-key",
            "sk-1",
            "--hf-token=hf_2",
            "--max-num-seqs",
            "8",
            "--api_key",
            "--port",
            "80",
            "--max-num-batched-tokens",
            "8192",
            "--tokenizer",
            "t",
            "--auth",
            "basic-auth-value",
            "-k",
            "short-flag-key",
        ]);
        assert_eq!(
            redact_argv(&argv),
            [
                "vllm",
                "serve",
                "--api-key",
                "[redacted]",
                "--hf-token=[redacted]",
                "--max-num-seqs",
                "8",
                "--api_key",
                "--port",
                "80",
                "--max-num-batched-tokens",
                "8192",
                "--tokenizer",
                "t",
                "--auth",
                "[redacted]",
                "-k",
                "[redacted]",
            ]
        );
        // What was found is a secret of the process from now on.
        assert!(secrets::is_registered("basic-auth-value"));
        assert!(secrets::is_registered("short-flag-key"));
    }

    #[test]
    fn secrets_inside_a_shell_string_are_redacted_and_the_rest_kept() {
        let argv = strings(&[
            "sh",
            "-c",
            "HF_TOKEN=hf_inline_123 exec vllm serve --api-key 'sk inner 1' --port 80 --hf-token=\"tok-inner-2\"; curl -H 'Authorization: Bearer bearer-inner-3' -H X-Api-Key:\\ sep",
        ]);
        let shown = redact_argv(&argv);
        let line = &shown[2];
        for secret in [
            "hf_inline_123",
            "sk inner 1",
            "tok-inner-2",
            "bearer-inner-3",
        ] {
            assert!(!line.contains(secret), "{line}");
        }
        assert!(
            line.contains("exec vllm serve --api-key '[redacted]' --port 80"),
            "{line}"
        );
        assert!(line.contains("HF_TOKEN=[redacted]"), "{line}");
        // A header given as one argument.
        let argv = strings(&["curl", "-H", "api-key: hdr-arg-secret-4", "http://h/"]);
        let shown = redact_argv(&argv);
        assert!(!shown[2].contains("hdr-arg-secret-4"), "{shown:?}");
        assert_eq!(shown[3], "http://h/");
    }

    #[test]
    fn masks_can_be_references() {
        let argv = strings(&["serve", "--api-key", "sk-ref-secret-5"]);
        let mut seen = Vec::new();
        let shown = mask_argv(&argv, |v| {
            seen.push(v.to_owned());
            "$(REF)".into()
        });
        assert_eq!(shown, ["serve", "--api-key", "$(REF)"]);
        assert_eq!(seen, ["sk-ref-secret-5"]);
    }

    #[test]
    fn word_spans_follow_shell_quoting() {
        let t = r#"a 'b c' "d\" e" f\ g;h"#;
        let words: Vec<String> = word_spans(t)
            .into_iter()
            .map(|(s, e)| unquote(&t[s..e]))
            .collect();
        assert_eq!(words, ["a", "b c", "d\" e", "f g", "h"]);
    }
}
