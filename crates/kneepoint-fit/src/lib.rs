//! Stage-1 sizing for kneepoint, before anything is measured: which instance types and
//! tensor-parallel degrees can hold a model, how much KV cache each leaves, how many sequences
//! of ISL + OSL tokens that cache holds (the natural upper bound for a search), and a
//! first-order roofline prediction of the throughput-vs-concurrency curve and its knee.
//!
//! Pure: a `config.json`'s text and a catalog in, numbers out. The arithmetic is written here
//! rather than taken from a crate because no maintained Rust crate sizes vLLM's memory; the
//! formulas follow vLLM's own accounting (weights + profiled activations within
//! `gpu_memory_utilization`, 16-token KV blocks, bounded sliding windows, a fixed Mamba state
//! per sequence) and are stated on each function.
//!
//! # Example
//! ```
//! use kneepoint_fit::{best_fit, plan_fits, predict, Catalog, Efficiency, FitSettings, ModelSpec};
//!
//! // A Llama-style 8B model in bf16.
//! let model = ModelSpec::from_hf_config(r#"{
//!     "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
//!     "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
//!     "vocab_size": 128256, "hidden_act": "silu", "torch_dtype": "bfloat16"
//! }"#).unwrap();
//! assert!((model.params().total() / 1e9 - 8.03).abs() < 0.01);
//!
//! let catalog = Catalog::builtin();
//! let g5 = catalog.get("ml.g5.2xlarge").unwrap();
//! let settings = FitSettings::new(1024, 256);
//! let fits = plan_fits(&model, &[g5], &settings).unwrap();
//! let fit = best_fit(&fits, "ml.g5.2xlarge").unwrap();
//! // 128 KiB of KV per token: a 1,280-token sequence takes 160 MiB.
//! assert_eq!(fit.kv_bytes_per_token, 131072.0);
//! assert!(fit.kv_max_concurrency > 10 && fit.kv_max_concurrency < 40);
//!
//! let p = predict(&model, g5, &fit, &settings, Efficiency::default(), &[1, 4, 16, 64]).unwrap();
//! assert!(p.points[1].output_tokens_per_s > p.points[0].output_tokens_per_s);
//! ```

mod catalog;
mod error;
mod fit;
mod model;
mod params;
mod plan;
mod roofline;
mod weights;

pub use catalog::{Catalog, InstanceType, Interconnect};
pub use error::Error;
pub use fit::{best_fit, fit, plan_fits, tensor_parallel_degrees, Fit, FitSettings};
pub use model::{AttentionSpec, MambaSpec, MlaSpec, MlpSpec, ModelSpec, MoeSpec, MAX_DIM};
pub use params::ParamCount;
pub use plan::{plan, prediction_levels, Plan, PlanRow};
pub use roofline::{predict, Efficiency, PredictedPoint, Prediction, StepModel, ARTICLES_MEASURED};
pub use weights::WeightFormat;

#[cfg(test)]
mod tests;
