//! Memory fit: for an instance type and a tensor-parallel degree, the weights each GPU holds,
//! what is left for the KV cache at a `gpu_memory_utilization`, the tokens it holds, and how
//! many sequences of ISL + OSL tokens run at once.

use serde::{Deserialize, Serialize};

use crate::{Error, InstanceType, ModelSpec};

pub(crate) const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
pub(crate) const MIB: f64 = 1024.0 * 1024.0;

/// What the plan assumes about the serving engine (vLLM's defaults unless set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitSettings {
    /// Mean input tokens per request.
    pub isl: u64,
    /// Mean output tokens per request.
    pub osl: u64,
    /// Share of each GPU's memory the engine may use (vLLM's default 0.9).
    pub gpu_memory_utilization: f64,
    /// Bits per KV-cache element (16; 8 for an fp8 cache).
    pub kv_cache_bits: f64,
    /// The scheduler's limit on running sequences (vLLM's `max_num_seqs`, 256 here).
    pub max_num_seqs: u32,
    /// Tokens one engine step may process (vLLM's `max_num_batched_tokens`, 8192).
    pub max_num_batched_tokens: u32,
    /// GiB per GPU kept from the KV cache for activations, the CUDA context and graphs;
    /// `None` estimates it from the model (see [`FitSettings::reserve_gib`]).
    pub reserve_gib: Option<f64>,
    /// Tensor-parallel degrees to try; empty: every power of two up to the GPU count.
    pub tensor_parallel: Vec<u32>,
}

impl FitSettings {
    /// vLLM's defaults for requests of `isl` input and `osl` output tokens.
    pub fn new(isl: u64, osl: u64) -> Self {
        FitSettings {
            isl,
            osl,
            gpu_memory_utilization: 0.9,
            kv_cache_bits: 16.0,
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            reserve_gib: None,
            tensor_parallel: Vec::new(),
        }
    }

    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |field: &'static str, reason: &str| {
            Err(Error::InvalidSetting {
                field,
                reason: reason.to_owned(),
            })
        };
        if self.osl == 0 {
            return bad("osl", "requests need at least one output token");
        }
        if self.isl > crate::MAX_DIM || self.osl > crate::MAX_DIM {
            return bad(
                "isl",
                "input and output lengths must be at most 16,777,216 tokens",
            );
        }
        if !(self.gpu_memory_utilization > 0.0 && self.gpu_memory_utilization <= 1.0) {
            return bad("gpu_memory_utilization", "must be above 0 and at most 1");
        }
        if !(self.kv_cache_bits >= 4.0 && self.kv_cache_bits <= 32.0) {
            return bad("kv_cache_bits", "must be between 4 and 32");
        }
        if self.max_num_seqs == 0 {
            return bad("max_num_seqs", "the scheduler's limit must be at least 1");
        }
        if self.max_num_batched_tokens == 0 {
            return bad(
                "max_num_batched_tokens",
                "the scheduler's token budget must be at least 1",
            );
        }
        if self.reserve_gib.is_some_and(|r| !r.is_finite() || r < 0.0) {
            return bad("reserve_gib", "must be a number ≥ 0");
        }
        if self.tensor_parallel.contains(&0) {
            return bad("tensor_parallel", "degrees must be at least 1");
        }
        Ok(())
    }

    /// GiB per GPU kept for everything but weights and KV: the set value, or an estimate —
    /// 1 GiB for the CUDA context, NCCL and graphs, the largest activations of one step of
    /// `max_num_batched_tokens` tokens (8 hidden-sized and 4 inner-sized bf16 vectors per
    /// token, inner sizes split by `tp`), and fp32 logits of `max_num_seqs` sequences twice.
    pub fn reserve_gib(&self, model: &ModelSpec, tp: u32) -> f64 {
        if let Some(r) = self.reserve_gib {
            return r;
        }
        let inner = [
            model.mlp.map_or(0, |m| m.intermediate_size),
            model.moe.map_or(0, |m| {
                u64::from(m.experts_per_token) * m.expert_intermediate_size
                    + m.shared_intermediate_size
            }),
            model.mamba.map_or(0, |m| 2 * m.inner()),
            u64::from(model.attention.heads) * u64::from(model.attention.head_dim),
        ]
        .into_iter()
        .max()
        .unwrap_or(0) as f64
            / f64::from(tp.max(1));
        let tokens = f64::from(self.max_num_batched_tokens);
        let act = tokens * (8.0 * model.hidden_size as f64 + 4.0 * inner) * 2.0;
        let logits =
            f64::from(self.max_num_seqs) * model.vocab_size as f64 / f64::from(tp.max(1)) * 8.0;
        1.0 + (act + logits) / GIB
    }
}

/// One instance type at one tensor-parallel degree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// The instance type.
    pub instance: String,
    /// Its GPU.
    pub gpu: String,
    /// GPUs per instance.
    pub gpus: u32,
    /// GPUs one copy of the model spans.
    pub tensor_parallel: u32,
    /// Copies of the model one instance holds (GPUs / tensor parallelism).
    pub replicas: u32,
    /// Weights per GPU, GiB.
    pub weights_gib_per_gpu: f64,
    /// Kept for activations and the runtime per GPU, GiB.
    pub reserve_gib_per_gpu: f64,
    /// Left for the KV cache (and Mamba state) per GPU, GiB (0 when nothing is left).
    pub kv_cache_gib_per_gpu: f64,
    /// KV bytes one token takes on one GPU (full-attention layers).
    pub kv_bytes_per_token: f64,
    /// Tokens the cache holds per replica (full-attention layers; vLLM's "GPU KV cache size").
    pub kv_cache_tokens: u64,
    /// Cache one sequence of ISL + OSL tokens takes on one GPU, MiB (KV, window, Mamba state).
    pub sequence_mib: f64,
    /// Sequences of ISL + OSL tokens the cache holds at once, per replica (the KV bound).
    pub kv_max_concurrency: u32,
    /// Sequences one replica runs at once: the KV bound or the scheduler's limit, whichever
    /// is lower.
    pub max_concurrency: u32,
    /// `max_concurrency` × replicas.
    pub instance_max_concurrency: u32,
    /// True when the model fits and at least one sequence runs.
    pub fits: bool,
    /// Why it does not fit.
    pub reason: Option<String>,
}

