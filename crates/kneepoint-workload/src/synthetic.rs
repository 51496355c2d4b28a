//! Synthetic requests: exact-length prompts, lengths from distributions, optional shared
//! prefixes, all deterministic under a seed.

use std::sync::Arc;

use std::time::Duration;

use kneepoint_core::{Prompt, Request, Turn};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
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

/// Multi-turn conversations (AIPerf's `--conversation-turn-*` options): each conversation has a
/// number of turns drawn from `turns`; each turn after the first is sent a think time after
/// the previous reply, drawn from a normal distribution (negative draws are 0) and scaled by
/// `delay_ratio`. Every turn's new user message has the sampled input length; the runner sends
/// it after the conversation so far.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Conversations {
    /// Turns per conversation.
    pub turns: LengthDist,
    /// Mean think time before a turn, ms.
    pub delay_ms_mean: f64,
    /// Its standard deviation, ms.
    pub delay_ms_stddev: f64,
    /// Multiplies every think time (0 removes them).
    pub delay_ratio: f64,
}

/// The most turns one conversation may have.
pub const MAX_TURNS: u32 = 10_000;
/// The longest think time drawn (a day, in ms); longer draws are cut to it.
pub const MAX_THINK_TIME_MS: f64 = 86_400_000.0;

impl Conversations {
    /// `turns` turns per conversation, no think time.
    pub fn new(turns: LengthDist) -> Self {
        Conversations {
            turns,
            delay_ms_mean: 0.0,
            delay_ms_stddev: 0.0,
            delay_ratio: 1.0,
        }
    }

    /// Checks the turns (at most [`MAX_TURNS`]) and the think times (finite, not negative).
    pub fn validate(&self) -> Result<(), Error> {
        self.turns.validate("turns per conversation")?;
        if self.turns.max_value() > MAX_TURNS {
            return Err(Error::InvalidDistribution {
                what: "turns per conversation",
                reason: format!("at most {MAX_TURNS} turns"),
            });
        }
        let ok = |x: f64| x.is_finite() && x >= 0.0;
        if !(ok(self.delay_ms_mean) && ok(self.delay_ms_stddev) && ok(self.delay_ratio)) {
            return Err(Error::InvalidDistribution {
                what: "think time",
                reason: "mean, stddev and ratio must be finite and not negative".into(),
            });
        }
        Ok(())
    }

    pub(crate) fn delay<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        let ms = match Normal::new(self.delay_ms_mean, self.delay_ms_stddev) {
            Ok(n) if self.delay_ms_stddev > 0.0 => n.sample(rng),
            _ => self.delay_ms_mean,
        };
        let ms = (ms * self.delay_ratio).clamp(0.0, MAX_THINK_TIME_MS);
        Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::ZERO)
    }
}

/// Requests for a pooling endpoint instead of generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    /// Embeddings: a batch of `batch` inputs, each of the sampled input length.
    Embed {
        /// Inputs per request.
        batch: u32,
    },
    /// Rerank or score: a query of the sampled input length and `batch` documents of the
    /// sampled input length each. The input length counts the query once per document (a
    /// cross-encoder reads each pair, and servers count usage so).
    Rank {
        /// Documents per query.
        batch: u32,
    },
}

/// How to generate requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// Multi-turn conversations (none: every request stands alone).
    #[serde(default)]
    pub conversations: Option<Conversations>,
    /// Images attached to each request's user message (chat only; none by default).
    #[serde(default)]
    pub images: Option<crate::Images>,
    /// Audio clips attached to each request's user message (chat only; none by default).
    #[serde(default)]
    pub audio: Option<crate::AudioClips>,
    /// Requests for an embeddings, rerank or score endpoint (none: generation).
    #[serde(default)]
    pub pooling: Option<Pooling>,
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
            conversations: None,
            images: None,
            audio: None,
            pooling: None,
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
    next_conversation: u64,
    images: Vec<kneepoint_core::Image>,
    /// Draws images apart from the prompts, so that a workload with images sends the same
    /// prompts as one without.
    image_rng: StdRng,
    audio: Vec<kneepoint_core::Audio>,
    /// Draws audio clips apart from the prompts and the images.
    audio_rng: StdRng,
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
        if let Some(c) = &config.conversations {
            c.validate()?;
        }
        let image_rng = StdRng::seed_from_u64(config.seed ^ 0x696d_6167_6520_7069);
        let images = match &config.images {
            Some(i) => {
                i.validate()?;
                i.pool(config.seed)?
            }
            None => Vec::new(),
        };
        let audio_rng = StdRng::seed_from_u64(config.seed ^ 0x6175_6469_6f20_7069);
        let audio = match &config.audio {
            Some(a) => {
                a.validate()?;
                a.pool(config.seed)?
            }
            None => Vec::new(),
        };
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
            next_conversation: 0,
            images,
            image_rng,
            audio,
            audio_rng,
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

impl SyntheticWorkload {
    /// One pooling request: its texts of exact sampled lengths.
    fn pooled(&mut self, p: Pooling) -> Result<Request, Error> {
        let text = |this: &mut Self| -> Result<(String, u32), Error> {
            let (isl, _) = this.config.lengths.sample(&mut this.rng);
            Ok((this.builder.exact("", isl, &mut this.rng)?, isl))
        };
        let (prompt, tokens) = match p {
            Pooling::Embed { batch } => {
                let mut inputs = Vec::with_capacity(batch as usize);
                let mut n = 0u32;
                for _ in 0..batch.max(1) {
                    let (t, k) = text(self)?;
                    inputs.push(t);
                    n = n.saturating_add(k);
                }
                (Prompt::Batch(inputs), n)
            }
            Pooling::Rank { batch } => {
                let (query, q) = text(self)?;
                let mut documents = Vec::with_capacity(batch as usize);
                let mut n = 0u32;
                for _ in 0..batch.max(1) {
                    let (t, k) = text(self)?;
                    documents.push(t);
                    n = n.saturating_add(k).saturating_add(q);
                }
                (Prompt::Rank { query, documents }, n)
            }
        };
        let mut r = Request::text(self.next_id, "");
        self.next_id += 1;
        r.prompt = prompt;
        r.input_tokens = Some(tokens);
        Ok(r)
    }

