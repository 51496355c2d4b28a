//! A model's architecture as read from its Hugging Face `config.json`: the numbers the memory
//! plan and the prediction need (layers of each kind, attention and KV heads, experts, Mamba
//! state, the weights' number format).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Error, WeightFormat};

/// Attention: the heads and how many layers keep a full or a sliding-window KV cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttentionSpec {
    /// Query heads.
    pub heads: u32,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: u32,
    /// Dimension of one head.
    pub head_dim: u32,
    /// Layers whose KV cache holds every token of the sequence.
    pub full_layers: u32,
    /// Layers whose KV cache holds at most `sliding_window` tokens.
    pub sliding_layers: u32,
    /// The sliding window, in tokens.
    pub sliding_window: Option<u64>,
    /// Multi-head latent attention (DeepSeek): one compressed vector per token and layer.
    pub mla: Option<MlaSpec>,
}

/// Multi-head latent attention's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MlaSpec {
    /// Rank of the compressed key/value vector (what the cache holds, with the rope part).
    pub kv_lora_rank: u32,
    /// Rank of the compressed query (`None`: queries are not compressed).
    pub q_lora_rank: Option<u32>,
    /// Rotary part of each query/key head.
    pub qk_rope_head_dim: u32,
    /// Non-rotary part of each query/key head.
    pub qk_nope_head_dim: u32,
    /// Value head dimension.
    pub v_head_dim: u32,
}

/// Dense feed-forward layers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MlpSpec {
    /// How many layers have one.
    pub layers: u32,
    /// Their inner size.
    pub intermediate_size: u64,
    /// Gated (three matrices, SwiGLU-style) or not (two, e.g. squared ReLU).
    pub gated: bool,
}

/// Mixture-of-experts feed-forward layers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MoeSpec {
    /// How many layers are sparse.
    pub layers: u32,
    /// Routed experts per layer.
    pub experts: u32,
    /// Routed experts each token uses.
    pub experts_per_token: u32,
    /// Inner size of one routed expert.
    pub expert_intermediate_size: u64,
    /// Total inner size of the always-used shared experts (0 when none).
    pub shared_intermediate_size: u64,
    /// Gated experts (three matrices) or not (two).
    pub gated: bool,
}

/// Mamba-2 layers (hybrid models): a fixed-size state per sequence instead of a KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MambaSpec {
    /// How many layers are Mamba layers.
    pub layers: u32,
    /// SSM heads.
    pub heads: u32,
    /// Dimension of one head.
    pub head_dim: u32,
    /// SSM state size.
    pub state_size: u32,
    /// Groups sharing B and C.
    pub groups: u32,
    /// Causal convolution width.
    pub conv_kernel: u32,
    /// Bits per element of the SSM state in the cache (`mamba_ssm_cache_dtype`; vLLM keeps
    /// NVIDIA's hybrids at float32).
    pub ssm_state_bits: f64,
}

impl MambaSpec {
    /// The inner size, heads × head dimension.
    pub fn inner(&self) -> u64 {
        u64::from(self.heads) * u64::from(self.head_dim)
    }
}

/// A model's architecture, as the plan sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// The model's name (`_name_or_path`, or what the caller set).
    pub name: String,
    /// `model_type` of the config.
    pub model_type: String,
    /// Hidden size.
    pub hidden_size: u64,
    /// Vocabulary size.
    pub vocab_size: u64,
    /// True when the output projection shares the input embedding's weights.
    pub tie_word_embeddings: bool,
    /// The longest context the model was trained for.
    pub max_position_embeddings: Option<u64>,
    /// Attention layers.
    pub attention: AttentionSpec,
    /// Dense feed-forward layers.
    pub mlp: Option<MlpSpec>,
    /// Sparse feed-forward layers.
    pub moe: Option<MoeSpec>,
    /// Mamba layers.
    pub mamba: Option<MambaSpec>,
    /// The weights' number format.
    pub weights: WeightFormat,
}

fn get<'a>(m: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().find_map(|k| m.get(*k).filter(|v| !v.is_null()))
}

