//! The articles' models on the built-in catalog, and the prediction against the articles'
//! measured sweep (Nemotron-3 Nano 30B-A3B on one ml.g7e.2xlarge, ISL 1024 / OSL 256,
//! `gpu_memory_utilization` 0.85). `cargo run -p kneepoint-fit --example articles`; the
//! numbers are in docs/recommend.md.

use kneepoint_fit::{
    fit, predict, Catalog, Efficiency, FitSettings, ModelSpec, ARTICLES_MEASURED as MEASURED,
};

const NEMOTRON: &str = include_str!("../configs/nemotron-3-nano-30b-a3b.json");
const GPT_OSS: &str = include_str!("../configs/gpt-oss-20b.json");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let catalog = Catalog::builtin();
    let s = FitSettings {
        gpu_memory_utilization: 0.85,
        ..FitSettings::new(1024, 256)
    };
    for (name, cfg, instances) in [
        (
            "Nemotron-3 Nano 30B-A3B (bf16)",
            NEMOTRON,
            [
                "ml.g6e.xlarge",
                "ml.g6e.12xlarge",
                "ml.g7e.2xlarge",
                "ml.p5.48xlarge",
            ],
        ),
        (
            "GPT-OSS-20B (mxfp4 experts)",
            GPT_OSS,
            [
                "ml.g5.2xlarge",
                "ml.g6.12xlarge",
                "ml.g6e.xlarge",
                "ml.g7e.2xlarge",
            ],
        ),
    ] {
        let m = ModelSpec::from_hf_config(cfg)?;
        let p = m.params();
        println!(
            "\n{name}: {:.2} B parameters, {:.2} B active, {:.2} GiB of weights, {} B KV per token, {:.1} MiB of Mamba state per sequence",
            p.total() / 1e9,
            p.active() / 1e9,
            m.weight_bytes() / 1073741824.0,
            m.kv_bytes_per_token(1, 16.0),
            m.mamba_state_bytes(1) / 1048576.0
        );
        println!("| instance | TP | weights/GPU GiB | KV left/GPU GiB | KV tokens | seq MiB | KV bound | per instance | fits |");
        println!("|---|---|---|---|---|---|---|---|---|");
        for i in instances {
            let inst = catalog.get(i)?;
            for tp in kneepoint_fit::tensor_parallel_degrees(inst.gpu_count, &[]) {
                let f = fit(&m, inst, tp, &s);
                println!(
                    "| {} | {} | {:.1} | {:.1} | {} | {:.1} | {} | {} | {} |",
                    f.instance,
                    f.tensor_parallel,
                    f.weights_gib_per_gpu,
                    f.kv_cache_gib_per_gpu,
                    f.kv_cache_tokens,
                    f.sequence_mib,
                    f.kv_max_concurrency,
                    f.instance_max_concurrency,
                    f.reason.as_deref().unwrap_or("yes")
                );
            }
        }
    }
    let m = ModelSpec::from_hf_config(NEMOTRON)?;
    let g7e = catalog.get("ml.g7e.2xlarge")?;
    let f = fit(&m, g7e, 1, &s);
    let levels: Vec<u32> = MEASURED.iter().map(|(c, _)| *c).collect();
    let p = predict(&m, g7e, &f, &s, Efficiency::default(), &levels)?;
    println!(
        "\nprediction on ml.g7e.2xlarge (knee {:?}: {})",
        p.knee, p.knee_reason
    );
    println!("| concurrency | measured tok/s | predicted tok/s | error | predicted step ms | TTFT ms | e2e ms |");
    println!("|---|---|---|---|---|---|---|");
    let mut abs = 0.0;
    for (pt, (c, meas)) in p.points.iter().zip(MEASURED) {
        let err = pt.output_tokens_per_s / meas - 1.0;
        abs += err.abs();
        println!(
            "| {c} | {meas:.1} | {:.1} | {:+.1} % | {:.1} | {:.0} | {:.0} |",
            pt.output_tokens_per_s,
            err * 100.0,
            pt.step_ms,
            pt.ttft_ms,
            pt.e2e_ms
        );
    }
    println!(
        "mean absolute error {:.1} %; step model {:?}",
        abs / MEASURED.len() as f64 * 100.0,
        p.step
    );
    Ok(())
}
