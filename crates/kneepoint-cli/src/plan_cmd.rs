//! `kneepoint plan`: the stage-1 table (what fits where, the KV bound, the predicted knee and
//! cost) for a model's `config.json`, printed and optionally saved as JSON.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use kneepoint_config::{FitArgs, FitInputs};
use kneepoint_fit::Plan;

/// `kneepoint plan`.
#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    /// The model's Hugging Face `config.json` (same as --model-config).
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// Mean input tokens per request.
    #[arg(long, default_value_t = 1024.0)]
    pub isl: f64,
    /// Mean output tokens per request.
    #[arg(long, default_value_t = 256.0)]
    pub osl: f64,
    /// Instance types to compare, comma-separated (default: every one in the catalog).
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    pub instances: Vec<String>,
    /// Also write the table as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The model, the catalog and the engine's assumptions.
    #[command(flatten)]
    pub fit: FitArgs,
}

/// Builds the table `args` describe.
pub fn plan(args: &PlanArgs) -> anyhow::Result<Plan> {
    let mut fit = args.fit.clone();
    if let Some(m) = &args.model {
        fit.model_config = Some(m.clone());
    }
    let inputs = FitInputs::resolve(&fit, None, None, args.isl, args.osl)?
        .context("give the model's config.json with --model FILE")?;
    let mut instances = args.instances.clone();
    if instances.is_empty() {
        instances.extend(inputs.instance.clone());
    }
    Ok(kneepoint_fit::plan(
        &inputs.model,
        &inputs.catalog,
        &instances,
        &inputs.settings,
        inputs.efficiency,
    )?)
}

/// Runs `kneepoint plan`.
pub fn run(args: &PlanArgs) -> anyhow::Result<()> {
    let p = plan(args)?;
    print!("{}", table(&p));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&p)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// The table as text: one line per instance type and degree, the chosen degree starred.
pub fn table(p: &Plan) -> String {
    use std::fmt::Write as _;
    let s = &p.settings;
    let mut out = format!(
        "{}: {:.1} B parameters ({:.1} B active), {:.1} GiB of weights ({}), {:.0} KiB of KV per token{}\nISL {} + OSL {} tokens, gpu_memory_utilization {}, max_num_seqs {}, KV cache {}-bit\n\n",
        p.model,
        p.total_params_b,
        p.active_params_b,
        p.weights_gib,
        p.weight_format,
        p.kv_bytes_per_token / 1024.0,
        if p.mamba_state_mib > 0.0 {
            format!(", {:.1} MiB of Mamba state per sequence", p.mamba_state_mib)
        } else {
            String::new()
        },
        s.isl,
        s.osl,
        s.gpu_memory_utilization,
        s.max_num_seqs,
        s.kv_cache_bits
    );
    let _ = writeln!(
        out,
        "{:<22} {:>3} {:>4} {:>10} {:>9} {:>11} {:>8} {:>9} {:>8} {:>10} {:>9} {:>9}",
        "instance",
        "TP",
        "reps",
        "weights/GPU",
        "KV/GPU",
        "KV tokens",
        "KV bound",
        "max conc",
        "knee",
        "peak tok/s",
        format!("{}/hour", p.currency),
        format!("{}/M tok", p.currency)
    );
    for r in &p.rows {
        let f = &r.fit;
        let mark = if r.chosen { "*" } else { " " };
        if !f.fits {
            let _ = writeln!(
                out,
                "{:<22} {:>3} {:>4}  does not fit: {}",
                f.instance,
                f.tensor_parallel,
                f.replicas,
                f.reason.as_deref().unwrap_or("")
            );
            continue;
        }
        let pred = r.prediction.as_ref();
        let _ = writeln!(
            out,
            "{:<21}{mark} {:>3} {:>4} {:>8.1}Gi {:>7.1}Gi {:>11} {:>8} {:>9} {:>8} {:>10} {:>9} {:>9}",
            f.instance,
            f.tensor_parallel,
            f.replicas,
            f.weights_gib_per_gpu,
            f.kv_cache_gib_per_gpu,
            f.kv_cache_tokens,
            f.kv_max_concurrency,
            f.instance_max_concurrency,
            pred.and_then(|p| p.knee).map_or("-".into(), |k| k.to_string()),
            opt(pred.map(|p| p.peak_output_tokens_per_s), 0),
            opt(r.price_per_hour, 3),
            opt(r.predicted_cost_per_million_output_tokens, 3),
        );
    }
    let dated: Vec<String> = p
        .rows
        .iter()
        .filter(|r| r.chosen && r.price_per_hour.is_some())
        .map(|r| format!("{} {} {}", r.fit.instance, r.region, r.price_as_of))
        .collect();
    let mut unpriced: Vec<&str> = p
        .rows
        .iter()
        .filter(|r| r.fit.fits && r.price_per_hour.is_none())
        .map(|r| r.fit.instance.as_str())
        .collect();
    unpriced.dedup();
    if !unpriced.is_empty() {
        let _ = writeln!(
            out,
            "\n- under {}/hour: the instance catalog in use has no price for {} (an --instance-catalog FILE with one prices it)",
            p.currency,
            unpriced.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "\n* the degree to deploy (most sequences per instance). KV bound: sequences of ISL+OSL the cache holds per replica; max conc: per instance, at most max_num_seqs per replica.\nknee, peak tok/s and {}/M tok are a first-order prediction (bandwidth x{}, compute x{}, {} ms per step), not a measurement.{}",
        p.currency,
        p.efficiency.bandwidth,
        p.efficiency.compute,
        p.efficiency.step_overhead_ms,
        if dated.is_empty() {
            String::new()
        } else {
            format!(" Prices ({}): {}.", p.currency, dated.join("; "))
        }
    );
    out
}