    /// One request of `isl` tokens (a shared prefix, when configured, counted in).
    fn one(&mut self, with_prefix: bool) -> Result<Request, Error> {
        if let Some(p) = self.config.pooling {
            return self.pooled(p);
        }
        let prefix_tokens = self.config.prefix.map_or(0, |p| p.tokens);
        let (isl, osl) = self.config.lengths.sample(&mut self.rng);
        let prefix = if self.prefixes.is_empty() || !with_prefix {
            String::new()
        } else {
            let i = self.rng.random_range(0..self.prefixes.len());
            self.prefixes[i].clone()
        };
        let isl = if prefix.is_empty() {
            isl
        } else {
            isl.max(prefix_tokens)
        };
        let body = self.builder.exact(&prefix, isl, &mut self.rng)?;
        let mut r = Request::text(self.next_id, format!("{prefix}{body}"));
        self.next_id += 1;
        r.input_tokens = Some(isl);
        r.max_output_tokens = Some(osl);
        r.ignore_eos = self.config.ignore_eos;
        r.min_output_tokens = self.config.min_tokens.then_some(osl);
        if let Some(i) = self.config.images {
            for _ in 0..i.count {
                let k = self.image_rng.random_range(0..self.images.len());
                r.images.push(self.images[k].clone());
            }
        }
        if let Some(a) = self.config.audio {
            for _ in 0..a.count {
                let k = self.audio_rng.random_range(0..self.audio.len());
                r.audio.push(self.audio[k].clone());
            }
        }
        Ok(r)
    }

    /// One whole conversation: its first turn carries the shared prefix (a system prompt the
    /// rest of the conversation repeats), the others only their new question.
    fn conversation(&mut self, c: Conversations) -> Result<Vec<Request>, Error> {
        let id = format!("conversation_{}", self.next_conversation);
        self.next_conversation += 1;
        let turns = c.turns.sample(&mut self.rng).max(1);
        (0..turns)
            .map(|k| {
                let delay = if k == 0 {
                    Duration::ZERO
                } else {
                    c.delay(&mut self.rng)
                };
                let mut r = self.one(k == 0)?;
                r.turn = Some(Turn {
                    conversation_id: id.clone(),
                    turn_index: k,
                    delay,
                    history_in_prompt: None,
                });
                Ok(r)
            })
            .collect()
    }
}

impl Workload for SyntheticWorkload {
    /// `count` requests; with conversations, whole conversations until at least `count` turns
    /// (a conversation is never split between two calls, so that no level starts one midway).
    fn requests(&mut self, count: usize) -> Result<Vec<Request>, Error> {
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            match self.config.conversations {
                Some(c) => out.extend(self.conversation(c)?),
                None => out.push(self.one(true)?),
            }
        }
        Ok(out)
    }

    fn token_counter(&self) -> Option<Arc<dyn kneepoint_core::TokenCounter>> {
        Some(Arc::new(crate::TokenizerCounter(self.tokenizer().clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_tokenizer;

    #[test]
    fn conversations_come_whole_with_growing_turn_indices_and_think_times() {
        let tok = load_tokenizer("builtin").unwrap();
        let mut cfg = SyntheticConfig::new(LengthDist::Fixed(32), LengthDist::Fixed(8), 3);
        cfg.prefix = Some(SharedPrefix {
            tokens: 16,
            pool: 1,
        });
        cfg.conversations = Some(Conversations {
            turns: LengthDist::Fixed(3),
            delay_ms_mean: 200.0,
            delay_ms_stddev: 50.0,
            delay_ratio: 0.5,
        });
        let mut w = SyntheticWorkload::from_config(tok.clone(), cfg).unwrap();
        let reqs = w.requests(4).unwrap();
        assert_eq!(reqs.len(), 6, "two whole conversations for four requests");
        let prefix = w.prefixes()[0].clone();
        for (i, r) in reqs.iter().enumerate() {
            let t = r.turn.as_ref().unwrap();
            assert_eq!(t.turn_index as usize, i % 3);
            assert_eq!(t.conversation_id, format!("conversation_{}", i / 3));
            assert_eq!(tok.count(&r.prompt.text()).unwrap(), 32);
            // the system prefix opens the conversation only
            assert_eq!(r.prompt.text().starts_with(&prefix), i % 3 == 0);
            if i % 3 == 0 {
                assert_eq!(t.delay, Duration::ZERO);
            } else {
                // ratio 0.5 of a normal(200, 50): well inside (0, 200] ms here
                assert!(t.delay > Duration::ZERO && t.delay < Duration::from_millis(200));
            }
        }
        // ids continue, and the next call starts a new conversation
        let more = w.requests(1).unwrap();
        assert_eq!(more[0].id, 6);
        assert_eq!(
            more[0].turn.as_ref().unwrap().conversation_id,
            "conversation_2"
        );
        let bad = Conversations {
            delay_ms_mean: -1.0,
            ..Conversations::new(LengthDist::Fixed(2))
        };
        let mut cfg = SyntheticConfig::new(LengthDist::Fixed(8), LengthDist::Fixed(8), 3);
        cfg.conversations = Some(bad);
        assert!(SyntheticWorkload::from_config(tok, cfg).is_err());
    }
}
