//! Stage-1 sizing settings: the model's `config.json`, the instance catalog and the engine
//! assumptions (`--model-config`, `--instance`, ... or `[model]`), resolved into the
//! `kneepoint-fit` inputs that `kneepoint plan`, `recommend` and `--sim-profile predicted` use.

use std::path::{Path, PathBuf};

use clap::Args;
use kneepoint_core::{read_capped_to_string, MAX_SETTINGS_BYTES};
use kneepoint_fit::{Catalog, Efficiency, Fit, FitSettings, ModelSpec, Prediction, WeightFormat};
use kneepoint_sim::{ExpertReads, SimProfile};
use merge::Merge;
use serde::Deserialize;

use crate::error::{bail, Context};
use crate::Result;

/// A model and where it runs, for stage-1 sizing: the flags and the file's `[model]` in one
/// struct (the file's `config` is `--model-config`; its paths are relative to the file).
#[derive(Debug, Clone, Default, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct FitArgs {
    /// The model's Hugging Face `config.json`, for `--sim-profile predicted` (`recommend` reads
    /// it from the config file's `[model]`).
    #[arg(long, value_name = "FILE")]
    #[serde(rename = "config")]
    pub model_config: Option<PathBuf>,
    /// The instance type the model would run on (a name in the instance catalog).
    #[arg(long, value_name = "TYPE")]
    pub instance: Option<String>,
    /// The engine's settings (one group with `sim serve`'s and the matrix keys).
    #[command(flatten)]
    #[serde(flatten)]
    #[merge(strategy = merge::Merge::merge)]
    pub engine: crate::EngineSettings,
    /// The weights' format, instead of what the config says (bf16, fp8, int4, nvfp4, mxfp4).
    #[arg(long, value_name = "FORMAT")]
    pub weights: Option<String>,
    /// GiB per GPU kept from the KV cache for activations and the runtime (default: an
    /// estimate from the model).
    #[arg(long, value_name = "GIB")]
    pub reserve_gib: Option<f64>,
    /// An instance catalog (TOML or JSON) that extends or overrides the built-in table.
    #[arg(long, value_name = "FILE")]
    pub instance_catalog: Option<PathBuf>,
    /// Prediction: fixed cost of one engine step, ms (default 2).
    #[arg(long, value_name = "MS")]
    pub step_overhead_ms: Option<f64>,
    /// Prediction: share of the memory bandwidth reached (default 0.8).
    #[arg(long, value_name = "SHARE")]
    pub bandwidth_efficiency: Option<f64>,
    /// Prediction: share of the dense BF16 peak reached (default 0.5).
    #[arg(long, value_name = "SHARE")]
    pub compute_efficiency: Option<f64>,
}

/// `[model]`: the same group as the flags ([`FitArgs`]), paths relative to the config file.
pub type ModelSection = FitArgs;

/// Everything stage-1 sizing needs, resolved and checked.
#[derive(Debug, Clone)]
pub struct FitInputs {
    /// The model.
    pub model: ModelSpec,
    /// The built-in catalog with the file's entries laid over it.
    pub catalog: Catalog,
    /// The engine assumptions, with the workload's mean ISL and OSL.
    pub settings: FitSettings,
    /// The prediction's efficiencies.
    pub efficiency: Efficiency,
    /// The instance type named (if any).
    pub instance: Option<String>,
}

/// The catalog: built-in, with `path`'s entries over it.
pub fn catalog(path: Option<&Path>) -> Result<Catalog> {
    let base = Catalog::builtin();
    match path {
        None => Ok(base),
        Some(p) => {
            let text = read_capped_to_string(p, MAX_SETTINGS_BYTES)
                .with_context(|| format!("reading instance catalog {}", p.display()))?;
            Ok(base.overlaid(
                Catalog::parse(&text)
                    .with_context(|| format!("in instance catalog {}", p.display()))?,
            ))
        }
    }
}

