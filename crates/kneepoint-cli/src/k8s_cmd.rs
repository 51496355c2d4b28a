//! `kneepoint k8s job --shards N -- <sweep args>`: a Kubernetes Indexed Job that runs one
//! sweep as N shards, built from `k8s-openapi`'s typed structs and printed as JSON (which
//! `kubectl apply -f` reads). Each pod's completion index becomes its `--shard K/N`; every pod
//! starts its first level at one shared `--start-at`; results go to a volume claim or an S3
//! prefix, one folder per shard, for `kneepoint merge`. See docs/scale-out.md.

use std::collections::BTreeMap;

use anyhow::{bail, Context};

use crate::args::K8sJobArgs;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector,
    PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecretKeySelector, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The annotation the Job controller sets to each pod's completion index.
const INDEX_ANNOTATION: &str = "metadata.annotations['batch.kubernetes.io/job-completion-index']";

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

/// `OPENAI_API_KEY` from the Secret `NAME/KEY`, when given.
fn secret_env(spec: Option<&str>) -> anyhow::Result<Option<EnvVar>> {
    let Some(spec) = spec else { return Ok(None) };
    let Some((name, key)) = spec
        .split_once('/')
        .filter(|(n, k)| !n.is_empty() && !k.is_empty())
    else {
        bail!("--api-key-secret is NAME/KEY (a Secret and one of its keys), not {spec:?}");
    };
    Ok(Some(EnvVar {
        name: "OPENAI_API_KEY".into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: name.into(),
                key: key.into(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }))
}

/// A flag's value that would put a secret in the manifest (anyone who can read the Job can
/// read it): a header whose name says secret (`Authorization`, `api-key`, `Cookie`...), a URL
/// with credentials or a secret-named query parameter (`?key=`), or a value this process knows
/// to be secret. `previous` is the word before `word`.
fn refuse_secret(previous: Option<&str>, word: &str) -> anyhow::Result<()> {
    use kneepoint_core::secrets::{holds_secret, name_is_secret, query_name_is_secret};
    const USE_SECRET: &str = "keep it in a Kubernetes Secret: --api-key-secret NAME/KEY gives the pods OPENAI_API_KEY from it";
    let (flag, value) = match word.split_once('=') {
        Some((f, v)) if f.starts_with("--") => (Some(f), v),
        _ => (previous.filter(|p| p.starts_with('-')), word),
    };
    if word.starts_with("--") && value == word {
        // A flag itself, its value follows.
        return Ok(());
    }
    if let Some(f) = flag {
        if matches!(f, "--header" | "-H") {
            let name = value.split(':').next().unwrap_or("").trim();
            if name_is_secret(name) {
                bail!("the {name} header would be written into the manifest: {USE_SECRET}");
            }
        }
    }
    if let Some((_, rest)) = value.split_once("://") {
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        if authority.contains('@') {
            bail!("{} holds credentials, which would be written into the manifest: {USE_SECRET} (or a proxy without credentials)", kneepoint_core::redact_url(value));
        }
        let query = rest.split_once(['?', '#']).map_or("", |(_, q)| q);
        let secret_param = query
            .split(['&', ';', '#'])
            .find(|pair| query_name_is_secret(pair.split('=').next().unwrap_or("")));
        if let Some(pair) = secret_param {
            let name = pair.split('=').next().unwrap_or("");
            bail!("the URL's {name:?} parameter would be written into the manifest: {USE_SECRET}");
        }
    }
    if holds_secret(word) {
        bail!("a value of {} is a secret of this environment and would be written into the manifest: {USE_SECRET}", flag.unwrap_or("the sweep's flags"));
    }
    Ok(())
}

/// The longest Job name accepted (its pods' names add an index and a suffix to it).
const MAX_JOB_NAME: usize = 52;

/// Refuses a Job name Kubernetes would reject (its pods and their hostnames are named after
/// it), suggesting one it takes.
fn check_job_name(name: &str) -> anyhow::Result<()> {
    if kneepoint_deploy::is_dns_label(name, MAX_JOB_NAME) {
        return Ok(());
    }
    let suggestion: String = kneepoint_deploy::dns_label(name, "kneepoint-sweep")
        .chars()
        .take(MAX_JOB_NAME)
        .collect();
    bail!(
        "--name {name:?} is not a valid Job name: lowercase letters, digits and '-', a letter first, not ending in '-', at most {MAX_JOB_NAME} characters (e.g. {:?})",
        suggestion.trim_end_matches('-')
    );
}

/// The sweep's flags as each pod runs them: checked (no flag the Job sets, no secret) and
/// resolved as shard 0's would be, so that a typo fails here and not in N pods.
fn sweep_flags(args: &K8sJobArgs) -> anyhow::Result<Vec<String>> {
    let mut sweep: Vec<String> = Vec::new();
    for (i, f) in args.sweep.iter().enumerate() {
        let name = f.split('=').next().unwrap_or(f);
        if matches!(
            name,
            "--shard" | "--start-at" | "--artifact-dir" | "--output-s3"
        ) {
            bail!("{name} is set by the Job itself: leave it out of the sweep's flags");
        }
        let previous = i.checked_sub(1).map(|p| args.sweep[p].as_str());
        refuse_secret(previous, f)?;
        // The Job adds --quiet itself.
        if f != "--quiet" && f != "-q" {
            sweep.push(f.clone());
        }
    }
    if args.api_key_secret.is_some() {
        sweep.extend(["--api-key-env".into(), "OPENAI_API_KEY".into()]);
    }
    // The sweep's flags must resolve as shard 0's would (a typo, or a level too small to
    // share out, fails here, not in N pods).
    let mut probe = vec!["kneepoint".to_owned(), "sweep".to_owned()];
    probe.extend(sweep.iter().cloned());
    probe.extend([
        "--shard".into(),
        format!("0/{}", args.shards),
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
    Ok(sweep)
}

/// The pod's one container: kneepoint with `command`, its shard index from the Job's
/// annotation, the API key from a Secret when named, the results volume and its resources.
fn container(args: &K8sJobArgs, command: Vec<String>) -> anyhow::Result<Container> {
    let resources: BTreeMap<String, Quantity> = [
        ("cpu".to_owned(), Quantity(args.cpu.clone())),
        ("memory".to_owned(), Quantity(args.memory.clone())),
    ]
    .into();
    Ok(Container {
        name: "kneepoint".into(),
        image: Some(args.image.clone()),
        command: Some(vec!["kneepoint".into()]),
        args: Some(command),
        env: Some(
            vec![
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
            ]
            .into_iter()
            .chain(secret_env(args.api_key_secret.as_deref())?)
            .collect(),
        ),
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
    })
}

/// The Indexed Job `args` describe, started at `start_at` (Unix seconds).
pub fn indexed_job(args: &K8sJobArgs, start_at: u64) -> anyhow::Result<Job> {
    check_job_name(&args.name)?;
    if args.shards == 0 || args.shards > 10_000 {
        bail!("--shards must be between 1 and 10,000");
    }
    if args.pvc.is_none() && args.output_s3.is_none() {
        bail!("give --pvc CLAIM or --output-s3 s3://bucket/prefix: a finished pod's own disk cannot be read back");
    }
    let sweep = sweep_flags(args)?;
    let n = args.shards;
    let dir = format!("/results/{}/shard-$(SHARD_INDEX)", args.name);
    let mut command = vec!["sweep".to_owned()];
    command.extend(sweep);
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
    let container = container(args, command)?;
    let labels: BTreeMap<String, String> = [
        ("app.kubernetes.io/name".to_owned(), "kneepoint".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), args.name.clone()),
    ]
    .into();
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
        Some(t) => kneepoint_config::parse_start_at(t)? / 1_000_000_000,
        None => now + args.start_in_s,
    };
    let job = indexed_job(args, start)?;
    let text = serde_json::to_string_pretty(&job)?;
    // Refused above; scrubbed all the same.
    println!("{}", kneepoint_core::secrets::scrub(&text));
    Ok(())
}
