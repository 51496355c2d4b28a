//! The pure engine model: a continuous-batching scheduler stepped without any clock.
//!
//! Each [`EngineModel::step`] admits waiting sequences (FIFO, while a sequence slot and KV-cache
//! room are free), runs one decode token for every sequence past prefill, fills the rest of the
//! step's token budget with prefill chunks (a sequence whose prefill completes emits its first
//! token in that step, as vLLM samples it), and returns the step's duration:
//!
//! `base + per_seq × decoding + per_context_token × context + per_prefill_token × prefilled`,
//! times `1 + jitter × N(0, 1)` (floored at 0.2).
//!
//! Simplifications, stated: KV is reserved for prompt + output on admission (no preemption),
//! and there is no prefix cache.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

use crate::SimProfile;

/// What a sequence asks of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqSpec {
    /// Prompt tokens to prefill.
    pub prompt_tokens: u32,
    /// Tokens to generate (at least 1).
    pub output_tokens: u32,
}

/// Why a sequence was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// Prompt + output exceed `max_model_len`.
    TooLong {
        /// prompt + output tokens.
        tokens: u64,
        /// The limit.
        max_model_len: u32,
    },
    /// No output was asked for.
    NoOutput,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::TooLong {
                tokens,
                max_model_len,
            } => write!(
                f,
                "this model's maximum context length is {max_model_len} tokens, but {tokens} were requested"
            ),
            Rejection::NoOutput => f.write_str("max_tokens must be at least 1"),
        }
    }
}

/// One token produced by a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emission {
    /// The sequence.
    pub id: u64,
    /// 0 for the first token.
    pub index: u32,
    /// True for the sequence's last token.
    pub finished: bool,
}

/// The outcome of one engine step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// The step's model-time duration, in ms.
    pub duration_ms: f64,
    /// Tokens produced at the end of the step.
    pub emitted: Vec<Emission>,
    /// Sequences admitted from the queue at the start of the step.
    pub admitted: Vec<u64>,
}

#[derive(Debug)]
struct Seq {
    id: u64,
    spec: SeqSpec,
    prefilled: u32,
    generated: u32,
}

impl Seq {
    fn reserve(&self) -> u64 {
        u64::from(self.spec.prompt_tokens) + u64::from(self.spec.output_tokens)
    }
}

/// The engine state. Deterministic for a given profile seed and call sequence.
#[derive(Debug)]
pub struct EngineModel {
    profile: SimProfile,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    kv_used: u64,
    rng: StdRng,
    /// The drift's current standard normal (see [`SimProfile::drift`]).
    drift_x: f64,
    /// Model seconds the engine has stepped (see [`SimProfile::degrade`]).
    elapsed_s: f64,
}

/// The drift's correlation time, in engine steps (about 14 s of the calibrated profile).
pub const DRIFT_STEPS: f64 = 500.0;

impl EngineModel {
    /// An idle engine.
    pub fn new(profile: SimProfile) -> Self {
        let rng = StdRng::seed_from_u64(profile.seed ^ 0x5eed_e461);
        EngineModel {
            profile,
            waiting: VecDeque::new(),
            running: Vec::new(),
            kv_used: 0,
            rng,
            drift_x: 0.0,
            elapsed_s: 0.0,
        }
    }

    /// The profile in use.
    pub fn profile(&self) -> &SimProfile {
        &self.profile
    }

    /// Queues a sequence.
    pub fn submit(&mut self, id: u64, spec: SeqSpec) -> Result<(), Rejection> {
        if spec.output_tokens == 0 {
            return Err(Rejection::NoOutput);
        }
        let tokens = u64::from(spec.prompt_tokens) + u64::from(spec.output_tokens);
        if tokens > u64::from(self.profile.max_model_len) {
            return Err(Rejection::TooLong {
                tokens,
                max_model_len: self.profile.max_model_len,
            });
        }
        self.waiting.push_back(Seq {
            id,
            spec,
            prefilled: 0,
            generated: 0,
        });
        Ok(())
    }

    /// Drops a sequence wherever it is (the client went away) and frees its KV reservation.
    pub fn cancel(&mut self, id: u64) {
        if let Some(i) = self.running.iter().position(|s| s.id == id) {
            let s = self.running.swap_remove(i);
            self.kv_used -= s.reserve();
        } else if let Some(i) = self.waiting.iter().position(|s| s.id == id) {
            self.waiting.remove(i);
        }
    }