impl FitInputs {
    /// Resolves the flags over `[model]` (whose paths are relative to `base`, the config
    /// file's folder) for requests of `isl` / `osl` mean tokens; `None` when neither names a
    /// model config.
    pub fn resolve(
        args: &FitArgs,
        file: Option<&ModelSection>,
        base: Option<&Path>,
        isl: f64,
        osl: f64,
    ) -> Result<Option<Self>> {
        let mut f = file.cloned().unwrap_or_default();
        let from_file = |p: &mut Option<PathBuf>| {
            if let (Some(p), Some(b)) = (p.as_mut(), base) {
                *p = b.join(&*p);
            }
        };
        from_file(&mut f.model_config);
        from_file(&mut f.instance_catalog);
        let m = crate::flags_over(args, &f);
        let Some(path) = m.model_config.clone() else {
            return Ok(None);
        };
        let limit = kneepoint_fit::MAX_DIM as f64;
        if !(isl.is_finite() && (0.0..=limit).contains(&isl)) {
            bail!("the input length for sizing must be between 0 and {limit} tokens (got {isl})");
        }
        if !(osl.is_finite() && (1.0..=limit).contains(&osl)) {
            bail!("the output length for sizing must be between 1 and {limit} tokens (got {osl})");
        }
        let text = read_capped_to_string(&path, MAX_SETTINGS_BYTES).with_context(|| {
            format!(
                "reading the model config {} (a model's Hugging Face config.json; the repository ships examples in crates/kneepoint-fit/configs/, e.g. crates/kneepoint-fit/configs/gpt-oss-20b.json)",
                path.display()
            )
        })?;
        let mut model = ModelSpec::from_hf_config(&text)
            .with_context(|| format!("in the model config {}", path.display()))?;
        if let Some(w) = m.weights.as_ref() {
            model.weights = WeightFormat::parse(w)?;
        }
        let catalog = catalog(m.instance_catalog.as_deref())?;
        let mut s = FitSettings::new(isl.round() as u64, osl.round() as u64);
        s.reserve_gib = m.reserve_gib;
        m.engine.apply(&mut s)?;
        let mut e = Efficiency::default();
        if let Some(v) = m.step_overhead_ms {
            e.step_overhead_ms = v;
        }
        if let Some(v) = m.bandwidth_efficiency {
            e.bandwidth = v;
        }
        if let Some(v) = m.compute_efficiency {
            e.compute = v;
        }
        let instance = m.instance.clone();
        if let Some(i) = &instance {
            catalog.get(i)?;
        }
        Ok(Some(FitInputs {
            model,
            catalog,
            settings: s,
            efficiency: e,
            instance,
        }))
    }

