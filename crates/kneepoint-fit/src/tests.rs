//! Hand-computed expectations for a dense and a mixture-of-experts model on two instance
//! types, and the articles' models against their published figures.

use crate::*;

const LLAMA_8B: &str = r#"{"model_type":"llama","hidden_size":4096,"num_hidden_layers":32,
  "num_attention_heads":32,"num_key_value_heads":8,"intermediate_size":14336,
  "vocab_size":128256,"hidden_act":"silu","torch_dtype":"bfloat16","max_position_embeddings":131072}"#;
const MIXTRAL: &str = r#"{"model_type":"mixtral","hidden_size":4096,"num_hidden_layers":32,
  "num_attention_heads":32,"num_key_value_heads":8,"intermediate_size":14336,
  "num_local_experts":8,"num_experts_per_tok":2,"vocab_size":32000,"hidden_act":"silu"}"#;
pub(crate) const NEMOTRON: &str = include_str!("../configs/nemotron-3-nano-30b-a3b.json");
pub(crate) const GPT_OSS: &str = include_str!("../configs/gpt-oss-20b.json");
const GIB: f64 = 1073741824.0;

fn settings() -> FitSettings {
    FitSettings {
        reserve_gib: Some(2.0),
        ..FitSettings::new(1024, 256)
    }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

#[test]
fn dense_model_by_hand() {
    let m = ModelSpec::from_hf_config(LLAMA_8B).unwrap();
    // Embeddings 2 × 128256 × 4096; per layer attention 2·4096² + 2·4096·1024 and a gated
    // MLP 3·4096·14336, 32 layers.
    let p = m.params();
    assert_eq!(p.embedding, 1_050_673_152.0);
    assert_eq!(p.linear, 32.0 * (41_943_040.0 + 176_160_768.0));
    assert_eq!(p.total(), 8_029_995_008.0);
    assert_eq!(p.active(), p.total());
    assert_eq!(m.weight_bytes(), 16_059_990_016.0);
    // 2 (K and V) × 32 layers × 8 heads × 128 × 2 bytes.
    assert_eq!(m.kv_bytes_per_token(1, 16.0), 131_072.0);

    let c = Catalog::builtin();
    let g5 = c.get("ml.g5.2xlarge").unwrap();
    let f = fit(&m, g5, 1, &settings());
    // 22.5 GiB × 0.9 − 14.957 GiB of weights − 2 GiB = 3.293 GiB = 26,976 tokens;
    // one 1,280-token sequence takes 160 MiB: 21 of them.
    assert!(f.fits, "{:?}", f.reason);
    assert!(close(f.weights_gib_per_gpu, 14.95703125, 1e-9));
    assert!(close(f.kv_cache_gib_per_gpu, 3.29296875, 1e-9));
    assert_eq!(f.kv_cache_tokens, 26_976);
    assert!(close(f.sequence_mib, 160.0, 1e-12));
    assert_eq!(f.kv_max_concurrency, 21);
    assert_eq!(f.max_concurrency, 21);

    // Four L40S at tensor parallelism 4: 2 KV heads per GPU, a quarter of the weights.
    let g6e = c.get("ml.g6e.12xlarge").unwrap();
    let f4 = fit(&m, g6e, 4, &settings());
    assert!(close(f4.weights_gib_per_gpu, 3.7392578125, 1e-9));
    assert_eq!(f4.kv_bytes_per_token, 32_768.0);
    assert_eq!(f4.kv_cache_tokens, 1_139_040);
    assert_eq!(f4.kv_max_concurrency, 889);
    // The scheduler's 256 is the lower bound there.
    assert_eq!(f4.max_concurrency, 256);
    assert_eq!((f4.replicas, f4.instance_max_concurrency), (1, 256));
    // One copy per GPU: 40.5 − 14.96 − 2 = 23.54 GiB each, 150 sequences, 600 per instance
    // (tensor parallelism 2: 2 × the scheduler's 256).
    let fits = plan_fits(&m, &[g6e], &settings()).unwrap();
    assert_eq!(
        fits.iter().map(|f| f.tensor_parallel).collect::<Vec<_>>(),
        [1, 2, 4]
    );
    let best = best_fit(&fits, "ml.g6e.12xlarge").unwrap();
    assert_eq!(
        (best.tensor_parallel, best.instance_max_concurrency),
        (1, 600)
    );
}

#[test]
fn mixture_of_experts_by_hand() {
    let m = ModelSpec::from_hf_config(MIXTRAL).unwrap();
    let p = m.params();
    // 8 experts × 3 × 4096 × 14336 × 32 layers; 2 of them active; routers 4096 × 8 × 32.
    assert_eq!(p.experts, 45_097_156_608.0);
    assert_eq!(p.active_experts, 11_274_289_152.0);
    assert_eq!(p.total(), 46_702_526_464.0);
    assert_eq!(p.active(), 12_879_659_008.0);
    let c = Catalog::builtin();
    // 86.99 GiB of weights cannot fit one 45 GiB L40S.
    let one = fit(&m, c.get("ml.g6e.xlarge").unwrap(), 1, &settings());
    assert!(!one.fits);
    let why = one.reason.unwrap();
    assert!(why.contains("87.0 GiB per GPU"), "{why}");
    // Four of them at tensor parallelism 4: 21.75 GiB each, 16.75 GiB left, 548,944 tokens.
    let g6e = c.get("ml.g6e.12xlarge").unwrap();
    let fits = plan_fits(&m, &[g6e], &settings()).unwrap();
    assert!(!fits[0].fits && !fits[1].fits && fits[2].fits);
    assert!(fits[1].reason.as_deref().unwrap_or("").contains("43.5 GiB"));
    assert_eq!(fits[2].kv_cache_tokens, 548_944);
    assert_eq!(fits[2].kv_max_concurrency, 428);
    // A batch of one reads 2 of 8 experts per layer; a large batch reads all of them.
    let one_seq = m.weight_bytes_read(1.0);
    let many = m.weight_bytes_read(1000.0);
    let experts_bytes = p.experts * 2.0;
    assert!(close(many - one_seq, experts_bytes * 0.75, 1e-6));
}

#[test]
fn the_articles_models_against_their_published_figures() {
    // Nemotron-3 Nano: "31.6B parameters ... 3.2B activated (3.6B including embeddings)".
    let n = ModelSpec::from_hf_config(NEMOTRON).unwrap();
    let p = n.params();
    assert!(close(p.total(), 31.6e9, 0.01), "{}", p.total());
    assert!(close(p.active(), 3.6e9, 0.02), "{}", p.active());
    assert_eq!(n.attention.full_layers, 6);
    assert_eq!(n.mamba.map(|m| m.layers), Some(23));
    // 2 × 6 layers × 2 KV heads × 128 × 2 bytes = 6 KiB per token; the Mamba state is 23 ×
    // (3 × 6144 × 2 + 64·64·128 × 4) bytes per sequence, whatever its length.
    assert_eq!(n.kv_bytes_per_token(1, 16.0), 6144.0);
    assert_eq!(n.mamba_state_bytes(1), 23.0 * (36_864.0 + 2_097_152.0));
    // GPT-OSS-20B: "21B parameters with 3.6B active"; ~12.8 GiB of MXFP4 experts + bf16.
    let g = ModelSpec::from_hf_config(GPT_OSS).unwrap();
    let p = g.params();
    assert!(close(p.total(), 20.9e9, 0.01), "{}", p.total());
    // The card counts the output projection but not the input embedding (a lookup).
    assert!(
        close(p.active() - p.embedding / 2.0, 3.61e9, 0.01),
        "{}",
        p.active()
    );
    assert_eq!(
        (g.attention.full_layers, g.attention.sliding_layers),
        (12, 12)
    );
    assert!(
        close(g.weight_bytes() / GIB, 12.8, 0.02),
        "{}",
        g.weight_bytes() / GIB
    );
    // Sliding layers hold at most window + one block.
    let long = g.sequence_bytes(100_000, 1, 16.0);
    let per_layer = 2048.0;
    assert_eq!(
        long,
        12.0 * per_layer * 100_000.0 + 12.0 * per_layer * 144.0
    );
}

#[test]
fn the_articles_deployment_fits_and_predicts_the_knee() {
    let n = ModelSpec::from_hf_config(NEMOTRON).unwrap();
    let c = Catalog::builtin();
    let g7e = c.get("ml.g7e.2xlarge").unwrap();
    let s = FitSettings {
        gpu_memory_utilization: 0.85,
        ..FitSettings::new(1024, 256)
    };
    let f = fit(&n, g7e, 1, &s);
    assert!(f.fits, "{:?}", f.reason);
    assert!(f.kv_max_concurrency > 256, "{}", f.kv_max_concurrency);
    let levels = [16, 32, 64, 128, 256, 512, 1024];
    let p = predict(&n, g7e, &f, &s, Efficiency::default(), &levels).unwrap();
    assert_eq!(p.knee, Some(256), "{}", p.knee_reason);
    // The articles' measured output tokens/s; the error is stated in docs/recommend.md.
    for (pt, (c, m)) in p.points.iter().zip(ARTICLES_MEASURED) {
        assert_eq!(pt.concurrency, c);
        assert!(close(pt.output_tokens_per_s, m, 0.35), "{pt:?} vs {m}");
    }
}

#[test]
fn careless_configs_are_errors_not_panics() {
    for bad in [
        "",
        "[]",
        "{}",
        r#"{"hidden_size":0,"vocab_size":1,"num_attention_heads":1,"num_hidden_layers":1}"#,
        r#"{"hidden_size":64,"vocab_size":10,"num_attention_heads":4,"num_hidden_layers":2}"#,
        r#"{"hybrid_override_pattern":"M*","hidden_size":64,"vocab_size":10,"num_attention_heads":4}"#,
        r#"{"hidden_size":1e300,"vocab_size":10,"num_attention_heads":4,"num_hidden_layers":2}"#,
        // more experts per token than experts
        r#"{"hidden_size":64,"vocab_size":10,"num_attention_heads":4,"num_hidden_layers":2,
            "intermediate_size":8,"num_local_experts":4,"num_experts_per_tok":8}"#,
        // a head size of zero, given or implied
        r#"{"hidden_size":64,"vocab_size":10,"num_attention_heads":4,"num_hidden_layers":2,
            "intermediate_size":8,"head_dim":0}"#,
        r#"{"hidden_size":2,"vocab_size":10,"num_attention_heads":4,"num_hidden_layers":2,
            "intermediate_size":8}"#,
        // dimensions beyond any model
        r#"{"hidden_size":64,"vocab_size":10,"num_attention_heads":4,"num_hidden_layers":2,
            "intermediate_size":8,"num_key_value_heads":4294967295}"#,
        r#"{"hidden_size":64,"vocab_size":10,"num_attention_heads":4,"num_hidden_layers":2,
            "intermediate_size":8,"kv_lora_rank":4294967295,"qk_rope_head_dim":4294967295,
            "qk_nope_head_dim":1,"v_head_dim":1}"#,
        // hybrid patterns naming layers the config does not describe
        r#"{"hybrid_override_pattern":"*E","hidden_size":64,"vocab_size":10,"num_attention_heads":4}"#,
        r#"{"hybrid_override_pattern":"*-","hidden_size":64,"vocab_size":10,"num_attention_heads":4}"#,
        r#"{"hybrid_override_pattern":"*X","hidden_size":64,"vocab_size":10,"num_attention_heads":4}"#,
    ] {
        assert!(ModelSpec::from_hf_config(bad).is_err(), "{bad}");
    }
    let s = FitSettings {
        gpu_memory_utilization: 1.5,
        ..FitSettings::new(1, 1)
    };
    let m = ModelSpec::from_hf_config(LLAMA_8B).unwrap();
    assert!(plan_fits(&m, &[], &s).is_err());
    // A spec built by hand with no KV heads is a reason on the fit and an error elsewhere.
    let mut broken = m.clone();
    broken.attention.kv_heads = 0;
    let g5 = Catalog::builtin();
    let f = fit(
        &broken,
        g5.get("ml.g5.xlarge").unwrap(),
        1,
        &FitSettings::new(1, 1),
    );
    assert!(!f.fits && f.reason.unwrap().contains("heads"));
    assert!(plan_fits(&broken, &[], &FitSettings::new(1, 1)).is_err());
    // Lengths out of range are refused before any arithmetic.
    let huge = FitSettings::new(u64::MAX, u64::MAX);
    assert!(plan_fits(&m, &[], &huge).is_err());
    let ok = fit(
        &m,
        g5.get("ml.g5.xlarge").unwrap(),
        1,
        &FitSettings::new(16, 16),
    );
    let zero_osl = FitSettings::new(16, 0);
    let inst = g5.get("ml.g5.xlarge").unwrap();
    assert!(predict(&m, inst, &ok, &zero_osl, Efficiency::default(), &[1]).is_err());
    // Tensor parallelism that does not divide the heads is a reason, not a crash.
    let g = Catalog::builtin();
    let f = fit(
        &m,
        g.get("ml.p5.48xlarge").unwrap(),
        3,
        &FitSettings::new(1, 1),
    );
    assert!(!f.fits && f.reason.unwrap().contains("divide"));
}

