//! A first-order prediction of throughput and latency against concurrency from the same
//! numbers as the fit: a decode step reads the weights (the experts the batch touches), each
//! sequence's KV cache and Mamba state from memory at the GPU's bandwidth; prefill adds its
//! compute at the GPU's dense BF16 rate. Nothing is measured: it is where to start looking,
//! and the error against a measured curve is stated in `docs/recommend.md`.
//!
//! In the steady state of a closed loop at `c` concurrent requests per replica, `B =
//! min(c, max_concurrency)` sequences decode each step and, to replace the ones that finish,
//! `B × ISL / OSL` prompt tokens are prefilled per step. One step takes
//! `max(bytes / (bandwidth × e_bw), decode FLOPs / (peak × e_c)) + prefill FLOPs / (peak ×
//! e_c) + overhead`: decode is memory-bound and hides its compute; prefill is compute-bound
//! and does not overlap. Requests beyond `B` wait in the queue (Little's law).

use kneepoint_planner::{find_knee, KneeRule, LevelPoint};
use serde::{Deserialize, Serialize};

use crate::{Error, Fit, FitSettings, InstanceType, Interconnect, ModelSpec};

/// The articles' measured sweep, for checking the prediction: (concurrency, output tokens/s)
/// of NVIDIA Nemotron-3 Nano 30B-A3B on one ml.g7e.2xlarge, ISL 1024 / OSL 256.
pub const ARTICLES_MEASURED: [(u32, f64); 6] = [
    (16, 492.5),
    (32, 904.2),
    (64, 1433.4),
    (128, 2066.8),
    (256, 2823.4),
    (512, 2782.3),
];

/// How much of the datasheet figures a real engine reaches.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Efficiency {
    /// Share of the memory bandwidth reached (0.8).
    pub bandwidth: f64,
    /// Share of the dense BF16 peak reached (0.5).
    pub compute: f64,
    /// Fixed cost of one engine step, ms: scheduling, kernel launches (2 ms with CUDA graphs;
    /// eager mode costs more).
    pub step_overhead_ms: f64,
}

impl Default for Efficiency {
    fn default() -> Self {
        Efficiency {
            bandwidth: 0.8,
            compute: 0.5,
            step_overhead_ms: 2.0,
        }
    }
}

/// The prediction at one concurrency (per instance: every replica carries its share).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PredictedPoint {
    /// Concurrent requests on the instance.
    pub concurrency: u32,
    /// Sequences each replica decodes per step.
    pub running: u32,
    /// One engine step, ms.
    pub step_ms: f64,
    /// Output tokens per second of the instance.
    pub output_tokens_per_s: f64,
    /// Requests per second of the instance.
    pub requests_per_s: f64,
    /// Time to first token, ms (queueing included).
    pub ttft_ms: f64,
    /// Request latency, ms (queueing included).
    pub e2e_ms: f64,
}

/// The step cost of the engine model, in the terms a simulator runs step by step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepModel {
    /// Fixed cost of a step, ms (the weights every step reads, plus the overhead).
    pub base_ms: f64,
    /// Added per decoding sequence, ms (its Mamba state, read and written).
    pub per_seq_ms: f64,
    /// Added per token of context held by the decoding sequences, µs (full-attention layers;
    /// sliding-window layers, bounded per sequence, are left out of the simulator's cost).
    pub per_context_token_us: f64,
    /// Added per prefilled token, µs.
    pub prefill_per_token_us: f64,
    /// Routed experts per layer and per token (`None`: a dense model).
    pub experts: Option<(u32, u32)>,
    /// Time to read every routed expert once, ms: a step costs this times the share its
    /// tokens touch.
    pub expert_read_ms: f64,
    /// Sequences one replica runs at once.
    pub max_num_seqs: u32,
    /// KV cache of one replica, tokens.
    pub kv_cache_tokens: u64,
}

/// A predicted curve and its knee.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The instance type.
    pub instance: String,
    /// Tensor parallelism.
    pub tensor_parallel: u32,
    /// Replicas per instance.
    pub replicas: u32,
    /// The assumptions.
    pub efficiency: Efficiency,
    /// Concurrency at which the instance stops taking more sequences per step.
    pub saturation_concurrency: u32,
    /// Output tokens per second at saturation.
    pub peak_output_tokens_per_s: f64,
    /// The curve at the levels asked for.
    pub points: Vec<PredictedPoint>,
    /// The knee of the predicted curve (the planner's rule on throughput and latency).
    pub knee: Option<u32>,
    /// Why that knee.
    pub knee_reason: String,
    /// The step model, for a simulator.
    pub step: StepModel,
}

