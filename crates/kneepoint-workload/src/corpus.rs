//! The text prompts are cut from: plain English prose generated deterministically from a
//! built-in vocabulary and sentence patterns (about 90k words, written for this project, so it
//! carries no licence of its own). Prompts are windows of its tokens; no file, no network.

use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ADJ: &[&str] = &[
    "quiet", "bright", "narrow", "ancient", "heavy", "gentle", "distant", "crowded", "simple",
    "careful", "broken", "golden", "restless", "steady", "hidden", "early", "patient", "silver",
    "sudden", "curious", "modest", "frozen", "hollow", "tired", "eager", "open", "pale", "proud",
    "rough", "shallow", "strange", "warm", "wide", "young", "busy", "clever", "honest", "loyal",
];
const NOUN: &[&str] = &[
    "river", "village", "engine", "garden", "window", "market", "bridge", "letter", "station",
    "mountain", "harbor", "library", "teacher", "farmer", "captain", "doctor", "traveler",
    "kitchen", "forest", "valley", "machine", "council", "journey", "lantern", "road", "tower",
    "ship", "field", "house", "winter", "morning", "evening", "storm", "question", "answer",
    "record", "signal", "window", "crowd", "friend", "stranger", "wagon", "mill", "school", "wall",
    "clock", "island", "meadow", "workshop", "cellar", "orchard", "festival", "number",
];
const VERB: &[&str] = &[
    "carried",
    "watched",
    "followed",
    "crossed",
    "opened",
    "repaired",
    "measured",
    "described",
    "visited",
    "remembered",
    "painted",
    "guarded",
    "counted",
    "reached",
    "joined",
    "lifted",
    "noticed",
    "built",
    "changed",
    "found",
    "kept",
    "left",
    "moved",
    "passed",
    "pulled",
    "turned",
    "studied",
    "answered",
    "welcomed",
    "warned",
    "sold",
    "bought",
    "cleaned",
    "wrote",
    "read",
];
const ADV: &[&str] = &[
    "slowly",
    "quietly",
    "again",
    "together",
    "carefully",
    "early",
    "at last",
    "once more",
    "without a word",
    "before noon",
    "after dark",
    "in silence",
    "with great care",
    "at once",
];
const PREP: &[&str] = &[
    "across", "beside", "toward", "behind", "under", "near", "beyond", "along", "through", "above",
    "around", "past", "inside", "outside", "against",
];
const DET: &[&str] = &[
    "the", "a", "that", "every", "one", "another", "some", "each", "our", "their",
];
const CONJ: &[&str] = &[
    "and", "but", "while", "because", "so", "although", "until", "after", "when",
];

fn pick<'a>(rng: &mut StdRng, words: &[&'a str]) -> &'a str {
    words[rng.random_range(0..words.len())]
}

fn phrase(rng: &mut StdRng, out: &mut String) {
    let det = pick(rng, DET);
    out.push_str(det);
    out.push(' ');
    if rng.random_bool(0.6) {
        out.push_str(pick(rng, ADJ));
        out.push(' ');
    }
    out.push_str(pick(rng, NOUN));
}

fn clause(rng: &mut StdRng, out: &mut String) {
    phrase(rng, out);
    out.push(' ');
    out.push_str(pick(rng, VERB));
    out.push(' ');
    phrase(rng, out);
    if rng.random_bool(0.5) {
        out.push(' ');
        out.push_str(pick(rng, PREP));
        out.push(' ');
        phrase(rng, out);
    }
    if rng.random_bool(0.3) {
        out.push(' ');
        out.push_str(pick(rng, ADV));
    }
}

fn capitalise(s: &mut String, from: usize) {
    if let Some(c) = s[from..].chars().next() {
        let upper: String = c.to_uppercase().collect();
        s.replace_range(from..from + c.len_utf8(), &upper);
    }
}

/// Generates about `words` words of prose from `seed`.
pub fn generate(words: usize, seed: u64) -> String {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = String::with_capacity(words * 7);
    let mut sentences_in_paragraph = 0;
    while out.len() < words * 6 {
        let start = out.len();
        clause(&mut rng, &mut out);
        if rng.random_bool(0.4) {
            out.push_str(", ");
            out.push_str(pick(&mut rng, CONJ));
            out.push(' ');
            clause(&mut rng, &mut out);
        }
        capitalise(&mut out, start);
        out.push(if rng.random_bool(0.1) { '?' } else { '.' });
        sentences_in_paragraph += 1;
        if sentences_in_paragraph >= rng.random_range(4..8) {
            out.push_str("\n\n");
            sentences_in_paragraph = 0;
        } else {
            out.push(' ');
        }
    }
    out
}

/// The shared corpus (generated once).
pub fn corpus() -> &'static str {
    static CORPUS: OnceLock<String> = OnceLock::new();
    CORPUS.get_or_init(|| generate(90_000, 0x6b6e_6565))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_readable() {
        let a = generate(200, 1);
        assert_eq!(a, generate(200, 1));
        assert_ne!(a, generate(200, 2));
        assert!(a.is_ascii());
        assert!(a.chars().next().unwrap().is_uppercase());
        assert!(a.contains(". "));
        assert!(corpus().split_whitespace().count() > 80_000);
    }
}
