//! The weights' number format: bits per parameter for the linear layers, the experts and the
//! rest (embeddings, norms), read from `quantization_config` / `torch_dtype` or named by the
//! caller.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Error;

/// Bits per parameter by kind of weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeightFormat {
    /// A short name (`bf16`, `fp8`, `mxfp4 experts`, `awq 4-bit`...).
    pub label: String,
    /// Attention, Mamba and dense feed-forward matrices (and shared experts).
    pub linear_bits: f64,
    /// Routed experts' matrices.
    pub expert_bits: f64,
    /// Embeddings, the output projection and everything else.
    pub other_bits: f64,
}

impl WeightFormat {
    /// Every weight at 16 bits (bf16/fp16: what vLLM serves by default).
    pub fn half() -> Self {
        Self::uniform("bf16", 16.0)
    }

    fn uniform(label: &str, linear: f64) -> Self {
        WeightFormat {
            label: label.into(),
            linear_bits: linear,
            expert_bits: linear,
            other_bits: 16.0,
        }
    }

    /// A format by name: `bf16`/`fp16`, `fp8`/`int8`, `int4` (group-128 scales: 4.25 bits),
    /// `mxfp4` (experts only, as GPT-OSS ships), `nvfp4` (4.5 bits).
    pub fn parse(name: &str) -> Result<Self, Error> {
        let n = name.trim().to_ascii_lowercase();
        Ok(match n.as_str() {
            "bf16" | "bfloat16" | "fp16" | "float16" | "half" | "auto" => Self::half(),
            "fp8" | "int8" | "w8a8" | "w8a16" => Self::uniform(&n, 8.0),
            "int4" | "w4a16" | "awq" | "gptq" => Self::uniform(&n, 4.25),
            "nvfp4" => Self::uniform(&n, 4.5),
            "mxfp4" => WeightFormat {
                label: "mxfp4 experts".into(),
                linear_bits: 16.0,
                expert_bits: 4.25,
                other_bits: 16.0,
            },
            _ => {
                return Err(Error::WeightFormat {
                    format: name.to_owned(),
                    reason: "known: bf16, fp16, fp8, int8, int4, nvfp4, mxfp4".into(),
                })
            }
        })
    }

    /// The format a `config.json` declares: its `quantization_config` when there is one
    /// (fp8, mxfp4, AWQ/GPTQ with their bits and group size, bitsandbytes, compressed-tensors,
    /// ModelOpt), else 16 bits (vLLM serves fp32 checkpoints in half precision too).
    pub fn from_config(outer: &Map<String, Value>, m: &Map<String, Value>) -> Result<Self, Error> {
        let q = outer
            .get("quantization_config")
            .or_else(|| m.get("quantization_config"))
            .and_then(Value::as_object);
        let Some(q) = q else {
            return Ok(Self::half());
        };
        let method = q
            .get("quant_method")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase();
        let bits_of = |q: &Map<String, Value>| {
            q.get("bits")
                .or_else(|| q.get("w_bit"))
                .or_else(|| q.get("num_bits"))
                .and_then(Value::as_f64)
        };
        let group = q
            .get("group_size")
            .or_else(|| q.get("q_group_size"))
            .and_then(Value::as_f64)
            .filter(|g| *g > 0.0)
            .unwrap_or(128.0);
        let unsupported = |why: &str| Error::WeightFormat {
            format: method.clone(),
            reason: format!("{why}; name the format instead (e.g. --weights fp8)"),
        };
        Ok(match method.as_str() {
            "fp8" | "fbgemm_fp8" => Self::uniform("fp8", 8.0),
            "mxfp4" => Self::parse("mxfp4")?,
            "awq" | "gptq" | "awq_marlin" | "gptq_marlin" | "auto-round" => {
                let bits = bits_of(q).ok_or_else(|| unsupported("no bits given"))?;
                // One fp16 scale (and a zero point) per group.
                Self::uniform(&format!("{method} {bits}-bit"), bits + 32.0 / group)
            }
            "bitsandbytes" => {
                if q.get("load_in_4bit").and_then(Value::as_bool) == Some(true) {
                    Self::uniform("bitsandbytes 4-bit", 4.5)
                } else {
                    Self::uniform("bitsandbytes 8-bit", 8.0)
                }
            }
            "compressed-tensors" => {
                let bits = q
                    .get("config_groups")
                    .and_then(Value::as_object)
                    .and_then(|g| g.values().next())
                    .and_then(|g| g.get("weights"))
                    .and_then(Value::as_object)
                    .and_then(bits_of)
                    .ok_or_else(|| unsupported("no weights.num_bits in config_groups"))?;
                Self::uniform(&format!("compressed-tensors {bits}-bit"), bits.max(4.25))
            }
            "modelopt" => {
                let algo = q
                    .get("quant_algo")
                    .or_else(|| q.get("quantization").and_then(|x| x.get("quant_algo")))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_ascii_uppercase();
                match algo.as_str() {
                    "FP8" => Self::uniform("fp8", 8.0),
                    "NVFP4" => Self::uniform("nvfp4", 4.5),
                    _ => return Err(unsupported("unknown ModelOpt quant_algo")),
                }
            }
            _ => return Err(unsupported("unknown quant_method")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<WeightFormat, Error> {
        let v: Value = serde_json::from_str(json).unwrap_or_default();
        let m = v.as_object().cloned().unwrap_or_default();
        WeightFormat::from_config(&m, &m)
    }

    #[test]
    fn formats_from_configs() {
        assert_eq!(read("{}").unwrap(), WeightFormat::half());
        let awq =
            read(r#"{"quantization_config":{"quant_method":"awq","bits":4,"group_size":128}}"#)
                .unwrap();
        assert!((awq.linear_bits - 4.25).abs() < 1e-12);
        let mx = read(r#"{"quantization_config":{"quant_method":"mxfp4"}}"#).unwrap();
        assert_eq!((mx.linear_bits, mx.expert_bits), (16.0, 4.25));
        assert_eq!(
            read(r#"{"quantization_config":{"quant_method":"fp8"}}"#)
                .unwrap()
                .linear_bits,
            8.0
        );
        assert!(read(r#"{"quantization_config":{"quant_method":"hqq"}}"#).is_err());
        assert!(WeightFormat::parse("int3").is_err());
    }
}