/// The count the first of `keys` the config sets holds, with that key: `None` when none is
/// set or it is not a number (a string, say); an error naming the key and the value as
/// written when it is a number but no count (negative, fractional, or past what a `u64`
/// holds: `1e30` is refused as `1e30`, not saturated).
fn config_count(
    m: &Map<String, Value>,
    keys: &[&'static str],
) -> Result<Option<(&'static str, u64)>, Error> {
    let Some((key, v)) = keys
        .iter()
        .find_map(|k| m.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v)))
    else {
        return Ok(None);
    };
    if let Some(n) = v.as_u64() {
        return Ok(Some((key, n)));
    }
    let Some(f) = v.as_f64() else {
        return Ok(None);
    };
    let bad = |reason: String| Error::ConfigField { field: key, reason };
    if f < 0.0 {
        Err(bad(format!("{v} is negative")))
    } else if f.fract() != 0.0 {
        Err(bad(format!("{v} is not a whole number")))
    } else if f >= u64::MAX as f64 {
        // (2^64: a whole f64 below it converts exactly)
        Err(bad(format!("{f:e} is too large for any model")))
    } else {
        Ok(Some((key, f as u64)))
    }
}

/// The count the first of `keys` holds (see [`config_count`]).
fn uint(m: &Map<String, Value>, keys: &[&'static str]) -> Result<Option<u64>, Error> {
    Ok(config_count(m, keys)?.map(|(_, n)| n))
}

/// The largest size accepted for any dimension or count (16.7 million): real models are far
/// below it, and it keeps every product of two dimensions inside a `u64`.
pub const MAX_DIM: u64 = 1 << 24;

fn need(m: &Map<String, Value>, field: &'static str, keys: &[&'static str]) -> Result<u64, Error> {
    match uint(m, keys)? {
        Some(0) => Err(Error::ConfigField {
            field,
            reason: "is zero".into(),
        }),
        Some(v) if v > MAX_DIM => Err(Error::ConfigField {
            field,
            reason: format!("{v} is implausibly large (at most {MAX_DIM})"),
        }),
        Some(v) => Ok(v),
        None => Err(Error::ConfigField {
            field,
            reason: format!("none of {keys:?} is a whole number"),
        }),
    }
}

fn small(v: u64, field: &'static str) -> Result<u32, Error> {
    if v > MAX_DIM {
        return Err(Error::ConfigField {
            field,
            reason: format!("{v} is implausibly large (at most {MAX_DIM})"),
        });
    }
    u32::try_from(v).map_err(|_| Error::ConfigField {
        field,
        reason: format!("{v} is too large"),
    })
}

fn text<'a>(m: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a str> {
    get(m, keys).and_then(Value::as_str)
}

/// `layers` dense feed-forward layers of inner size `inner` (none when `layers` is 0; an
/// error when there are some but no size).
fn mlp_shape(layers: u32, inner: Option<u64>, gated: bool) -> Result<Option<MlpSpec>, Error> {
    match (layers, inner) {
        (0, _) => Ok(None),
        (n, Some(i)) => Ok(Some(MlpSpec {
            layers: n,
            intermediate_size: i,
            gated,
        })),
        (_, None) => Err(Error::ConfigField {
            field: "intermediate_size",
            reason: "the config has dense feed-forward layers but no inner size".into(),
        }),
    }
}

/// Squared-ReLU and plain GELU feed-forwards have two matrices; SwiGLU-style ones three.
fn gated(act: Option<&str>) -> bool {
    !matches!(
        act.map(str::to_ascii_lowercase).as_deref(),
        Some("relu2" | "relu_squared" | "squared_relu")
    )
}

/// The expert count of a sparse model (`None` for a dense one, which leaves it out or says
/// 1); an error for 0, which no model has.
fn expert_count(m: &Map<String, Value>) -> Result<Option<u64>, Error> {
    let keys = [
        "num_local_experts",
        "num_experts",
        "n_routed_experts",
        "moe_num_experts",
    ];
    match config_count(m, &keys)? {
        Some((key, 0)) => Err(Error::ConfigField {
            field: key,
            reason: "is 0: a mixture-of-experts model has experts, and a dense one leaves the \
                     count out (or says 1)"
                .into(),
        }),
        found => Ok(found.map(|(_, e)| e).filter(|e| *e > 1)),
    }
}