    /// The fit to deploy on `instance` (at `tp`, or the degree that holds the most), or why
    /// none fits (each degree's reason).
    pub fn chosen_fit(
        &self,
        instance: &str,
        tp: Option<u32>,
        engine: &std::collections::BTreeMap<String, String>,
    ) -> Result<std::result::Result<(FitSettings, Fit), String>> {
        let mut settings = self.settings.clone();
        if let Some(tp) = tp {
            settings.tensor_parallel = vec![tp];
        }
        apply_engine_settings(&mut settings, engine)?;
        let inst = self.catalog.get(instance)?;
        let fits = kneepoint_fit::plan_fits(&self.model, &[inst], &settings)?;
        Ok(match kneepoint_fit::best_fit(&fits, instance) {
            Some(f) => Ok((settings, f)),
            None => Err(fits
                .iter()
                .map(|f| {
                    format!(
                        "tensor parallelism {}: {}",
                        f.tensor_parallel,
                        f.reason.clone().unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")),
        })
    }

    /// The first-order prediction on `instance` at its chosen degree, or why there is none.
    pub fn predict_on(&self, instance: &str, levels: &[u32]) -> Result<Prediction> {
        let (settings, fit) = match self.chosen_fit(instance, None, &Default::default())? {
            Ok(x) => x,
            Err(why) => bail!("{} does not fit on {instance}: {why}", self.model.name),
        };
        Ok(kneepoint_fit::predict(
            &self.model,
            self.catalog.get(instance)?,
            &fit,
            &settings,
            self.efficiency,
            levels,
        )?)
    }
}

/// The simulator profile of a prediction (`--sim-profile predicted`): one replica's step
/// costs, scheduler limit and KV cache, named after the model and instance.
pub fn predicted_profile(inputs: &FitInputs) -> Result<SimProfile> {
    let Some(instance) = inputs.instance.as_deref() else {
        bail!("--sim-profile predicted needs --instance (and --model-config)");
    };
    let p = inputs.predict_on(instance, &[1])?;
    let st = p.step;
    let mut profile = SimProfile::calibrated();
    profile.name = "predicted".into();
    profile.model = if p.replicas > 1 {
        format!(
            "{} on {instance} (predicted; one of its {} replicas)",
            inputs.model.name, p.replicas
        )
    } else {
        format!("{} on {instance} (predicted)", inputs.model.name)
    };
    profile.max_num_seqs = st.max_num_seqs;
    profile.max_num_batched_tokens = inputs.settings.max_num_batched_tokens;
    profile.kv_cache_tokens = st.kv_cache_tokens.max(1);
    let context = inputs
        .model
        .max_position_embeddings
        .unwrap_or(u64::from(u32::MAX))
        .min(st.kv_cache_tokens.max(1));
    profile.max_model_len = u32::try_from(context).unwrap_or(u32::MAX);
    profile.step_base_ms = st.base_ms.max(1e-3);
    profile.step_per_seq_ms = st.per_seq_ms;
    profile.step_per_context_token_us = st.per_context_token_us;
    profile.prefill_per_token_us = st.prefill_per_token_us;
    profile.experts = st.experts.map(|(experts, per_token)| ExpertReads {
        experts,
        per_token,
        read_all_ms: st.expert_read_ms,
    });
    Ok(profile)
}

/// A candidate's engine settings (its matrix and fixed values, by vLLM's names) applied to the
/// stage-1 fit: `max_num_seqs`, `max_num_batched_tokens`, `gpu_memory_utilization` and
/// `kv_cache_dtype` (an fp8 cache holds a token in half the bytes), so that a combination
/// that cannot start is known before it is launched. Other keys are not the fit's.
pub(crate) fn apply_engine_settings(
    settings: &mut FitSettings,
    engine: &std::collections::BTreeMap<String, String>,
) -> Result<()> {
    crate::EngineSettings::from_pairs(engine)?
        .apply(settings)
        .map_err(|e| crate::Error::Invalid(format!("for the fit: {e}")))
}

#[cfg(test)]
mod engine_settings_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Issue 49 part 3: a matrix's engine settings reach the stage-1 fit, so a combination that
    /// cannot start is known before its launch.

    #[test]
    fn model_keys_sit_beside_the_engine_group() {
        // and through `[model]`, whose own keys sit beside the group's
        let m: ModelSection =
            toml::from_str("config = \"m.json\"\ntensor_parallel = 4\nmax_num_seqs = 64").unwrap();
        assert_eq!(m.engine.tensor_parallel_size, Some(4));
        assert_eq!(m.engine.max_num_seqs, Some(64));
        assert!(m.model_config.is_some());
        let e = toml::from_str::<ModelSection>("config = \"m.json\"\nbogus = 1").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }
    #[test]
    fn a_combinations_engine_settings_are_fitted_before_launch() {
        let config =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../kneepoint-fit/configs/gpt-oss-20b.json");
        let args = FitArgs {
            model_config: Some(config),
            ..Default::default()
        };
        let fit = FitInputs::resolve(&args, None, None, 1024.0, 256.0)
            .unwrap()
            .unwrap();
        let at = |engine: &[(&str, &str)]| {
            fit.chosen_fit("ml.g6e.12xlarge", Some(1), &values(engine))
                .unwrap()
        };
        let (_, auto) = at(&[]).unwrap();
        let (s, fp8) = at(&[("kv_cache_dtype", "fp8")]).unwrap();
        assert_eq!(s.kv_cache_bits, 8.0);
        assert!(
            fp8.kv_cache_tokens > auto.kv_cache_tokens * 19 / 10,
            "{} vs {}",
            fp8.kv_cache_tokens,
            auto.kv_cache_tokens
        );
        let (_, few) = at(&[("max_num_seqs", "32")]).unwrap();
        assert!(few.kv_max_concurrency.min(32) == few.instance_max_concurrency.min(32));
        assert!(few.instance_max_concurrency <= 32 * few.replicas);
        let why = at(&[("gpu_memory_utilization", "0.1")]).unwrap_err();
        assert!(
            why.contains("does not fit") || why.contains("usable"),
            "{why}"
        );
        assert!(fit
            .chosen_fit(
                "ml.g6e.12xlarge",
                Some(1),
                &values(&[("max_num_seqs", "lots")])
            )
            .is_err());
    }
}

#[cfg(test)]
mod capped_read_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    /// The error and every source under it, as the CLI prints them.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        text
    }

    fn with_model(path: &Path) -> Result<Option<FitInputs>> {
        let args = FitArgs {
            model_config: Some(path.to_owned()),
            ..Default::default()
        };
        FitInputs::resolve(&args, None, None, 1024.0, 256.0)
    }

    /// Issue 57 item 11: a model config or an instance catalog one byte past 16 MiB (a valid
    /// document with a tail of zeros, sparse: no disk is spent) is refused with the cap named.
    #[test]
    fn settings_files_past_the_cap_are_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("config.json");
        std::fs::write(&big, "{}").unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&big)
            .unwrap()
            .set_len(MAX_SETTINGS_BYTES + 1)
            .unwrap();
        let e = chain(&with_model(&big).unwrap_err());
        assert!(e.contains("reading the model config"), "{e}");
        assert!(e.contains("config.json"), "{e}");
        assert!(e.contains("larger than 16 MiB, the most read"), "{e}");
        let e = chain(&catalog(Some(big.as_path())).unwrap_err());
        assert!(e.contains("reading instance catalog"), "{e}");
        assert!(e.contains("larger than 16 MiB, the most read"), "{e}");
    }

    /// Issue 57 item 11: `/dev/zero` as a model config or a catalog is refused at the cap,
    /// quickly, instead of growing without bound.
    #[cfg(unix)]
    #[test]
    fn dev_zero_as_a_model_config_or_catalog_is_refused_quickly() {
        let zero = Path::new("/dev/zero");
        let start = std::time::Instant::now();
        let e = chain(&with_model(zero).unwrap_err());
        assert!(e.contains("/dev/zero"), "{e}");
        assert!(e.contains("larger than 16 MiB, the most read"), "{e}");
        let e = chain(&catalog(Some(zero)).unwrap_err());
        assert!(e.contains("/dev/zero"), "{e}");
        assert!(e.contains("larger than 16 MiB, the most read"), "{e}");
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
    }

    /// Issue 57 item 18: a candidate's scheduler limit past what the engine's integer holds is
    /// refused as written, not saturated to 4294967295.
    #[test]
    fn engine_limits_past_their_integer_are_refused_as_written() {
        for (key, v) in [
            ("max_num_seqs", "1e30"),
            ("max_num_batched_tokens", "4294967296"),
            ("max_num_seqs", "2.5"),
        ] {
            let mut s = FitSettings::new(1024, 256);
            let engine = std::collections::BTreeMap::from([(key.to_owned(), v.to_owned())]);
            let e = apply_engine_settings(&mut s, &engine)
                .unwrap_err()
                .to_string();
            assert!(e.contains(key) && e.contains(v), "{e}");
        }
        let mut s = FitSettings::new(1024, 256);
        let engine =
            std::collections::BTreeMap::from([("max_num_seqs".to_owned(), "64".to_owned())]);
        apply_engine_settings(&mut s, &engine).unwrap();
        assert_eq!(s.max_num_seqs, 64);
    }
}
