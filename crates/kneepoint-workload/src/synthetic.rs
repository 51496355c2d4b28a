//! Synthetic prompts of (approximately) a given token length.

use kneepoint_core::Request;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::{Error, LengthDist, Workload};

/// Common English words that are one token in the usual BPE vocabularies.
const WORDS: &[&str] = &[
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "name",
    "team",
    "minute",
    "idea",
    "kid",
    "body",
    "information",
    "back",
    "parent",
    "face",
    "others",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "girl",
    "guy",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "river",
    "stone",
    "light",
    "green",
    "small",
];

/// Prompts of random common words with lengths from distributions, deterministic under a seed.
#[derive(Debug, Clone)]
pub struct SyntheticWorkload {
    isl: LengthDist,
    osl: LengthDist,
    ignore_eos: bool,
    set_min_tokens: bool,
    rng: StdRng,
    next_id: u64,
}

impl SyntheticWorkload {
    /// Input lengths from `isl`, requested output lengths from `osl`. By default requests ask
    /// the server to ignore end-of-sequence and set `min_tokens` so that exactly the requested
    /// output is generated.
    pub fn new(isl: LengthDist, osl: LengthDist, seed: u64) -> Self {
        SyntheticWorkload {
            isl,
            osl,
            ignore_eos: true,
            set_min_tokens: true,
            rng: StdRng::seed_from_u64(seed),
            next_id: 0,
        }
    }

    /// Validates both distributions.
    pub fn validate(&self) -> Result<(), Error> {
        self.isl.validate("input length")?;
        self.osl.validate("output length")
    }

    /// Whether to send `ignore_eos` and `min_tokens` (for servers that reject them).
    pub fn with_output_control(mut self, ignore_eos: bool, min_tokens: bool) -> Self {
        self.ignore_eos = ignore_eos;
        self.set_min_tokens = min_tokens;
        self
    }

    /// Starts ids at `id` (e.g. to keep warm-up and measured ids apart).
    pub fn with_first_id(mut self, id: u64) -> Self {
        self.next_id = id;
        self
    }

    fn prompt(&mut self, tokens: u32) -> String {
        let mut s = String::with_capacity(tokens as usize * 7);
        for i in 0..tokens {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(WORDS[self.rng.random_range(0..WORDS.len())]);
        }
        s
    }
}

impl Workload for SyntheticWorkload {
    fn requests(&mut self, count: usize) -> Result<Vec<Request>, Error> {
        self.validate()?;
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let isl = self.isl.sample(&mut self.rng);
            let osl = self.osl.sample(&mut self.rng);
            let mut r = Request::text(self.next_id, self.prompt(isl));
            self.next_id += 1;
            r.input_tokens = Some(isl);
            r.max_output_tokens = Some(osl);
            r.ignore_eos = self.ignore_eos;
            r.min_output_tokens = self.set_min_tokens.then_some(osl);
            out.push(r);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::approx_token_count;

    #[test]
    fn lengths_ids_and_determinism() {
        let mk = || {
            SyntheticWorkload::new(
                LengthDist::mean_stddev(300.0, 30.0),
                LengthDist::Fixed(8),
                42,
            )
        };
        let a = mk().requests(50).unwrap();
        let b = mk().requests(50).unwrap();
        assert_eq!(a, b);
        for (i, r) in a.iter().enumerate() {
            assert_eq!(r.id, i as u64);
            assert_eq!(
                approx_token_count(&r.prompt.text()) as u32,
                r.input_tokens.unwrap()
            );
            assert_eq!(r.min_output_tokens, Some(8));
            assert!(r.ignore_eos);
        }
        let c = SyntheticWorkload::new(LengthDist::Fixed(300), LengthDist::Fixed(8), 43)
            .requests(1)
            .unwrap();
        assert_ne!(c[0].prompt, a[0].prompt);
        let mut w = mk().with_first_id(1000);
        assert_eq!(w.requests(2).unwrap()[1].id, 1001);
    }

    #[test]
    fn invalid_config_is_an_error() {
        let mut w = SyntheticWorkload::new(LengthDist::Fixed(0), LengthDist::Fixed(8), 1);
        assert!(w.requests(1).is_err());
    }
}