/// `layers` mixture-of-experts layers of `experts` experts (none for a dense model).
fn moe_shape(
    m: &Map<String, Value>,
    experts: Option<u64>,
    act: Option<&str>,
    layers: u32,
) -> Result<Option<MoeSpec>, Error> {
    let Some(e) = experts else { return Ok(None) };
    let k = need(
        m,
        "num_experts_per_tok",
        &[
            "num_experts_per_tok",
            "experts_per_token",
            "moe_top_k",
            "top_k",
        ],
    )?;
    let ei = need(
        m,
        "moe_intermediate_size",
        &[
            "moe_intermediate_size",
            "expert_intermediate_size",
            "intermediate_size",
        ],
    )?;
    let shared = match uint(
        m,
        &[
            "moe_shared_expert_intermediate_size",
            "shared_expert_intermediate_size",
        ],
    )? {
        Some(s) => s,
        None => uint(m, &["n_shared_experts"])?
            .unwrap_or(0)
            .saturating_mul(ei),
    };
    if k > e {
        return Err(Error::ConfigField {
            field: "num_experts_per_tok",
            reason: format!("{k} experts per token but only {e} experts"),
        });
    }
    Ok(Some(MoeSpec {
        layers,
        experts: small(e, "num_experts")?,
        experts_per_token: small(k, "num_experts_per_tok")?,
        expert_intermediate_size: ei,
        shared_intermediate_size: shared,
        gated: gated(act),
    }))
}

/// `layers` Mamba-2 layers (none when 0).
fn mamba_shape(m: &Map<String, Value>, layers: u32) -> Result<Option<MambaSpec>, Error> {
    if layers == 0 {
        return Ok(None);
    }
    let heads = need(m, "mamba_num_heads", &["mamba_num_heads", "mamba_n_heads"])?;
    let hd = need(m, "mamba_head_dim", &["mamba_head_dim", "mamba_d_head"])?;
    Ok(Some(MambaSpec {
        layers,
        heads: small(heads, "mamba_num_heads")?,
        head_dim: small(hd, "mamba_head_dim")?,
        state_size: small(
            need(m, "ssm_state_size", &["ssm_state_size", "mamba_d_state"])?,
            "ssm_state_size",
        )?,
        groups: small(
            uint(m, &["n_groups", "mamba_n_groups"])?.unwrap_or(1),
            "n_groups",
        )?,
        conv_kernel: small(
            uint(m, &["conv_kernel", "mamba_d_conv"])?.unwrap_or(4),
            "conv_kernel",
        )?,
        ssm_state_bits: match text(m, &["mamba_ssm_cache_dtype"]) {
            Some("float32") | Some("fp32") => 32.0,
            _ => 16.0,
        },
    }))
}

/// Latent attention's dimensions, when the config has them (`kv_lora_rank`).
fn mla_shape(m: &Map<String, Value>) -> Result<Option<MlaSpec>, Error> {
    let Some(r) = uint(m, &["kv_lora_rank"])? else {
        return Ok(None);
    };
    Ok(Some(MlaSpec {
        kv_lora_rank: small(r, "kv_lora_rank")?,
        q_lora_rank: uint(m, &["q_lora_rank"])?
            .map(|q| small(q, "q_lora_rank"))
            .transpose()?,
        qk_rope_head_dim: small(
            need(m, "qk_rope_head_dim", &["qk_rope_head_dim"])?,
            "qk_rope_head_dim",
        )?,
        qk_nope_head_dim: small(
            need(m, "qk_nope_head_dim", &["qk_nope_head_dim"])?,
            "qk_nope_head_dim",
        )?,
        v_head_dim: small(need(m, "v_head_dim", &["v_head_dim"])?, "v_head_dim")?,
    }))
}

/// The layers of a model, by kind.
struct Layers {
    attention: u32,
    /// `layer_types`, when the config lists each layer's kind.
    kinds: Option<Vec<Value>>,
    mlp: Option<MlpSpec>,
    moe: Option<MoeSpec>,
    mamba: Option<MambaSpec>,
}