    /// True when nothing is queued or running.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    /// Sequences running / waiting.
    pub fn load(&self) -> (usize, usize) {
        (self.running.len(), self.waiting.len())
    }

    /// KV-cache tokens reserved, as a fraction of the capacity.
    pub fn kv_usage(&self) -> f64 {
        if self.profile.kv_cache_tokens == 0 {
            return 0.0;
        }
        self.kv_used as f64 / self.profile.kv_cache_tokens as f64
    }

    /// Runs one step; `None` when idle.
    pub fn step(&mut self) -> Option<Step> {
        if self.is_idle() {
            return None;
        }
        let mut step = Step::default();
        // 1. admission, FIFO, head-of-line blocking like vLLM's scheduler
        while let Some(front) = self.waiting.front() {
            let fits_kv = self.kv_used + front.reserve() <= self.profile.kv_cache_tokens;
            if self.running.len() >= self.profile.max_num_seqs as usize || !fits_kv {
                break;
            }
            if let Some(seq) = self.waiting.pop_front() {
                self.kv_used += seq.reserve();
                step.admitted.push(seq.id);
                self.running.push(seq);
            }
        }
        // 2. decode one token for every sequence past prefill
        let mut decoding = 0u64;
        let mut context = 0u64;
        for s in &self.running {
            if s.prefilled == s.spec.prompt_tokens && s.generated > 0 {
                decoding += 1;
                context += u64::from(s.spec.prompt_tokens + s.generated);
            }
        }
        // 3. prefill chunks with what is left of the token budget
        let mut budget = u64::from(self.profile.max_num_batched_tokens).saturating_sub(decoding);
        let mut prefilled = 0u64;
        for s in &mut self.running {
            if budget == 0 {
                break;
            }
            let remaining = u64::from(s.spec.prompt_tokens - s.prefilled);
            if s.generated == 0 && (remaining > 0 || s.spec.prompt_tokens == 0) {
                let chunk = remaining.min(budget);
                budget -= chunk;
                prefilled += chunk;
                s.prefilled += chunk as u32; // chunk <= remaining, which is a u32
            }
        }
        let p = &self.profile;
        let mut duration = p.step_base_ms
            + p.step_per_seq_ms * decoding as f64
            + p.step_per_context_token_us * context as f64 / 1000.0
            + p.prefill_per_token_us * prefilled as f64 / 1000.0
            + p.experts.map_or(0.0, |e| e.step_ms(decoding + prefilled));
        if p.jitter > 0.0 {
            let z: f64 = StandardNormal.sample(&mut self.rng);
            duration *= (1.0 + p.jitter * z).max(0.2);
        }
        if p.drift > 0.0 {
            // an AR(1) walk: stationary standard normal, correlation exp(-1 / DRIFT_STEPS)
            let rho = (-1.0 / DRIFT_STEPS).exp();
            let z: f64 = StandardNormal.sample(&mut self.rng);
            self.drift_x = rho * self.drift_x + (1.0 - rho * rho).sqrt() * z;
            duration *= (p.drift * self.drift_x).exp();
        }
        if p.degrade > 0.0 {
            duration *= 1.0 + p.degrade * self.elapsed_s;
        }
        self.elapsed_s += duration / 1000.0;
        step.duration_ms = duration;
        // 4. emit: decoding sequences and those whose prefill completed this step
        let mut i = 0;
        while i < self.running.len() {
            let s = &mut self.running[i];
            if s.prefilled == s.spec.prompt_tokens {
                let index = s.generated;
                s.generated += 1;
                let finished = s.generated >= s.spec.output_tokens;
                step.emitted.push(Emission {
                    id: s.id,
                    index,
                    finished,
                });
                if finished {
                    let s = self.running.swap_remove(i);
                    self.kv_used -= s.reserve();
                    continue;
                }
            }
            i += 1;
        }
        Some(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet(mut p: SimProfile) -> SimProfile {
        p.jitter = 0.0;
        p
    }

    #[test]
    fn single_sequence_timeline() {
        let p = quiet(SimProfile::fast());
        let mut e = EngineModel::new(p.clone());
        e.submit(
            1,
            SeqSpec {
                prompt_tokens: 100,
                output_tokens: 3,
            },
        )
        .unwrap();
        let s1 = e.step().unwrap();
        assert_eq!(s1.admitted, vec![1]);
        assert_eq!(
            s1.emitted,
            vec![Emission {
                id: 1,
                index: 0,
                finished: false
            }]
        );
        let expect = p.step_base_ms + p.prefill_per_token_us * 100.0 / 1000.0;
        assert!((s1.duration_ms - expect).abs() < 1e-9);
        let s2 = e.step().unwrap();
        assert!((s2.duration_ms - (p.step_base_ms + p.step_per_seq_ms)).abs() < 1e-9);
        let s3 = e.step().unwrap();
        assert!(s3.emitted[0].finished);
        assert!(e.is_idle());
        assert!(e.step().is_none());
    }

    #[test]
    fn chunked_prefill_spreads_long_prompts() {
        let mut p = quiet(SimProfile::fast());
        p.max_num_batched_tokens = 1000;
        let mut e = EngineModel::new(p);
        e.submit(
            1,
            SeqSpec {
                prompt_tokens: 2500,
                output_tokens: 1,
            },
        )
        .unwrap();
        assert!(e.step().unwrap().emitted.is_empty());
        assert!(e.step().unwrap().emitted.is_empty());
        let last = e.step().unwrap();
        assert_eq!(
            last.emitted,
            vec![Emission {
                id: 1,
                index: 0,
                finished: true
            }]
        );
    }

    #[test]
    fn queue_when_full_and_fifo() {
        let mut p = quiet(SimProfile::fast());
        p.max_num_seqs = 2;
        let mut e = EngineModel::new(p);
        for id in 0..4 {
            e.submit(
                id,
                SeqSpec {
                    prompt_tokens: 10,
                    output_tokens: 2,
                },
            )
            .unwrap();
        }
        let s = e.step().unwrap();
        assert_eq!(s.admitted, vec![0, 1]);
        assert_eq!(e.load(), (2, 2));
        let s = e.step().unwrap(); // 0 and 1 finish
        assert_eq!(s.emitted.iter().filter(|x| x.finished).count(), 2);
        let s = e.step().unwrap();
        assert_eq!(s.admitted, vec![2, 3]);
    }

    #[test]
    fn kv_budget_limits_admission_and_cancel_frees_it() {
        let mut p = quiet(SimProfile::fast());
        p.kv_cache_tokens = 250;
        p.max_model_len = 200;
        let mut e = EngineModel::new(p);
        e.submit(
            1,
            SeqSpec {
                prompt_tokens: 100,
                output_tokens: 50,
            },
        )
        .unwrap();
        e.submit(
            2,
            SeqSpec {
                prompt_tokens: 100,
                output_tokens: 50,
            },
        )
        .unwrap();
        assert_eq!(e.step().unwrap().admitted, vec![1]);
        e.cancel(1);
        assert_eq!(e.step().unwrap().admitted, vec![2]);
        assert!(matches!(
            e.submit(
                3,
                SeqSpec {
                    prompt_tokens: 190,
                    output_tokens: 20
                }
            ),
            Err(Rejection::TooLong { .. })
        ));
        assert_eq!(
            e.submit(
                4,
                SeqSpec {
                    prompt_tokens: 1,
                    output_tokens: 0
                }
            ),
            Err(Rejection::NoOutput)
        );
    }

    #[test]
    fn step_time_grows_with_batch() {
        let p = quiet(SimProfile::calibrated());
        let mut e = EngineModel::new(p);
        for id in 0..64 {
            e.submit(
                id,
                SeqSpec {
                    prompt_tokens: 64,
                    output_tokens: 10,
                },
            )
            .unwrap();
        }
        e.step().unwrap();
        let small = {
            let mut e1 = EngineModel::new(quiet(SimProfile::calibrated()));
            e1.submit(
                0,
                SeqSpec {
                    prompt_tokens: 64,
                    output_tokens: 10,
                },
            )
            .unwrap();
            e1.step().unwrap();
            e1.step().unwrap().duration_ms
        };
        let big = e.step().unwrap().duration_ms;
        assert!(big > small * 1.2, "{big} vs {small}");
    }
}