struct Replica<'a> {
    model: &'a ModelSpec,
    s: &'a FitSettings,
    tp: f64,
    tp_n: u32,
    bandwidth: f64,
    flops: f64,
    e: Efficiency,
    link: Interconnect,
}

impl Replica<'_> {
    fn context(&self) -> f64 {
        self.s.isl as f64 + self.s.osl as f64 / 2.0
    }

    /// Memory time of a step of `b` decoding sequences, s, on average: the experts `b`
    /// tokens touch, and in the share `min(1, b / OSL)` of steps that also prefill a prompt,
    /// the experts its ISL tokens add.
    fn memory_s(&self, b: f64) -> f64 {
        let m = self.model;
        let with_prompt = (b / self.s.osl as f64).min(1.0);
        let extra = m.experts_touched(b + self.s.isl as f64) - m.experts_touched(b);
        let weights = (m.weight_bytes_read(b) + with_prompt * extra * m.expert_bytes()) / self.tp;
        let ctx = self.context();
        let per_layer = m.kv_bytes_per_token_layer(self.tp_n, self.s.kv_cache_bits);
        let a = &m.attention;
        let window = a.sliding_window.map_or(0.0, |w| ctx.min(w as f64));
        let kv =
            b * per_layer * (f64::from(a.full_layers) * ctx + f64::from(a.sliding_layers) * window);
        // The SSM state is read and written back every step.
        let state = b * 2.0 * m.mamba_state_bytes(self.tp_n);
        (weights + kv + state) / (self.bandwidth * self.e.bandwidth)
    }

    fn compute_s(&self, decode: f64, prefill: f64) -> f64 {
        let m = self.model;
        let per = m.flops_per_token();
        let f = decode * (per + m.attention_flops(self.context()))
            + prefill * (per + m.attention_flops(self.s.isl as f64 / 2.0));
        f / self.tp / (self.flops * self.e.compute)
    }

    /// The all-reduces of a step over `tokens` tokens, s: two a transformer layer (after
    /// attention and after the feed-forward part; one for each Mamba or attention block and
    /// each MLP or MoE block), each of `tokens × hidden × 2` bytes, not overlapped with compute
    /// (0 at tensor parallelism 1).
    fn comm_s(&self, tokens: f64) -> f64 {
        let bytes = tokens * self.model.hidden_size as f64 * ACTIVATION_BYTES;
        all_reduces(self.model) * self.link.allreduce_s(bytes, self.tp_n)
    }

    /// (step s, output tokens per step) with `b` decoding.
    fn step(&self, b: f64) -> (f64, f64) {
        let (isl, osl) = (self.s.isl as f64, self.s.osl as f64);
        let budget = f64::from(self.s.max_num_batched_tokens);
        // Requests finished per step: limited by decoding, and by the prefill budget left.
        let per_step = (b / osl).min(((budget - b).max(1.0)) / isl.max(1.0));
        let prefill = per_step * isl;
        let t = self.memory_s(b).max(self.compute_s(b, 0.0))
            + self.compute_s(0.0, prefill)
            + self.comm_s(b + prefill)
            + self.e.step_overhead_ms / 1000.0;
        (t, per_step * osl)
    }
}

/// Bytes of one activation element an all-reduce moves (bf16).
const ACTIVATION_BYTES: f64 = 2.0;

/// All-reduces one step makes: one after each attention or Mamba block, one after each MLP or
/// MoE block.
fn all_reduces(m: &ModelSpec) -> f64 {
    let blocks = m.attention.full_layers
        + m.attention.sliding_layers
        + m.mlp.map_or(0, |x| x.layers)
        + m.moe.map_or(0, |x| x.layers)
        + m.mamba.map_or(0, |x| x.layers);
    f64::from(blocks)
}