/// NVIDIA's hybrid layout (`hybrid_override_pattern`): one block per character, `M` Mamba,
/// `*` attention, `-` dense feed-forward, `E` mixture of experts.
fn hybrid_layers(m: &Map<String, Value>, pattern: &str) -> Result<Layers, Error> {
    if let Some(c) = pattern
        .chars()
        .find(|c| !matches!(c, 'M' | '*' | '-' | 'E'))
    {
        return Err(Error::ConfigField {
            field: "hybrid_override_pattern",
            reason: format!("unknown layer kind {c:?} (known: M, *, -, E)"),
        });
    }
    let count = |c: char| pattern.chars().filter(|x| *x == c).count() as u32;
    let act = activation(m);
    let experts = expert_count(m)?;
    let moe = match (count('E'), experts) {
        (0, _) => None,
        (n, Some(_)) => moe_shape(m, experts, act, n)?,
        (_, None) => {
            return Err(Error::ConfigField {
                field: "n_routed_experts",
                reason: "the pattern has MoE layers (E) but no expert count".into(),
            })
        }
    };
    Ok(Layers {
        attention: count('*'),
        kinds: None,
        mlp: mlp_shape(count('-'), intermediate(m)?, gated(act))?,
        moe,
        mamba: mamba_shape(m, count('M'))?,
    })
}

/// A stack of `num_hidden_layers` attention layers, each with a dense or a sparse
/// feed-forward.
fn uniform_layers(m: &Map<String, Value>) -> Result<Layers, Error> {
    let layers = small(
        need(
            m,
            "num_hidden_layers",
            &["num_hidden_layers", "n_layer", "num_layers"],
        )?,
        "num_hidden_layers",
    )?;
    let act = activation(m);
    let experts = expert_count(m)?;
    // Dense layers of a sparse model: DeepSeek's first k, Qwen's listed ones.
    let (dense_layers, dense_inner) = if experts.is_some() {
        let first_k = uint(m, &["first_k_dense_replace"])?.unwrap_or(0);
        let listed = get(m, &["mlp_only_layers"])
            .and_then(Value::as_array)
            .map_or(0, |a| a.len() as u64);
        (
            small(
                first_k.max(listed).min(layers.into()),
                "first_k_dense_replace",
            )?,
            uint(m, &["dense_intermediate_size"])?.or(intermediate(m)?),
        )
    } else {
        (layers, intermediate(m)?)
    };
    Ok(Layers {
        attention: layers,
        kinds: get(m, &["layer_types"]).and_then(Value::as_array).cloned(),
        mlp: mlp_shape(dense_layers, dense_inner, gated(act))?,
        moe: moe_shape(m, experts, act, layers - dense_layers)?,
        mamba: None,
    })
}

/// The feed-forward's activation function, as the config names it.
fn activation(m: &Map<String, Value>) -> Option<&str> {
    text(m, &["mlp_hidden_act", "hidden_act", "hidden_activation"])
}

/// The dense feed-forward's inner size.
fn intermediate(m: &Map<String, Value>) -> Result<Option<u64>, Error> {
    uint(m, &["intermediate_size", "ffn_hidden_size", "n_inner"])
}

/// The key/value heads of a model of `heads` attention heads: `heads` when the config leaves
/// them out (multi-head attention); 0, or more than `heads`, is an error naming the field.
fn key_value_heads(m: &Map<String, Value>, heads: u32) -> Result<u32, Error> {
    match config_count(m, &["num_key_value_heads", "num_kv_heads", "n_head_kv"])? {
        None => Ok(heads),
        Some((key, 0)) => Err(Error::ConfigField {
            field: key,
            reason: "is 0: attention needs at least one key/value head (leave it out when every \
                     head has its own)"
                .into(),
        }),
        Some((key, n)) => {
            let n = small(n, key)?;
            if n > heads {
                return Err(Error::ConfigField {
                    field: key,
                    reason: format!(
                        "{n} key/value heads is more than the {heads} attention heads (each key/value head serves one or more query heads)"
                    ),
                });
            }
            Ok(n)
        }
    }
}

/// How many of `layers.attention` layers keep a sliding-window cache of `window` tokens.
fn sliding_layer_count(
    m: &Map<String, Value>,
    model_type: &str,
    layers: &Layers,
    window: Option<u64>,
) -> u32 {
    match (&layers.kinds, window) {
        (Some(kinds), Some(_)) => kinds
            .iter()
            .filter(|k| k.as_str().is_some_and(|s| s.contains("sliding")))
            .count() as u32,
        // Mistral-style: one window for every layer.
        (None, Some(_))
            if model_type == "mistral"
                || get(m, &["use_sliding_window"]).and_then(Value::as_bool) == Some(true) =>
        {
            layers.attention
        }
        _ => 0,
    }
    .min(layers.attention)
}

