//! A server's command given as one line, split into arguments as a shell would.

/// Splits a command line as a shell would: whitespace between words, single quotes
/// literal, double quotes with `\"` and `\\`, a backslash outside quotes escapes the next
/// character. No variables, globs or operators.
pub(crate) fn split_line(line: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("an unclosed single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("an unclosed double quote".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("an unclosed double quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err("a trailing backslash".into()),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_as_a_shell_would() {
        assert_eq!(
            split_line(r#"vllm serve  --model "/m/a b" --x='{"k": 1}' a\ b ''"#).unwrap(),
            [
                "vllm",
                "serve",
                "--model",
                "/m/a b",
                r#"--x={"k": 1}"#,
                "a b",
                ""
            ]
        );
        assert!(split_line("a 'b").is_err());
        assert!(split_line("a \"b").is_err());
        assert!(split_line("a\\").is_err());
    }
}
