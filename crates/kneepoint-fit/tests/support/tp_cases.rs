//! Predicted tensor-parallel speed-ups against published measurements (issue 58), shared by
//! the test `tests/tp_scaling.rs` and the example `examples/tp_scaling.rs`: one engine at TP
//! 1, 2 and 4, its output tokens/s at saturation, as NVIDIA's TensorRT-LLM performance
//! overview measured throughput (every request queued at once, ISL 1000 / OSL 1000).
//!
//! Sources: TensorRT-LLM v1.0 performance overview (Qwen3-30B-A3B NVFP4 on RTX PRO 6000
//! Blackwell Server, PCIe Gen5) and v0.19 (Llama-3.1-70B FP8 on H200, NVLink 4); see
//! docs/recommend.md.

use kneepoint_fit::{fit, predict, Catalog, Efficiency, FitSettings, InstanceType, ModelSpec};

const QWEN: &str = include_str!("../../configs/qwen3-30b-a3b-nvfp4.json");
const LLAMA: &str = include_str!("../../configs/llama-3.1-70b-fp8.json");

/// (label, config, instance, published tok/s at TP 1, 2, 4).
pub const CASES: [(&str, &str, &str, [f64; 3]); 2] = [
    (
        "Qwen3-30B-A3B NVFP4, RTX PRO 6000 (PCIe Gen5)",
        QWEN,
        "ml.g7e.24xlarge",
        [9_910.0, 16_431.0, 24_046.0],
    ),
    (
        "Llama-3.1-70B FP8, H200 (NVLink 4)",
        LLAMA,
        "ml.p5e.48xlarge",
        [2_727.42, 5_097.36, 8_698.15],
    ),
];

/// One row: (case, TP, predicted tok/s, predicted speed-up, published speed-up, speed-up the
/// roofline gives without all-reduces).
pub type Row = (&'static str, u32, f64, f64, f64, f64);

/// Every case at TP 1, 2 and 4.
pub fn rows() -> Result<Vec<Row>, kneepoint_fit::Error> {
    let catalog = Catalog::builtin();
    let s = FitSettings {
        max_num_seqs: 2048,
        max_num_batched_tokens: 8192,
        ..FitSettings::new(1000, 1000)
    };
    let mut out = Vec::new();
    for (label, cfg, instance, published) in CASES {
        let m = ModelSpec::from_hf_config(cfg)?;
        let inst = catalog.get(instance)?;
        // the same instance with all-reduces that cost nothing, as the roofline was before
        let mut free = inst.clone();
        free.interconnect = Some(kneepoint_fit::Interconnect {
            kind: "nvlink".into(),
            generation: 0,
            allreduce_gb_s: 1e12,
            hop_latency_us: 0.0,
        });
        let (mut base, mut free_base) = (None, None);
        for (i, tp) in [1u32, 2, 4].into_iter().enumerate() {
            // TensorRT-LLM, which measured these, gives the KV cache 90 % of the memory the
            // weights leave (`free_gpu_memory_fraction`), where vLLM takes a share of the
            // whole: the same rule here, as a share of the whole at each degree.
            let weights = fit(&m, inst, tp, &s).weights_gib_per_gpu;
            let total = inst.gpu_memory_gib;
            let s = FitSettings {
                gpu_memory_utilization: ((weights + 0.9 * (total - weights)) / total).min(1.0),
                ..s.clone()
            };
            let f = fit(&m, inst, tp, &s);
            // one engine: the instance's peak over its replicas
            let one = |inst: &InstanceType| -> Result<f64, kneepoint_fit::Error> {
                let p = predict(&m, inst, &f, &s, Efficiency::default(), &[1])?;
                Ok(p.peak_output_tokens_per_s / f64::from(p.replicas.max(1)))
            };
            let (paid, unpaid) = (one(inst)?, one(&free)?);
            out.push((
                label,
                tp,
                paid,
                paid / *base.get_or_insert(paid),
                published[i] / published[0],
                unpaid / *free_base.get_or_insert(unpaid),
            ));
        }
    }
    Ok(out)
}