#[test]
fn the_table_marks_one_degree_per_instance_and_prices_it() {
    let m = ModelSpec::from_hf_config(NEMOTRON).unwrap();
    let c = Catalog::builtin();
    let names = ["ml.g6e.xlarge", "ml.g6e.12xlarge", "ml.p5.48xlarge"].map(String::from);
    let p = plan(
        &m,
        &c,
        &names,
        &FitSettings::new(1024, 256),
        Efficiency::default(),
    )
    .unwrap();
    assert!(p.chosen("ml.g6e.xlarge").is_none());
    let g6e = p.chosen("ml.g6e.12xlarge").unwrap();
    assert!(g6e.fit.fits && g6e.prediction.is_some());
    let cost = g6e.predicted_cost_per_million_output_tokens.unwrap();
    let peak = g6e.prediction.as_ref().unwrap().peak_output_tokens_per_s;
    assert!(close(cost, 13.12 / (3600.0 * peak) * 1e6, 1e-9));
    assert_eq!(
        p.rows.iter().filter(|r| r.chosen).count(),
        2,
        "one chosen row per instance type that fits"
    );
    assert!(plan(
        &m,
        &c,
        &["ml.none".into()],
        &FitSettings::new(1, 1),
        Efficiency::default()
    )
    .is_err());
    assert_eq!(prediction_levels(3), [1, 2, 4, 8]);
}