/// The degrees to try on `gpus` GPUs.
pub fn tensor_parallel_degrees(gpus: u32, asked: &[u32]) -> Vec<u32> {
    if asked.is_empty() {
        (0..8)
            .map(|p| 1u32 << p)
            .take_while(|d| *d <= gpus)
            .collect()
    } else {
        asked.to_vec()
    }
}

/// The fit of `model` on `instance` at tensor parallelism `tp`.
pub fn fit(model: &ModelSpec, instance: &InstanceType, tp: u32, s: &FitSettings) -> Fit {
    let a = &model.attention;
    let tp = tp.max(1);
    let weights = model.weight_bytes() / f64::from(tp) / GIB;
    let reserve = s.reserve_gib(model, tp);
    let budget = instance.gpu_memory_gib * s.gpu_memory_utilization;
    let left = budget - weights - reserve;
    let tokens = s.isl.saturating_add(s.osl);
    let seq = model.sequence_bytes(tokens, tp, s.kv_cache_bits);
    let per_token = model.kv_bytes_per_token(tp, s.kv_cache_bits);
    let kv_gib = left.max(0.0);
    let kv_bytes = kv_gib * GIB;
    let kv_tokens = if per_token > 0.0 {
        (kv_bytes / per_token) as u64
    } else {
        0
    };
    let kv_max = if seq > 0.0 {
        (kv_bytes / seq).floor().min(f64::from(u32::MAX)) as u32
    } else {
        u32::MAX
    };
    let mut reason = None;
    if let Err(e) = model.validate() {
        reason = Some(e.to_string());
    } else if tp > instance.gpu_count {
        reason = Some(format!(
            "tensor parallelism {tp} needs more GPUs than the {} the instance has",
            instance.gpu_count
        ));
    } else if !a.heads.is_multiple_of(tp) {
        reason = Some(format!(
            "tensor parallelism {tp} does not divide the {} attention heads",
            a.heads
        ));
    } else if !a.kv_heads.is_multiple_of(tp) && !tp.is_multiple_of(a.kv_heads) {
        reason = Some(format!(
            "tensor parallelism {tp} and the {} KV heads do not divide one another",
            a.kv_heads
        ));
    } else if model.mamba.is_some_and(|m| m.heads % tp != 0) {
        reason = Some(format!(
            "tensor parallelism {tp} does not divide the Mamba heads"
        ));
    } else if model.max_position_embeddings.is_some_and(|m| tokens > m) {
        reason = Some(format!(
            "{tokens} tokens per sequence exceed the model's context of {}",
            model.max_position_embeddings.unwrap_or_default()
        ));
    } else if left <= 0.0 {
        reason = Some(format!(
            "the weights need {weights:.1} GiB per GPU but {:.1} GiB is usable ({:.0} % of {:.1} GiB, less {reserve:.1} GiB for activations and the runtime)",
            budget - reserve,
            s.gpu_memory_utilization * 100.0,
            instance.gpu_memory_gib
        ));
    } else if kv_max == 0 {
        reason = Some(format!(
            "the {kv_gib:.2} GiB left per GPU after the weights does not hold one sequence of {tokens} tokens ({:.1} MiB)",
            seq / MIB
        ));
    }
    let fits = reason.is_none();
    let replicas = (instance.gpu_count / tp).max(1);
    let max_concurrency = if fits { kv_max.min(s.max_num_seqs) } else { 0 };
    Fit {
        instance: instance.name.clone(),
        gpu: instance.gpu.clone(),
        gpus: instance.gpu_count,
        tensor_parallel: tp,
        replicas,
        weights_gib_per_gpu: weights,
        reserve_gib_per_gpu: reserve,
        kv_cache_gib_per_gpu: kv_gib,
        kv_bytes_per_token: per_token,
        kv_cache_tokens: kv_tokens,
        sequence_mib: seq / MIB,
        kv_max_concurrency: if fits { kv_max } else { 0 },
        max_concurrency,
        instance_max_concurrency: max_concurrency.saturating_mul(replicas),
        fits,
        reason,
    }
}

/// Every degree of every instance (see [`tensor_parallel_degrees`]), in the order given.
pub fn plan_fits(
    model: &ModelSpec,
    instances: &[&InstanceType],
    s: &FitSettings,
) -> Result<Vec<Fit>, Error> {
    s.validate()?;
    model.validate()?;
    Ok(instances
        .iter()
        .flat_map(|i| {
            tensor_parallel_degrees(i.gpu_count, &s.tensor_parallel)
                .into_iter()
                .map(move |tp| fit(model, i, tp, s))
        })
        .collect())
}

/// The fit to deploy on one instance type: of the degrees that fit, the one with the most
/// concurrent sequences per instance (the smaller degree on a tie: fewer GPUs to
/// synchronise each step).
pub fn best_fit(fits: &[Fit], instance: &str) -> Option<Fit> {
    fits.iter()
        .filter(|f| f.instance == instance && f.fits)
        .min_by_key(|f| {
            (
                std::cmp::Reverse(f.instance_max_concurrency),
                f.tensor_parallel,
            )
        })
        .cloned()
}
