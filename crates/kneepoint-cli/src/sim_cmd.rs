//! `kneepoint sim serve`.

use std::io::Write as _;
use std::net::SocketAddr;

use anyhow::Context;
use kneepoint_sim::{SimProfile, SimServer};

use crate::args::{SimArgs, SimCommand};

pub(crate) async fn run(args: SimArgs) -> anyhow::Result<()> {
    match args.command {
        SimCommand::Serve {
            port,
            profile,
            time_scale,
            ttft_ms,
            itl_ms,
            seed,
            sigv4_access_key_id,
            sigv4_secret_env,
            endpoint_name,
            fault_rate,
            faults,
            stall_ms,
            prompt_tokens,
            jitter,
            drift,
            data_parallel_size,
            engine,
        } => {
            if data_parallel_size == 0 || data_parallel_size > kneepoint_sim::MAX_DATA_PARALLEL {
                anyhow::bail!(
                    "--data-parallel-size must be from 1 to {}, not {data_parallel_size}",
                    kneepoint_sim::MAX_DATA_PARALLEL
                );
            }
            let sigv4 = match sigv4_access_key_id {
                Some(id) => {
                    let secret = std::env::var(&sigv4_secret_env).with_context(|| {
                        format!("--sigv4-access-key-id needs the secret in ${sigv4_secret_env}")
                    })?;
                    // Whatever the variable is called, its value is a secret.
                    kneepoint_core::secrets::register(&secret);
                    Some(kneepoint_sim::SigV4TestKey {
                        access_key_id: id,
                        secret_access_key: secret,
                    })
                }
                None => None,
            };
            let options = kneepoint_sim::SimOptions {
                sigv4,
                endpoint_name,
                data_parallel_size,
            };
            let checks = options.sigv4.is_some();
            let mut p = chosen_profile(&profile, &engine, data_parallel_size)?;
            if let Some(t) = time_scale {
                p.time_scale = t;
            }
            if ttft_ms.is_some() || itl_ms.is_some() {
                let base = p.fixed.unwrap_or(kneepoint_sim::FixedTiming {
                    ttft_ms: 50.0,
                    itl_ms: 10.0,
                });
                if p.instant {
                    anyhow::bail!("--ttft-ms and --itl-ms cannot be used with --profile instant");
                }
                p.fixed = Some(kneepoint_sim::FixedTiming {
                    ttft_ms: ttft_ms.unwrap_or(base.ttft_ms),
                    itl_ms: itl_ms.unwrap_or(base.itl_ms),
                });
            }
            if let Some(rate) = fault_rate {
                p.faults = Some(kneepoint_config::fault_plan(rate, &faults, stall_ms)?);
            }
            if let Some(s) = seed {
                p.seed = s;
            }
            if let Some(n) = engine.settings.max_num_seqs {
                p.max_num_seqs = n;
            }
            if let Some(j) = jitter {
                p.jitter = j;
            }
            if let Some(d) = drift {
                p.drift = d;
            }
            p.validate()?;
            let server = SimServer::start_with_options(
                p.clone(),
                SocketAddr::from(([127, 0, 0, 1], port)),
                if prompt_tokens == "builtin" {
                    kneepoint_sim::default_counter()
                } else {
                    std::sync::Arc::new(kneepoint_core::ApproxTokenCounter)
                },
                options,
            )
            .await
            .context("starting the simulator")?;
            announce(
                &p,
                &server.base_url(),
                engine.model_config.is_some(),
                checks,
            );
            if data_parallel_size > 1 {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(
                    out,
                    "data parallel: {data_parallel_size} engines behind this port, each request to the one with the fewest in flight"
                );
                let _ = out.flush();
            }
            tokio::signal::ctrl_c()
                .await
                .context("waiting for Ctrl-C")?;
            Ok(())
        }
    }
}

