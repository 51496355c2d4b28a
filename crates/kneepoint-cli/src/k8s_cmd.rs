//! `kneepoint k8s job --shards N -- <sweep args>`: a Kubernetes Indexed Job that runs one
//! sweep as N shards, built from `k8s-openapi`'s typed structs and printed as JSON (which
//! `kubectl apply -f` reads). Each pod's completion index becomes its `--shard K/N`; every pod
//! starts its first level at one shared `--start-at`; results go to a volume claim or an S3
//! prefix, one folder per shard, for `kneepoint merge`. See docs/scale-out.md.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use clap::Args;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector,
    PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, ResourceRequirements, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The annotation the Job controller sets to each pod's completion index.
const INDEX_ANNOTATION: &str = "metadata.annotations['batch.kubernetes.io/job-completion-index']";

/// `kneepoint k8s job`.
#[derive(Debug, Clone, Args)]
pub struct K8sJobArgs {
    /// Shards (pods), each running its share of every level.
    #[arg(long)]
    pub shards: u32,
    /// The Job's name.
    #[arg(long, default_value = "kneepoint-sweep")]
    pub name: String,
    /// Its namespace (default: kubectl's).
    #[arg(long)]
    pub namespace: Option<String>,
    /// The container image with the kneepoint binary on its PATH.
    #[arg(long, default_value = "kneepoint:latest")]
    pub image: String,
    /// A PersistentVolumeClaim (ReadWriteMany) for the results: shard K writes
    /// /results/<name>/shard-K. Without it (and without --output-s3) results stay in the pods.
    #[arg(long, value_name = "CLAIM")]
    pub pvc: Option<String>,
    /// Upload each shard's archive to s3://bucket/prefix/<name>/shard-K (credentials from the
    /// pod's AWS chain: IRSA or EKS Pod Identity).
    #[arg(long, value_name = "S3_URL")]
    pub output_s3: Option<String>,
    /// The shared start: a UTC time (2026-12-01T19:30:00Z) or Unix seconds. Default: the time
    /// the manifest is printed plus --start-in-s.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Seconds from now to the shared start when --start-at is not given (time to schedule
    /// the pods and pull the image).
    #[arg(long, default_value_t = 180)]
    pub start_in_s: u64,
    /// CPU per pod (a request and a limit, e.g. 2).
    #[arg(long, default_value = "2")]
    pub cpu: String,
    /// Memory per pod (e.g. 4Gi).
    #[arg(long, default_value = "4Gi")]
    pub memory: String,
    /// The sweep's own flags, after `--` (not --shard, --start-at or --artifact-dir, which the
    /// Job sets).
    #[arg(last = true, required = true)]
    pub sweep: Vec<String>,
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

/// The Indexed Job `args` describe, started at `start_at` (Unix seconds).
pub fn indexed_job(args: &K8sJobArgs, start_at: u64) -> anyhow::Result<Job> {
    if args.shards == 0 || args.shards > 10_000 {
        bail!("--shards must be between 1 and 10,000");
    }
    for f in &args.sweep {
        let name = f.split('=').next().unwrap_or(f);
        if matches!(
            name,
            "--shard" | "--start-at" | "--artifact-dir" | "--output-s3"
        ) {
            bail!("{name} is set by the Job itself: leave it out of the sweep's flags");
        }
    }
    // The sweep's flags must parse (a typo fails here, not in N pods).
    let mut probe = vec!["kneepoint".to_owned(), "sweep".to_owned()];
    probe.extend(args.sweep.iter().cloned());
    probe.extend(["--shard".into(), format!("0/{}", args.shards)]);
    <crate::Cli as clap::Parser>::try_parse_from(&probe)
        .context("the sweep's flags (after --) do not parse")?;
    let n = args.shards;
    let dir = format!("/results/{}/shard-$(SHARD_INDEX)", args.name);
    let mut command = vec!["sweep".to_owned()];
    command.extend(args.sweep.iter().cloned());
    command.extend([
        "--shard".into(),
        format!("$(SHARD_INDEX)/{n}"),
        "--start-at".into(),
        start_at.to_string(),
        "--artifact-dir".into(),
        dir,
        "--quiet".into(),
    ]);
    if let Some(s3) = &args.output_s3 {
        kneepoint_transport::s3::S3Location::parse(s3)?;
        command.extend([
            "--output-s3".into(),
            format!(
                "{}/{}/shard-$(SHARD_INDEX)",
                s3.trim_end_matches('/'),
                args.name
            ),
        ]);
    }
    let volume = match &args.pvc {
        Some(claim) => Volume {
            name: "results".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: Some(false),
            }),
            ..Default::default()
        },
        None => Volume {
            name: "results".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
    };
    let resources: BTreeMap<String, Quantity> = [
        ("cpu".to_owned(), Quantity(args.cpu.clone())),
        ("memory".to_owned(), Quantity(args.memory.clone())),
    ]
    .into();
    let labels: BTreeMap<String, String> = [
        ("app.kubernetes.io/name".to_owned(), "kneepoint".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), args.name.clone()),
    ]
    .into();
    let container = Container {
        name: "kneepoint".into(),
        image: Some(args.image.clone()),
        command: Some(vec!["kneepoint".into()]),
        args: Some(command),
        env: Some(vec![
            EnvVar {
                name: "SHARD_INDEX".into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: INDEX_ANNOTATION.into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
            env("RUST_LOG", "warn"),
        ]),
        volume_mounts: Some(vec![VolumeMount {
            name: "results".into(),
            mount_path: "/results".into(),
            ..Default::default()
        }]),
        resources: Some(ResourceRequirements {
            requests: Some(resources.clone()),
            limits: Some(resources),
            ..Default::default()
        }),
        ..Default::default()
    };
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(args.name.clone()),
            namespace: args.namespace.clone(),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(i32::try_from(n)?),
            parallelism: Some(i32::try_from(n)?),
            // A shard that fails is not rerun: it would start after the others, alone.
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    containers: vec![container],
                    volumes: Some(vec![volume]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// Runs `kneepoint k8s job`: prints the manifest.
pub fn run(args: &K8sJobArgs) -> anyhow::Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let start = match &args.start_at {
        Some(t) => match kneepoint_metrics::export::parse_rfc3339(t) {
            Some(ns) => ns / 1_000_000_000,
            None => t.trim().parse::<u64>().context(
                "--start-at must be a UTC time like 2026-12-01T19:30:00Z or Unix seconds",
            )?,
        },
        None => now + args.start_in_s,
    };
    let job = indexed_job(args, start)?;
    println!("{}", serde_json::to_string_pretty(&job)?);
    Ok(())
}
