//! The engine's settings as one group (issue 58 part 1): the flags of `plan`, `sweep
//! --sim-profile predicted` and `sim serve`, the keys of `[model]`, and the matrix keys of a
//! recommendation that stage 1 reads are the fields of [`EngineSettings`], each named as vLLM
//! names it, so that a new setting is added here once and every command takes it.

use std::collections::BTreeMap;

use clap::Args;
use kneepoint_fit::FitSettings;
use merge::Merge;
use serde::Deserialize;

use crate::Result;

/// vLLM's engine settings that stage 1 models.
#[derive(Debug, Clone, Default, PartialEq, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct EngineSettings {
    /// GPUs one engine spans (vLLM's --tensor-parallel-size; default: the degree that holds
    /// the most sequences).
    #[arg(long, value_name = "N", alias = "tensor-parallel")]
    #[serde(alias = "tensor_parallel")]
    pub tensor_parallel_size: Option<u32>,
    /// The engine's limit on running sequences (vLLM's --max-num-seqs; default 256); requests
    /// past it wait in its queue.
    #[arg(long, value_name = "N")]
    pub max_num_seqs: Option<u32>,
    /// Tokens one engine step may take (vLLM's --max-num-batched-tokens, default 8192): a
    /// smaller budget chunks long prompts, trading TTFT for steadier ITL.
    #[arg(long, value_name = "N")]
    pub max_num_batched_tokens: Option<u32>,
    /// KV-cache precision: auto (16-bit) or fp8 (twice the tokens in the same memory).
    #[arg(long, value_name = "auto|fp8")]
    pub kv_cache_dtype: Option<String>,
    /// Share of each GPU's memory the engine may use (default 0.9, vLLM's).
    #[arg(long, value_name = "SHARE")]
    pub gpu_memory_utilization: Option<f64>,
}

/// A positive finite number, or why `key = v` is not one.
fn number(key: &str, v: &str) -> Result<f64> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| crate::Error::Invalid(format!("{key} = {v:?} is not a positive number")))
}

/// A whole number from 1 to `u32::MAX` (a limit past what the engine's integer holds is
/// refused as written, not saturated).
fn limit(key: &str, v: &str) -> Result<u32> {
    let n = number(key, v)?;
    if n.fract() != 0.0 || n > f64::from(u32::MAX) {
        return Err(crate::Error::Invalid(format!(
            "{key} = {v:?} is not a whole number from 1 to {}",
            u32::MAX
        )));
    }
    Ok(n as u32)
}

impl EngineSettings {
    /// The settings' names, as flags (with `-` for `_`), `[model]` keys and matrix keys.
    pub const KEYS: [&'static str; 5] = [
        "tensor_parallel_size",
        "max_num_seqs",
        "max_num_batched_tokens",
        "kv_cache_dtype",
        "gpu_memory_utilization",
    ];

    /// The settings among `pairs` (a candidate's matrix values; other keys are the launch
    /// command's own and are left alone), checked.
    pub fn from_pairs(pairs: &BTreeMap<String, String>) -> Result<Self> {
        let mut s = EngineSettings::default();
        for (key, v) in pairs {
            match key.as_str() {
                "tensor_parallel_size" => s.tensor_parallel_size = Some(limit(key, v)?),
                "max_num_seqs" => s.max_num_seqs = Some(limit(key, v)?),
                "max_num_batched_tokens" => s.max_num_batched_tokens = Some(limit(key, v)?),
                "gpu_memory_utilization" => s.gpu_memory_utilization = Some(number(key, v)?),
                // as vLLM names them (fp8_e4m3, fp8_inc, bfloat16...): an fp8 cache or not
                "kv_cache_dtype" => {
                    let fp8 = v.trim().to_ascii_lowercase().starts_with("fp8");
                    s.kv_cache_dtype = Some(if fp8 { "fp8" } else { "auto" }.to_owned());
                }
                _ => {}
            }
        }
        Ok(s)
    }

    /// The KV cache's bits per value for `kv_cache_dtype` (16 when unset).
    fn kv_cache_bits(&self) -> Result<f64> {
        let dtype = self.kv_cache_dtype.as_deref().unwrap_or("auto");
        Ok(match dtype.to_ascii_lowercase().as_str() {
            "auto" | "bf16" | "fp16" => 16.0,
            "fp8" | "fp8_e4m3" | "fp8_e5m2" => 8.0,
            other => {
                return Err(crate::Error::Invalid(format!(
                    "--kv-cache-dtype must be auto or fp8, not {other:?}"
                )))
            }
        })
    }

