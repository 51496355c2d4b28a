//! Synthetic requests: exact-length prompts, lengths from distributions, optional shared
//! prefixes, all deterministic under a seed.

use std::sync::Arc;

use kneepoint_core::Request;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::prompt::PromptBuilder;
use crate::tokenizer::Tokenizer;
use crate::{Error, LengthDist, Lengths, Workload};

/// Shared prefixes (a system prompt repeated across requests, which servers with prefix
/// caching reuse). Counted inside each request's input length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedPrefix {
    /// Tokens in each prefix (the prefix ends with a blank line).
    pub tokens: u32,
    /// Distinct prefixes; each request uses one, chosen at random (1 = all share one).
    pub pool: u32,
}

/// How to generate requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyntheticConfig {
    /// Input and output lengths.
    pub lengths: Lengths,
    /// Optional shared prefixes.
    pub prefix: Option<SharedPrefix>,
    /// Seed for lengths, prompt text and prefix choice.
    pub seed: u64,
    /// Send `ignore_eos` so the server generates exactly the requested output.
    pub ignore_eos: bool,
    /// Send `min_tokens` equal to the requested output.
    pub min_tokens: bool,
}

impl SyntheticConfig {
    /// Independent input/output lengths, no prefix, output control on.
    pub fn new(isl: LengthDist, osl: LengthDist, seed: u64) -> Self {
        SyntheticConfig {
            lengths: Lengths::Independent { isl, osl },
            prefix: None,
            seed,
            ignore_eos: true,
            min_tokens: true,
        }
    }
}

/// Requests with prompts of exactly the sampled input length in the workload's tokenizer.
pub struct SyntheticWorkload {
    config: SyntheticConfig,
    builder: PromptBuilder,
    prefixes: Vec<String>,
    rng: StdRng,
    next_id: u64,
}

impl std::fmt::Debug for SyntheticWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyntheticWorkload")
            .field("config", &self.config)
            .field("builder", &self.builder)
            .finish_non_exhaustive()
    }
}

impl SyntheticWorkload {
    /// Independent lengths from `isl` and `osl`.
    pub fn new(
        tokenizer: Arc<dyn Tokenizer>,
        isl: LengthDist,
        osl: LengthDist,
        seed: u64,
    ) -> Result<Self, Error> {
        Self::from_config(tokenizer, SyntheticConfig::new(isl, osl, seed))
    }

    /// Validates `config`, tokenizes the corpus and builds the shared prefixes.
    pub fn from_config(
        tokenizer: Arc<dyn Tokenizer>,
        config: SyntheticConfig,
    ) -> Result<Self, Error> {
        config.lengths.validate()?;
        let mut builder = PromptBuilder::new(tokenizer)?;
        let mut prefixes = Vec::new();
        if let Some(p) = config.prefix {
            if p.tokens == 0 || p.pool == 0 {
                return Err(Error::InvalidPrefix {
                    reason: "tokens and pool must be at least 1".into(),
                });
            }
            let mut rng = StdRng::seed_from_u64(config.seed ^ 0x7072_6566_6978);
            for _ in 0..p.pool {
                prefixes.push(prefix_text(&mut builder, p.tokens, &mut rng)?);
            }
        }
        Ok(SyntheticWorkload {
            rng: StdRng::seed_from_u64(config.seed),
            config,
            builder,
            prefixes,
            next_id: 0,
        })
    }

    /// Starts ids at `id` (e.g. to keep warm-up and measured ids apart).
    pub fn with_first_id(mut self, id: u64) -> Self {
        self.next_id = id;
        self
    }

    /// The shared prefixes (empty without one).
    pub fn prefixes(&self) -> &[String] {
        &self.prefixes
    }

    /// The tokenizer prompts are counted with.
    pub fn tokenizer(&self) -> &Arc<dyn Tokenizer> {
        self.builder.tokenizer()
    }
}

/// A prefix of exactly `tokens` tokens that ends with a blank line, so that what follows it
/// starts a new pre-token and the prefix's tokens stay the same in every prompt.
fn prefix_text<R: Rng + ?Sized>(
    b: &mut PromptBuilder,
    tokens: u32,
    rng: &mut R,
) -> Result<String, Error> {
    let tok = b.tokenizer().clone();
    for sep_tokens in 1..=3u32 {
        if tokens <= sep_tokens {
            break;
        }
        for _ in 0..8 {
            let body = b.exact("", tokens - sep_tokens, rng)?;
            let text = format!("{}\n\n", body.trim_end());
            if tok.count(&text)? == tokens as usize {
                return Ok(text);
            }
        }
    }
    // Very short prefixes: any exact text.
    b.exact("", tokens, rng)
}

impl Workload for SyntheticWorkload {
    fn requests(&mut self, count: usize) -> Result<Vec<Request>, Error> {
        let mut out = Vec::with_capacity(count);
        let prefix_tokens = self.config.prefix.map_or(0, |p| p.tokens);
        for _ in 0..count {
            let (isl, osl) = self.config.lengths.sample(&mut self.rng);
            let isl = isl.max(prefix_tokens);
            let prefix = if self.prefixes.is_empty() {
                String::new()
            } else {
                let i = self.rng.random_range(0..self.prefixes.len());
                self.prefixes[i].clone()
            };
            let body = self.builder.exact(&prefix, isl, &mut self.rng)?;
            let mut r = Request::text(self.next_id, format!("{prefix}{body}"));
            self.next_id += 1;
            r.input_tokens = Some(isl);
            r.max_output_tokens = Some(osl);
            r.ignore_eos = self.config.ignore_eos;
            r.min_output_tokens = self.config.min_tokens.then_some(osl);
            out.push(r);
        }
        Ok(out)
    }
}