/// What the started simulator serves and where, on stdout (a closed stdout is ignored).
fn announce(p: &SimProfile, base_url: &str, engine_given: bool, checks: bool) {
    // A closed stdout (e.g. piped into `head`) must not stop the server.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "kneepoint-sim ({} profile, model {:?}, time scale {}) listening on {}",
        p.name, p.model, p.time_scale, base_url
    );
    if engine_given {
        let _ = writeln!(
            out,
            "engine: max_num_seqs {}, max_num_batched_tokens {}, KV cache {} tokens, context {} tokens",
            p.max_num_seqs, p.max_num_batched_tokens, p.kv_cache_tokens, p.max_model_len
        );
    }
    if let Some(f) = p.fixed {
        let _ = writeln!(
            out,
            "fixed latency: first token {} ms after arrival, then one every {} ms (× time scale)",
            f.ttft_ms, f.itl_ms
        );
    }
    let _ = writeln!(out, "OpenAI-compatible routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /version, GET /health, GET /truth (server-side timings, JSON lines), DELETE /truth");
    let _ = writeln!(
        out,
        "SageMaker routes: POST /endpoints/NAME/invocations, POST /endpoints/NAME/invocations-response-stream ({})",
        if checks { "SigV4 signatures checked" } else { "signatures not checked" }
    );
    let _ = out.flush();
    drop(out);
}

/// The profile `sim serve` serves: the predicted engine of `--model-config`, or the named
/// `--profile` (then the engine's settings other than --max-num-seqs are refused: they set a
/// predicted engine).
fn chosen_profile(
    profile: &str,
    engine: &crate::args::SimEngineArgs,
    data_parallel_size: usize,
) -> anyhow::Result<SimProfile> {
    Ok(match &engine.model_config {
        Some(_) if profile != "calibrated" => {
            anyhow::bail!("--profile {profile} and --model-config both say what to serve: give one")
        }
        Some(_) => engine_profile(engine, data_parallel_size)?,
        None => {
            let given = engine.settings.pairs();
            if let Some((key, _)) = given.iter().find(|(k, _)| *k != "max_num_seqs") {
                anyhow::bail!(
                    "--{} needs --model-config (and --instance): it sets the predicted engine",
                    key.replace('_', "-")
                );
            }
            SimProfile::by_name(profile)?
        }
    })
}

/// The predicted engine of `--model-config` on `--instance` with vLLM's settings: refused with
/// the fit's reason when that combination would not start.
fn engine_profile(
    engine: &crate::args::SimEngineArgs,
    data_parallel_size: usize,
) -> anyhow::Result<SimProfile> {
    if engine.instance.is_none() {
        anyhow::bail!(
            "--model-config needs --instance TYPE: the engine is predicted for one instance"
        );
    }
    let fit = kneepoint_config::FitArgs {
        model_config: engine.model_config.clone(),
        instance: engine.instance.clone(),
        engine: engine.settings.clone(),
        instance_catalog: engine.instance_catalog.clone(),
        ..Default::default()
    };
    // The fit asks how long a sequence is for its bound only; the served engine's cache is in
    // tokens whatever the requests' lengths.
    let inputs = kneepoint_config::FitInputs::resolve(&fit, None, None, 1024.0, 256.0)?
        .context("--model-config names no model")?;
    let mut profile = kneepoint_config::predicted_profile(&inputs)?;
    if data_parallel_size > 1 {
        // every engine a replica of the instance: tensor parallel × engines within its GPUs
        let instance = inputs.instance.as_deref().unwrap_or_default();
        let p = inputs.predict_on(instance, &[1])?;
        if data_parallel_size > p.replicas as usize {
            anyhow::bail!(
                "--data-parallel-size {data_parallel_size} at tensor parallel {} needs {} GPUs; {instance} has room for {} such engine(s)",
                p.tensor_parallel,
                data_parallel_size * p.tensor_parallel as usize,
                p.replicas
            );
        }
        profile.model = format!(
            "{} on {instance} (predicted; {data_parallel_size} engines at tensor parallel {})",
            inputs.model.name, p.tensor_parallel
        );
    }
    Ok(profile)
}
