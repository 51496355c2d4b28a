//! Parameter counts, weight bytes and per-sequence cache bytes derived from a [`ModelSpec`].

use serde::{Deserialize, Serialize};

use crate::ModelSpec;

/// Parameters by kind, whole model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ParamCount {
    /// Input embedding plus output projection (once when tied).
    pub embedding: f64,
    /// Attention, Mamba, dense feed-forward, shared-expert and router matrices.
    pub linear: f64,
    /// Routed experts' matrices, all of them.
    pub experts: f64,
    /// Routed experts' matrices one token uses.
    pub active_experts: f64,
}

impl ParamCount {
    /// Every parameter.
    pub fn total(&self) -> f64 {
        self.embedding + self.linear + self.experts
    }

    /// Parameters one token uses (embeddings included, as model cards count them).
    pub fn active(&self) -> f64 {
        self.embedding + self.linear + self.active_experts
    }
}

impl ModelSpec {
    /// Checks what the arithmetic divides by (a spec built by hand or deserialised may hold
    /// anything): heads, KV heads and head size above 0, at most as many KV heads as heads, at
    /// most as many experts per token as experts, Mamba heads above 0.
    pub fn validate(&self) -> Result<(), crate::Error> {
        let bad = |field: &'static str, reason: &str| {
            Err(crate::Error::ConfigField {
                field,
                reason: reason.to_owned(),
            })
        };
        let a = &self.attention;
        if a.heads == 0 || a.kv_heads == 0 || a.head_dim == 0 {
            return bad(
                "num_attention_heads",
                "heads, KV heads and head_dim must be above 0",
            );
        }
        if a.kv_heads > a.heads {
            return bad(
                "num_key_value_heads",
                "there must be at most as many KV heads as attention heads",
            );
        }
        if self.hidden_size == 0 || self.vocab_size == 0 {
            return bad("hidden_size", "hidden_size and vocab_size must be above 0");
        }
        if let Some(m) = self.moe {
            if m.experts == 0 || m.experts_per_token == 0 || m.experts_per_token > m.experts {
                return bad(
                    "num_experts_per_tok",
                    "needs 1 ≤ experts per token ≤ experts",
                );
            }
        }
        if self.mamba.is_some_and(|m| m.heads == 0 || m.head_dim == 0) {
            return bad(
                "mamba_num_heads",
                "Mamba heads and head_dim must be above 0",
            );
        }
        Ok(())
    }

    /// Parameters by kind (norms, biases and other vectors are left out: well under 0.1 %).
    pub fn params(&self) -> ParamCount {
        let h = self.hidden_size as f64;
        let a = &self.attention;
        let (heads, kv, hd) = (
            f64::from(a.heads),
            f64::from(a.kv_heads),
            f64::from(a.head_dim),
        );
        let attn_layer = match a.mla {
            Some(mla) => {
                let (nope, rope) = (
                    f64::from(mla.qk_nope_head_dim),
                    f64::from(mla.qk_rope_head_dim),
                );
                let qk = nope + rope;
                let q = match mla.q_lora_rank {
                    Some(r) => h * f64::from(r) + f64::from(r) * heads * qk,
                    None => h * heads * qk,
                };
                let kv_down = h * (f64::from(mla.kv_lora_rank) + rope);
                let kv_up =
                    f64::from(mla.kv_lora_rank) * heads * (nope + f64::from(mla.v_head_dim));
                q + kv_down + kv_up + heads * f64::from(mla.v_head_dim) * h
            }
            None => 2.0 * h * heads * hd + 2.0 * h * kv * hd,
        };
        let attn_layers = f64::from(a.full_layers + a.sliding_layers);
        let mats = |gated: bool| if gated { 3.0 } else { 2.0 };
        let mlp = self.mlp.map_or(0.0, |m| {
            f64::from(m.layers) * mats(m.gated) * h * m.intermediate_size as f64
        });
        let (moe_linear, experts, active_experts) = self.moe.map_or((0.0, 0.0, 0.0), |m| {
            let layers = f64::from(m.layers);
            let one = mats(m.gated) * h * m.expert_intermediate_size as f64;
            let shared = mats(m.gated) * h * m.shared_intermediate_size as f64;
            let router = h * f64::from(m.experts);
            (
                layers * (shared + router),
                layers * f64::from(m.experts) * one,
                layers * f64::from(m.experts_per_token) * one,
            )
        });
        let mamba = self.mamba.map_or(0.0, |m| {
            let inner = m.inner() as f64;
            let bc = 2.0 * f64::from(m.groups) * f64::from(m.state_size);
            let in_proj = h * (2.0 * inner + bc + f64::from(m.heads));
            let conv = (inner + bc) * f64::from(m.conv_kernel);
            f64::from(m.layers) * (in_proj + conv + inner * h)
        });
        let vocab = self.vocab_size as f64 * h;
        ParamCount {
            embedding: if self.tie_word_embeddings {
                vocab
            } else {
                2.0 * vocab
            },
            linear: attn_layers * attn_layer + mlp + moe_linear + mamba,
            experts,
            active_experts,
        }
    }

    /// Bytes of the weights, whole model.
    pub fn weight_bytes(&self) -> f64 {
        let p = self.params();
        let w = &self.weights;
        (p.embedding * w.other_bits + p.linear * w.linear_bits + p.experts * w.expert_bits) / 8.0
    }

    /// Bytes of the routed experts, all of them.
    pub fn expert_bytes(&self) -> f64 {
        self.params().experts * self.weights.expert_bits / 8.0
    }

    /// Share of each layer's routed experts that `tokens` tokens in one step touch,
    /// `1 − (1 − k/E)^tokens` when tokens pick experts independently (0 without experts).
    pub fn experts_touched(&self, tokens: f64) -> f64 {
        self.moe.map_or(0.0, |m| {
            let share = f64::from(m.experts_per_token) / f64::from(m.experts);
            1.0 - (1.0 - share).powf(tokens.max(0.0))
        })
    }

    /// Bytes of weights a step of `tokens` tokens reads: every linear matrix, the output
    /// projection (the input embedding is a lookup), and the routed experts the tokens touch
    /// (see [`ModelSpec::experts_touched`]).
    pub fn weight_bytes_read(&self, tokens: f64) -> f64 {
        let p = self.params();
        let w = &self.weights;
        let head = if self.tie_word_embeddings {
            p.embedding
        } else {
            p.embedding / 2.0
        };
        (head * w.other_bits + p.linear * w.linear_bits) / 8.0
            + self.expert_bytes() * self.experts_touched(tokens)
    }

    /// FLOPs of one token's forward pass through the matrices (2 per active parameter, the
    /// input embedding lookup excluded), before attention over the context.
    pub fn flops_per_token(&self) -> f64 {
        let p = self.params();
        let lookup = if self.tie_word_embeddings {
            0.0
        } else {
            p.embedding / 2.0
        };
        2.0 * (p.active() - lookup)
    }

    /// Attention FLOPs of one token against `context` earlier tokens (scores and weighted sum:
    /// 4 × heads × head_dim per context token and layer; sliding layers see at most their
    /// window).
    pub fn attention_flops(&self, context: f64) -> f64 {
        let a = &self.attention;
        let per = 4.0 * f64::from(a.heads) * f64::from(a.head_dim);
        let window = a.sliding_window.map_or(context, |w| context.min(w as f64));
        per * (f64::from(a.full_layers) * context + f64::from(a.sliding_layers) * window)
    }

    /// KV-cache bytes one token adds to one full-attention layer on one GPU at tensor
    /// parallelism `tp` (KV heads are split across GPUs and replicated when fewer than `tp`;
    /// a latent-attention vector is replicated on every GPU).
    pub fn kv_bytes_per_token_layer(&self, tp: u32, kv_bits: f64) -> f64 {
        let a = &self.attention;
        let bytes = kv_bits / 8.0;
        match a.mla {
            Some(m) => (f64::from(m.kv_lora_rank) + f64::from(m.qk_rope_head_dim)) * bytes,
            None => {
                let per_gpu = a.kv_heads.div_ceil(tp.max(1)).max(1);
                2.0 * f64::from(per_gpu) * f64::from(a.head_dim) * bytes
            }
        }
    }

    /// KV-cache bytes per token on one GPU over the full-attention layers (what vLLM's "GPU KV
    /// cache size: N tokens" divides by).
    pub fn kv_bytes_per_token(&self, tp: u32, kv_bits: f64) -> f64 {
        f64::from(self.attention.full_layers) * self.kv_bytes_per_token_layer(tp, kv_bits)
    }

    /// Mamba state bytes of one sequence on one GPU (all Mamba layers; the convolution state
    /// at 16 bits, the SSM state at the config's cache precision).
    pub fn mamba_state_bytes(&self, tp: u32) -> f64 {
        self.mamba.map_or(0.0, |m| {
            let inner = m.inner() as f64;
            let conv_dim = inner + 2.0 * f64::from(m.groups) * f64::from(m.state_size);
            let conv = f64::from(m.conv_kernel.saturating_sub(1)) * conv_dim * 2.0;
            let ssm = inner * f64::from(m.state_size) * m.ssm_state_bits / 8.0;
            f64::from(m.layers) * (conv + ssm) / f64::from(tp.max(1))
        })
    }

    /// Cache bytes one sequence of `tokens` tokens holds on one GPU: its full-attention KV
    /// (in 16-token blocks), its sliding-window KV (at most window + one chunk), and its Mamba
    /// state.
    pub fn sequence_bytes(&self, tokens: u64, tp: u32, kv_bits: f64) -> f64 {
        let block = 16u64;
        let full = tokens.div_ceil(block) * block;
        let per_layer = self.kv_bytes_per_token_layer(tp, kv_bits);
        let a = &self.attention;
        let sliding = a.sliding_window.map_or(0, |w| {
            tokens.min(w.saturating_add(block)).div_ceil(block) * block
        });
        f64::from(a.full_layers) * per_layer * full as f64
            + f64::from(a.sliding_layers) * per_layer * sliding as f64
            + self.mamba_state_bytes(tp)
    }
}
