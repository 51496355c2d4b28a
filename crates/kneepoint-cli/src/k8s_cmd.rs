//! `kneepoint k8s job --shards N -- <sweep args>`: parses the flags, checks that the sweep's
//! own flags resolve as shard 0's would, and prints the Indexed Job that
//! `kneepoint_deploy::indexed_job` builds (JSON, which `kubectl apply -f` reads). See
//! docs/scale-out.md.

use anyhow::{bail, Context};
use k8s_openapi::api::batch::v1::Job;
use kneepoint_deploy::ShardedJob;

use crate::args::K8sJobArgs;

/// The library's description of the Job `args` give, starting at `start_at` (Unix seconds).
fn sharded(args: &K8sJobArgs, start_at: u64) -> ShardedJob {
    let mut job = ShardedJob::new(&args.name, args.shards, args.sweep.clone());
    job.namespace = args.namespace.clone();
    job.image = args.image.clone();
    job.pvc = args.pvc.clone();
    job.output_s3 = args.output_s3.clone();
    job.api_key_secret = args.api_key_secret.clone();
    job.cpu = args.cpu.clone();
    job.memory = args.memory.clone();
    job.start_at = start_at;
    job
}

/// Refuses sweep flags that do not parse or resolve as shard 0's would (a typo, or a level
/// too small to share out, fails here, not in N pods).
fn check_resolves(args: &K8sJobArgs) -> anyhow::Result<()> {
    let sweep = kneepoint_deploy::sweep_flags(&args.sweep, args.api_key_secret.is_some())?;
    let mut probe = vec!["kneepoint".to_owned(), "sweep".to_owned()];
    probe.extend(sweep);
    probe.extend([
        "--shard".into(),
        format!("0/{}", args.shards.max(1)),
        "--quiet".into(),
    ]);
    let parsed = <crate::Cli as clap::Parser>::try_parse_from(&probe)
        .context("the sweep's flags (after --) do not parse")?;
    if let crate::Command::Sweep(a) = parsed.command {
        if let Err(e) = kneepoint_config::SweepSettings::resolve(&a) {
            // Files only the pods have (a config, a dataset, a tokenizer) cannot be read here.
            let text = format!("{e:#}");
            if !text.contains("reading") {
                bail!("the sweep's flags do not make a sharded sweep: {text}");
            }
        }
    }
    Ok(())
}

/// The Indexed Job `args` describe, started at `start_at` (Unix seconds).
pub fn indexed_job(args: &K8sJobArgs, start_at: u64) -> anyhow::Result<Job> {
    let job = sharded(args, start_at);
    // the library's checks first: a secret or a flag the Job sets is named before parsing
    kneepoint_deploy::indexed_job(&job)?;
    check_resolves(args)?;
    if let Some(s3) = &args.output_s3 {
        kneepoint_transport::s3::S3Location::parse(s3)?;
    }
    Ok(kneepoint_deploy::indexed_job(&job)?)
}

/// Runs `kneepoint k8s job`: prints the manifest.
pub fn run(args: &K8sJobArgs) -> anyhow::Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let start = match &args.start_at {
        Some(t) => kneepoint_config::parse_start_at(t)? / 1_000_000_000,
        None => now + args.start_in_s,
    };
    let job = indexed_job(args, start)?;
    let text = serde_json::to_string_pretty(&job)?;
    // Refused above; scrubbed all the same.
    println!("{}", kneepoint_core::secrets::scrub(&text));
    Ok(())
}
