//! `o200k_base`'s pre-tokenizer for ASCII text, by hand.
//!
//! tiktoken splits text into pieces with one regular expression before it runs BPE on each
//! piece; no token crosses a piece's edge, so a text's token count is the sum of its pieces'.
//! The expression needs a look-ahead (`\s+(?!\S)`), so `tiktoken-rs` runs it on
//! `fancy-regex`'s backtracking engine, and that engine is most of the cost of counting a
//! response's tokens: about 1,400 instructions per token, on the path of every request (the
//! client counts every answer to check the server's `usage`). For ASCII the expression's
//! classes are plain byte tests, so this module walks it by hand, alternative by alternative
//! in the expression's order, as the backtracking engine would. Text with any non-ASCII byte
//! is not split here ([`split_ascii`] returns `None`) and takes tiktoken's own path.
//!
//! The expression (`o200k_base`, alternatives in order; `P` = `[^\r\n\p{L}\p{N}]`, `C` = an
//! optional contraction `(?i:'s|'t|'re|'ve|'m|'ll|'d)`):
//! 1. `P? [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]* [\p{Ll}\p{Lm}\p{Lo}\p{M}]+ C`
//! 2. `P? [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+ [\p{Ll}\p{Lm}\p{Lo}\p{M}]* C`
//! 3. `\p{N}{1,3}`
//! 4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
//! 5. `\s*[\r\n]+`
//! 6. `\s+(?!\S)`
//! 7. `\s+`
//!
//! The tests check it against tiktoken's own count on generated prose and on random strings
//! dense in the characters where the alternatives differ.

fn is_space(b: u8) -> bool {
    // `\s` in ASCII: tab, line feed, vertical tab, form feed, carriage return, space.
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}

fn is_newline(b: u8) -> bool {
    b == b'\r' || b == b'\n'
}

/// `[^\r\n\p{L}\p{N}]`: the one optional character before a word.
fn is_word_prefix(b: u8) -> bool {
    !is_newline(b) && !b.is_ascii_alphanumeric()
}

/// `[^\s\p{L}\p{N}]`: punctuation, symbols and control characters.
fn is_symbol(b: u8) -> bool {
    !is_space(b) && !b.is_ascii_alphanumeric()
}

fn run(s: &[u8], from: usize, class: impl Fn(u8) -> bool) -> usize {
    s.get(from..)
        .map_or(0, |rest| rest.iter().take_while(|&&b| class(b)).count())
}

/// The end of an optional contraction at `at` (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`,
/// any case).
fn contraction(s: &[u8], at: usize) -> usize {
    if s.get(at) != Some(&b'\'') {
        return at;
    }
    let lower = |k: usize| s.get(at + k).map(u8::to_ascii_lowercase);
    match (lower(1), lower(2)) {
        (Some(b's' | b't' | b'm' | b'd'), _) => at + 2,
        (Some(b'r'), Some(b'e')) | (Some(b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => at + 3,
        _ => at,
    }
}

/// Alternatives 1 and 2: a word, with its optional leading character and contraction.
fn word(s: &[u8], i: usize) -> Option<usize> {
    // `P?` is greedy: with the character first. Without it, the word would have to start at
    // a character that `P` takes, which is never a letter, so that path always fails.
    let p = if is_word_prefix(s[i]) { i + 1 } else { i };
    let upper = p + run(s, p, |b| b.is_ascii_uppercase());
    let lower = upper + run(s, upper, |b| b.is_ascii_lowercase());
    // 1: upper* lower+ (fewer capitals never help: the next one is not lower case).
    // 2: upper+ lower*, reached when 1 failed, so lower* is empty.
    (lower > upper || upper > p).then(|| contraction(s, lower))
}

/// The end of the piece that starts at `i` (`i < s.len()`, every byte ASCII).
fn piece_end(s: &[u8], i: usize) -> usize {
    if let Some(end) = word(s, i) {
        return end;
    }
    let b = s[i];
    if b.is_ascii_digit() {
        return i + run(s, i, |b| b.is_ascii_digit()).min(3);
    }
    // 4: ` ?` greedy, then one or more symbols, then `[\r\n/]*`.
    let symbols_from = if b == b' ' && s.get(i + 1).is_some_and(|&c| is_symbol(c)) {
        Some(i + 1)
    } else if is_symbol(b) {
        Some(i)
    } else {
        None
    };
    if let Some(from) = symbols_from {
        let end = from + run(s, from, is_symbol);
        return end + run(s, end, |c| is_newline(c) || c == b'/');
    }
    // What is left starts with white space.
    let spaces = run(s, i, is_space);
    // 5: `\s*` backs off to the run's last line break, which `[\r\n]+` then takes.
    if let Some(last) = s[i..i + spaces].iter().rposition(|&c| is_newline(c)) {
        return i + last + 1;
    }
    // 6: the whole run at the end of the text; else all but its last space, if that leaves
    // any (the last one then starts the next piece); 7: a lone space before a non-space.
    if i + spaces == s.len() || spaces == 1 {
        i + spaces
    } else {
        i + spaces - 1
    }
}

/// The pieces `o200k_base`'s expression splits `text` into, or `None` when `text` holds a
/// non-ASCII character.
pub(crate) fn split_ascii(text: &str) -> Option<impl Iterator<Item = &str>> {
    let s = text.as_bytes();
    if !s.is_ascii() {
        return None;
    }
    let mut i = 0;
    Some(std::iter::from_fn(move || {
        if i >= s.len() {
            return None;
        }
        let end = piece_end(s, i).clamp(i + 1, s.len());
        // ASCII: every byte index is a character boundary.
        let piece = text.get(i..end);
        i = end;
        piece
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn pieces(t: &str) -> Vec<&str> {
        split_ascii(t).unwrap().collect()
    }

    #[test]
    fn splits_as_the_expression_does() {
        assert_eq!(pieces("Hello world"), ["Hello", " world"]);
        assert_eq!(pieces("don't STOP"), ["don't", " STOP"]);
        assert_eq!(
            pieces("HELLOworld helloWorld"),
            ["HELLOworld", " hello", "World"]
        );
        assert_eq!(pieces(" 12345"), [" ", "123", "45"]);
        assert_eq!(pieces("a  b"), ["a", " ", " b"]);
        assert_eq!(pieces("a   "), ["a", "   "]);
        assert_eq!(pieces("x.\n\ny"), ["x", ".\n\n", "y"]);
        assert_eq!(pieces("x \n \n  y"), ["x", " \n \n", " ", " y"]);
        assert_eq!(pieces("(Hello) ..."), ["(Hello", ")", " ..."]);
        assert_eq!(pieces("we'RE 'll"), ["we'RE", " '", "ll"]);
        assert_eq!(pieces("I'd it'S x'y"), ["I'd", " it'S", " x", "'y"]);
        assert_eq!(pieces(""), Vec::<&str>::new());
        assert!(split_ascii("café").is_none());
    }
}