/// Issue 57 item 18: no KV heads, more KV heads than attention heads, no experts, and counts
/// past what an integer holds are refused, each naming the field and the value as written
/// (`1e30` layers was read as 18446744073709551615).
#[test]
fn impossible_head_and_expert_counts_are_refused_naming_the_field() {
    let model = |extra: &str| {
        format!(
            r#"{{"hidden_size":64,"vocab_size":10,"num_attention_heads":4,"intermediate_size":8,
                {extra}}}"#
        )
    };
    let refused = |extra: &str, says: &[&str]| {
        let e = ModelSpec::from_hf_config(&model(extra))
            .unwrap_err()
            .to_string();
        for s in says {
            assert!(e.contains(s), "{extra}: wanted {s:?} in {e}");
        }
        assert!(!e.contains("18446744073709551615"), "{extra}: {e}");
    };
    let layers = r#""num_hidden_layers":2"#;
    refused(
        &format!(r#"{layers},"num_key_value_heads":0"#),
        &["`num_key_value_heads`", "is 0"],
    );
    refused(
        &format!(r#"{layers},"num_kv_heads":0"#),
        &["`num_kv_heads`", "is 0"],
    );
    refused(
        &format!(r#"{layers},"num_key_value_heads":8"#),
        &[
            "`num_key_value_heads`",
            "8 key/value heads",
            "4 attention heads",
        ],
    );
    refused(
        &format!(r#"{layers},"num_key_value_heads":-2"#),
        &["`num_key_value_heads`", "-2 is negative"],
    );
    refused(
        &format!(r#"{layers},"num_local_experts":0,"num_experts_per_tok":1"#),
        &["`num_local_experts`", "is 0"],
    );
    refused(
        &format!(r#"{layers},"num_experts":0"#),
        &["`num_experts`", "is 0"],
    );
    refused(
        r#""num_hidden_layers":1e30"#,
        &["`num_hidden_layers`", "1e30", "too large"],
    );
    refused(
        &format!(r#"{layers},"head_dim":2.5"#),
        &["`head_dim`", "2.5 is not a whole number"],
    );
    refused(
        &format!(r#"{layers},"max_position_embeddings":1e30"#),
        &["`max_position_embeddings`", "1e30"],
    );
    // What real configs say still reads: KV heads left out (one per head), as many as the
    // heads, fewer; one expert (a dense model); a whole count written as a float.
    let read = |extra: &str| ModelSpec::from_hf_config(&model(extra)).unwrap();
    assert_eq!(read(layers).attention.kv_heads, 4);
    let same = format!(r#"{layers},"num_key_value_heads":4"#);
    assert_eq!(read(&same).attention.kv_heads, 4);
    let grouped = format!(r#"{layers},"num_key_value_heads":1"#);
    assert_eq!(read(&grouped).attention.kv_heads, 1);
    assert!(read(&format!(r#"{layers},"num_experts":1"#)).moe.is_none());
    let float = read(r#""num_hidden_layers":2.0"#);
    assert_eq!(float.attention.full_layers, 2);
    // A spec built by hand is held to the same rule.
    let mut m = read(layers);
    m.attention.kv_heads = 5;
    assert!(m.validate().is_err());
}

/// Issue 57 item 20a: a zero token budget is refused naming `max_num_batched_tokens`, not
/// `max_num_seqs`.
#[test]
fn a_zero_token_budget_is_refused_naming_its_own_setting() {
    let s = FitSettings {
        max_num_batched_tokens: 0,
        ..FitSettings::new(1024, 256)
    };
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("max_num_batched_tokens"), "{e}");
    assert!(!e.contains("max_num_seqs"), "{e}");
    let s = FitSettings {
        max_num_seqs: 0,
        ..FitSettings::new(1024, 256)
    };
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("max_num_seqs"), "{e}");
}