    /// Sets what is given on stage 1's `settings` (the rest keeps its value) and checks the
    /// result.
    pub fn apply(&self, settings: &mut FitSettings) -> Result<()> {
        if let Some(tp) = self.tensor_parallel_size {
            settings.tensor_parallel = vec![tp];
        }
        if let Some(n) = self.max_num_seqs {
            settings.max_num_seqs = n;
        }
        if let Some(n) = self.max_num_batched_tokens {
            settings.max_num_batched_tokens = n;
        }
        if let Some(u) = self.gpu_memory_utilization {
            settings.gpu_memory_utilization = u;
        }
        if self.kv_cache_dtype.is_some() {
            settings.kv_cache_bits = self.kv_cache_bits()?;
        }
        settings
            .validate()
            .map_err(|e| crate::Error::Invalid(format!("the engine settings: {e}")))
    }

    /// The settings given, as `(key, value)` pairs in [`EngineSettings::KEYS`]' order.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let s = |v: Option<String>, k| v.map(|v| (k, v));
        [
            s(
                self.tensor_parallel_size.map(|v| v.to_string()),
                Self::KEYS[0],
            ),
            s(self.max_num_seqs.map(|v| v.to_string()), Self::KEYS[1]),
            s(
                self.max_num_batched_tokens.map(|v| v.to_string()),
                Self::KEYS[2],
            ),
            s(self.kv_cache_dtype.clone(), Self::KEYS[3]),
            s(
                self.gpu_memory_utilization.map(|v| v.to_string()),
                Self::KEYS[4],
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn matrix_values_and_flags_are_one_group() {
        let pairs: BTreeMap<String, String> = [
            ("max_num_seqs", "64"),
            ("max_num_batched_tokens", "2048"),
            ("kv_cache_dtype", "fp8"),
            ("image", "vllm:latest"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let e = EngineSettings::from_pairs(&pairs).unwrap();
        assert_eq!(e.max_num_seqs, Some(64));
        assert_eq!(e.max_num_batched_tokens, Some(2048));
        let mut s = FitSettings::new(1024, 256);
        e.apply(&mut s).unwrap();
        assert_eq!((s.max_num_seqs, s.max_num_batched_tokens), (64, 2048));
        assert_eq!(s.kv_cache_bits, 8.0);
        assert_eq!(
            e.pairs(),
            [
                ("max_num_seqs", "64".to_owned()),
                ("max_num_batched_tokens", "2048".to_owned()),
                ("kv_cache_dtype", "fp8".to_owned())
            ]
        );
        let bad = |k: &str, v: &str| {
            let p = [(k.to_owned(), v.to_owned())].into_iter().collect();
            EngineSettings::from_pairs(&p)
                .and_then(|e| e.apply(&mut FitSettings::new(1024, 256)))
                .unwrap_err()
                .to_string()
        };
        assert!(bad("max_num_seqs", "1e12").contains("whole number"));
        // a matrix may name any of vLLM's dtypes: fp8 or not
        let dtype = |v: &str| {
            let p = [("kv_cache_dtype".to_owned(), v.to_owned())]
                .into_iter()
                .collect();
            EngineSettings::from_pairs(&p)
                .unwrap()
                .kv_cache_dtype
                .unwrap()
        };
        assert_eq!(dtype("fp8_inc"), "fp8");
        assert_eq!(dtype("bfloat16"), "auto");
        let flag = EngineSettings {
            kv_cache_dtype: Some("int3".into()),
            ..Default::default()
        };
        let e = flag.apply(&mut FitSettings::new(1024, 256)).unwrap_err();
        assert!(e.to_string().contains("auto or fp8"), "{e}");
        assert!(bad("gpu_memory_utilization", "-1").contains("positive"));
    }

    #[test]
    fn the_old_key_for_tensor_parallelism_still_reads() {
        let e: EngineSettings = toml::from_str("tensor_parallel = 2").unwrap();
        assert_eq!(e.tensor_parallel_size, Some(2));
        assert!(toml::from_str::<EngineSettings>("bogus = 1").is_err());
    }
}
