//! Counting long texts in bounded pieces. A byte-pair tokenizer's pre-tokeniser splits text at
//! whitespace, and the merge step then works on one "word" at a time; a server's answer with no
//! whitespace at all (one unbroken 16 MiB word) makes that one word cost about 55 bytes of
//! memory per byte of text and seconds of CPU. Texts longer than [`PIECE_BYTES`] are therefore
//! counted piece by piece. Each piece ends just before a space that follows a non-space (where
//! the pre-tokenisers of o200k_base and Llama-style tokenizers start a new word anyway, so the
//! count is nearly always unchanged), else before any whitespace, else at a character boundary
//! (a split inside a word). A cut may add a token (a split word; punctuation that the
//! pre-tokeniser would have joined to the next whitespace): at most one per 8 KiB piece.

/// The longest piece handed to the tokenizer at once.
pub const PIECE_BYTES: usize = 8 * 1024;

/// `text` cut into pieces of at most `max` bytes (at least one character each), in order;
/// their concatenation is `text`.
pub fn pieces(text: &str, max: usize) -> impl Iterator<Item = &str> {
    let max = max.max(4);
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() <= max {
            return Some(std::mem::take(&mut rest));
        }
        let mut end = max;
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        // The last space after a non-space in the window: the piece ends just before it, so
        // that the space stays with the word after it; else the last whitespace; else a hard cut.
        let window = &rest[..end];
        let space = window
            .char_indices()
            .rev()
            .find(|(i, c)| {
                *c == ' '
                    && *i > 0
                    && window[..*i]
                        .chars()
                        .next_back()
                        .is_some_and(|p| !p.is_whitespace())
            })
            .map(|(i, _)| i);
        let cut = space
            .or_else(|| {
                window
                    .char_indices()
                    .rev()
                    .find(|(i, c)| *i > 0 && c.is_whitespace())
                    .map(|(i, _)| i)
            })
            .unwrap_or(end);
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_rebuild_the_text_within_the_bound() {
        let texts = [
            String::new(),
            "short".to_string(),
            "word ".repeat(5000),
            "x".repeat(20_000),
            "é".repeat(9_999),
            format!("{}  {}", "a".repeat(9000), "b ".repeat(3000)),
        ];
        for t in &texts {
            let parts: Vec<&str> = pieces(t, PIECE_BYTES).collect();
            assert_eq!(parts.concat(), *t);
            assert!(parts
                .iter()
                .all(|p| !p.is_empty() && p.len() <= PIECE_BYTES));
        }
    }

    #[test]
    fn cuts_fall_before_whitespace_when_the_window_has_some() {
        let t = "ab cd ef gh";
        let parts: Vec<&str> = pieces(t, 7).collect();
        assert_eq!(parts, vec!["ab cd", " ef gh"]);
        let unbroken: Vec<&str> = pieces("abcdefghij", 4).collect();
        assert_eq!(unbroken, vec!["abcd", "efgh", "ij"]);
    }
}
