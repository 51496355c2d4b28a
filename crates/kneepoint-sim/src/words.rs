//! The words the simulator "generates": one word per token, so a whitespace word count of the
//! output equals the token count.

const WORDS: &[&str] = &[
    "the",
    "model",
    "answers",
    "with",
    "a",
    "steady",
    "stream",
    "of",
    "plain",
    "words",
    "that",
    "count",
    "as",
    "one",
    "token",
    "each",
    "so",
    "clients",
    "can",
    "check",
    "their",
    "numbers",
    "against",
    "what",
    "server",
    "really",
    "sent",
    "during",
    "this",
    "benchmark",
    "run",
    "today",
];

/// The text of token `index` of sequence `seq`.
pub(crate) fn token_text(seq: u64, index: u32) -> &'static str {
    let i = (seq.wrapping_mul(7).wrapping_add(u64::from(index))) % WORDS.len() as u64;
    WORDS[i as usize]
}