impl ModelSpec {
    /// Reads a Hugging Face `config.json`. Understood: dense decoders (Llama, Mistral, Qwen,
    /// Gemma and the like), mixture-of-experts decoders (Mixtral, Qwen-MoE, DeepSeek with
    /// latent attention, GPT-OSS), per-layer `layer_types` with sliding windows, and NVIDIA's
    /// hybrid Mamba-Transformer (`nemotron_h`, from `hybrid_override_pattern`). Multimodal
    /// configs are read through their `text_config`. The weights' format comes from
    /// `quantization_config` or `torch_dtype`.
    pub fn from_hf_config(json: &str) -> Result<Self, Error> {
        let v: Value = serde_json::from_str(json).map_err(|source| Error::ConfigJson { source })?;
        let Some(outer) = v.as_object() else {
            return Err(Error::ConfigField {
                field: "config",
                reason: "the top level is not an object".into(),
            });
        };
        // Multimodal configs keep the language model's numbers in `text_config`, and may keep
        // the quantisation outside it.
        let m = outer
            .get("text_config")
            .and_then(Value::as_object)
            .filter(|t| t.contains_key("hidden_size"))
            .unwrap_or(outer);
        let model_type = text(m, &["model_type"])
            .or(text(outer, &["model_type"]))
            .unwrap_or("unknown")
            .to_owned();
        let name = text(outer, &["_name_or_path", "name_or_path"])
            .unwrap_or(&model_type)
            .to_owned();
        let hidden_size = need(m, "hidden_size", &["hidden_size", "d_model", "n_embd"])?;
        let vocab_size = need(m, "vocab_size", &["vocab_size", "padded_vocab_size"])?;
        let heads = small(
            need(
                m,
                "num_attention_heads",
                &["num_attention_heads", "n_head", "n_heads"],
            )?,
            "num_attention_heads",
        )?;
        let kv_heads = key_value_heads(m, heads)?;
        // Latent attention's query/key heads are the rotary and non-rotary parts together.
        let mla_head = uint(m, &["qk_nope_head_dim"])?
            .zip(uint(m, &["qk_rope_head_dim"])?)
            .map(|(a, b)| a.saturating_add(b));
        let head_dim = small(
            uint(m, &["head_dim", "attention_head_dim", "kv_channels"])?
                .or(mla_head)
                .unwrap_or(hidden_size / u64::from(heads)),
            "head_dim",
        )?;
        if head_dim == 0 {
            return Err(Error::ConfigField {
                field: "head_dim",
                reason: "is zero (or hidden_size is smaller than the head count)".into(),
            });
        }
        let tie_word_embeddings = get(m, &["tie_word_embeddings"])
            .or(get(outer, &["tie_word_embeddings"]))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let max_position_embeddings = uint(m, &["max_position_embeddings", "n_positions"])?;
        let layers = match text(m, &["hybrid_override_pattern"]) {
            Some(pattern) => hybrid_layers(m, pattern)?,
            None => uniform_layers(m)?,
        };
        let window = uint(m, &["sliding_window"])?
            .filter(|w| *w > 0)
            .map(|w| w.min(MAX_DIM));
        let sliding_layers = sliding_layer_count(m, &model_type, &layers, window);
        let spec = ModelSpec {
            name,
            model_type,
            hidden_size,
            vocab_size,
            tie_word_embeddings,
            max_position_embeddings,
            attention: AttentionSpec {
                heads,
                kv_heads,
                head_dim,
                full_layers: layers.attention - sliding_layers,
                sliding_layers,
                sliding_window: window.filter(|_| sliding_layers > 0),
                mla: mla_shape(m)?,
            },
            mlp: layers.mlp,
            moe: layers.moe,
            mamba: layers.mamba,
            weights: WeightFormat::from_config(outer, m)?,
        };
        spec.validate()?;
        Ok(spec)
    }
}