/// Predicts the instance's curve at `levels` (instance concurrency) for a fit that fits.
pub fn predict(
    model: &ModelSpec,
    instance: &InstanceType,
    fit: &Fit,
    s: &FitSettings,
    e: Efficiency,
    levels: &[u32],
) -> Result<Prediction, Error> {
    s.validate()?;
    model.validate()?;
    if !fit.fits {
        return Err(Error::InvalidSetting {
            field: "fit",
            reason: format!(
                "{} at tensor parallelism {} does not fit: {}",
                fit.instance,
                fit.tensor_parallel,
                fit.reason.clone().unwrap_or_default()
            ),
        });
    }
    for (field, v) in [("bandwidth", e.bandwidth), ("compute", e.compute)] {
        if !(v > 0.0 && v <= 1.0) {
            return Err(Error::InvalidSetting {
                field,
                reason: "an efficiency must be above 0 and at most 1".into(),
            });
        }
    }
    if !(e.step_overhead_ms >= 0.0 && e.step_overhead_ms.is_finite()) {
        return Err(Error::InvalidSetting {
            field: "step_overhead_ms",
            reason: "must be a number ≥ 0".into(),
        });
    }
    let r = Replica {
        model,
        s,
        tp: f64::from(fit.tensor_parallel),
        tp_n: fit.tensor_parallel,
        bandwidth: instance.memory_bandwidth_gb_s * 1e9,
        flops: instance.bf16_tflops * 1e12,
        e,
        link: instance
            .interconnect
            .clone()
            .unwrap_or_else(Interconnect::pcie_gen4),
    };
    let cap = fit.max_concurrency.max(1);
    let replicas = f64::from(fit.replicas);
    let (isl, osl) = (s.isl as f64, s.osl as f64);
    let budget = f64::from(s.max_num_batched_tokens);
    let point = |c: u32| {
        let per_replica = f64::from(c) / replicas;
        let b = per_replica.min(f64::from(cap)).max(1.0);
        let (t, out) = r.step(b);
        let tput = out / t * replicas;
        let rps = tput / osl;
        // Prefill of one prompt, in steps of the budget left by decoding, then half a step of
        // waiting to be scheduled; queueing beyond the batch by Little's law.
        let prefill_steps = (isl / (budget - b).max(1.0)).ceil().max(1.0);
        let queued = (per_replica - b).max(0.0);
        let wait = if rps > 0.0 {
            queued / (rps / replicas)
        } else {
            0.0
        };
        let ttft = (0.5 + prefill_steps) * t + wait;
        PredictedPoint {
            concurrency: c,
            running: b.round() as u32,
            step_ms: t * 1000.0,
            output_tokens_per_s: tput,
            requests_per_s: rps,
            ttft_ms: ttft * 1000.0,
            e2e_ms: (ttft + (osl - 1.0).max(0.0) * t) * 1000.0,
        }
    };
    let points: Vec<PredictedPoint> = levels.iter().map(|&c| point(c.max(1))).collect();
    let knee_points: Vec<LevelPoint> = points
        .iter()
        .map(|p| LevelPoint::new(p.concurrency, p.output_tokens_per_s, p.e2e_ms))
        .collect();
    let knee =
        find_knee(&knee_points, &KneeRule::default()).map_err(|source| Error::Knee { source })?;
    let saturation = cap.saturating_mul(fit.replicas);
    let peak = point(saturation);
    // The step cost a simulator runs: the same terms, counted per step from its own batch.
    let bw = r.bandwidth * e.bandwidth;
    let per_layer = model.kv_bytes_per_token_layer(fit.tensor_parallel, s.kv_cache_bits);
    // the all-reduces' latency is paid once a step, their bytes per token
    let comm_fixed = r.comm_s(0.0);
    let comm_token = r.comm_s(1.0) - comm_fixed;
    let step = StepModel {
        base_ms: (model.weight_bytes_read(0.0) / r.tp / bw + comm_fixed) * 1000.0
            + e.step_overhead_ms,
        per_seq_ms: (2.0 * model.mamba_state_bytes(fit.tensor_parallel) / bw + comm_token) * 1000.0,
        per_context_token_us: per_layer * f64::from(model.attention.full_layers) / bw * 1e6,
        prefill_per_token_us: (r.compute_s(0.0, 1.0) + comm_token) * 1e6,
        experts: model.moe.map(|m| (m.experts, m.experts_per_token)),
        expert_read_ms: model.expert_bytes() / r.tp / bw * 1000.0,
        max_num_seqs: cap,
        kv_cache_tokens: fit.kv_cache_tokens,
    };
    Ok(Prediction {
        instance: fit.instance.clone(),
        tensor_parallel: fit.tensor_parallel,
        replicas: fit.replicas,
        efficiency: e,
        saturation_concurrency: saturation,
        peak_output_tokens_per_s: peak.output_tokens_per_s,
        points,
        knee: knee.knee,
        knee_reason: knee.reason,
        step,
    })
}
