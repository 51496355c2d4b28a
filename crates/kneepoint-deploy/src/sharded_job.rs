//! A Kubernetes Indexed Job that runs one sweep as N shards (`kneepoint k8s job`), built from
//! `k8s-openapi`'s typed structs. Each pod's completion index becomes its `--shard K/N`; every
//! pod starts its first level at one shared `--start-at`; results go to a volume claim or an
//! S3 prefix, one folder per shard, for `kneepoint merge`. No secret is written into the
//! manifest: the API key comes from a Kubernetes Secret, and a sweep flag that would carry
//! one (a secret-named header, a URL with credentials or a secret query parameter, a value this
//! process knows to be secret) is refused. Messages name the CLI's flags, which match the
//! fields of [`ShardedJob`]. See docs/scale-out.md.
//!
//! ```
//! use kneepoint_deploy::{indexed_job, ShardedJob};
//! let mut job = ShardedJob::new("nightly", 4, vec!["--url".into(), "http://vllm:8000".into()]);
//! job.pvc = Some("results".into());
//! job.start_at = 1_800_000_000;
//! let manifest = indexed_job(&job).unwrap();
//! let spec = manifest.spec.unwrap();
//! assert_eq!(spec.completions, Some(4));
//! assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector,
    PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecretKeySelector, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::kubernetes::{dns_label, is_dns_label};
use crate::Error;

/// A sharded sweep as a Job: what `kneepoint k8s job` takes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardedJob {
    /// The Job's name (a DNS label of at most [`MAX_JOB_NAME`] characters).
    pub name: String,
    /// Its namespace (`None`: kubectl's).
    pub namespace: Option<String>,
    /// The container image with the kneepoint binary on its PATH.
    pub image: String,
    /// Shards (pods), 1 to 10,000.
    pub shards: u32,
    /// A ReadWriteMany PersistentVolumeClaim for the results (this or `output_s3`).
    pub pvc: Option<String>,
    /// An `s3://bucket/prefix` each shard's archive is uploaded under.
    pub output_s3: Option<String>,
    /// The Secret (`NAME/KEY`) the pods' `OPENAI_API_KEY` comes from.
    pub api_key_secret: Option<String>,
    /// CPU per pod (a request and a limit).
    pub cpu: String,
    /// Memory per pod.
    pub memory: String,
    /// The shared start, Unix seconds.
    pub start_at: u64,
    /// The sweep's own flags (not `--shard`, `--start-at`, `--artifact-dir` or
    /// `--output-s3`, which the Job sets).
    pub sweep: Vec<String>,
}

impl ShardedJob {
    /// A Job `name` of `shards` pods running `sweep`, with the CLI's defaults (image
    /// `kneepoint:latest`, 2 CPUs and 4Gi each, starting at time 0: set `start_at`).
    pub fn new(name: &str, shards: u32, sweep: Vec<String>) -> Self {
        ShardedJob {
            name: name.to_owned(),
            namespace: None,
            image: "kneepoint:latest".into(),
            shards,
            pvc: None,
            output_s3: None,
            api_key_secret: None,
            cpu: "2".into(),
            memory: "4Gi".into(),
            start_at: 0,
            sweep,
        }
    }
}

fn invalid(reason: String) -> Error {
    Error::Invalid(reason)
}

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
fn secret_env(spec: Option<&str>) -> Result<Option<EnvVar>, Error> {
    let Some(spec) = spec else { return Ok(None) };
    let Some((name, key)) = spec
        .split_once('/')
        .filter(|(n, k)| !n.is_empty() && !k.is_empty())
    else {
        return Err(invalid(format!(
            "--api-key-secret is NAME/KEY (a Secret and one of its keys), not {spec:?}"
        )));
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
fn refuse_secret(previous: Option<&str>, word: &str) -> Result<(), Error> {
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
                return Err(invalid(format!(
                    "the {name} header would be written into the manifest: {USE_SECRET}"
                )));
            }
        }
    }
    if let Some((_, rest)) = value.split_once("://") {
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        if authority.contains('@') {
            return Err(invalid(format!("{} holds credentials, which would be written into the manifest: {USE_SECRET} (or a proxy without credentials)", kneepoint_core::redact_url(value))));
        }
        let query = rest.split_once(['?', '#']).map_or("", |(_, q)| q);
        let secret_param = query
            .split(['&', ';', '#'])
            .find(|pair| query_name_is_secret(pair.split('=').next().unwrap_or("")));
        if let Some(pair) = secret_param {
            let name = pair.split('=').next().unwrap_or("");
            return Err(invalid(format!(
                "the URL's {name:?} parameter would be written into the manifest: {USE_SECRET}"
            )));
        }
    }
    if holds_secret(word) {
        return Err(invalid(format!("a value of {} is a secret of this environment and would be written into the manifest: {USE_SECRET}", flag.unwrap_or("the sweep's flags"))));
    }
    Ok(())
}

/// The longest Job name accepted (its pods' names add an index and a suffix to it).
pub const MAX_JOB_NAME: usize = 52;

/// Refuses a Job name Kubernetes would reject (its pods and their hostnames are named after
/// it), suggesting one it takes.
fn check_job_name(name: &str) -> Result<(), Error> {
    if is_dns_label(name, MAX_JOB_NAME) {
        return Ok(());
    }
    let suggestion: String = dns_label(name, "kneepoint-sweep")
        .chars()
        .take(MAX_JOB_NAME)
        .collect();
    Err(invalid(format!(
        "--name {name:?} is not a valid Job name: lowercase letters, digits and '-', a letter first, not ending in '-', at most {MAX_JOB_NAME} characters (e.g. {:?})",
        suggestion.trim_end_matches('-')
    )))
}

/// The sweep's flags as each pod runs them: checked (no flag the Job sets, no secret), without
/// `--quiet` (the Job adds it), and reading the key from `OPENAI_API_KEY` when `api_key_secret`
/// names a Secret. A caller that can parse the flags should also resolve them as shard 0's
/// would (`kneepoint k8s job` does), so that a typo fails before N pods start.
pub fn sweep_flags(flags: &[String], api_key_secret: bool) -> Result<Vec<String>, Error> {
    let mut sweep: Vec<String> = Vec::new();
    for (i, f) in flags.iter().enumerate() {
        let name = f.split('=').next().unwrap_or(f);
        if matches!(
            name,
            "--shard" | "--start-at" | "--artifact-dir" | "--output-s3"
        ) {
            return Err(invalid(format!(
                "{name} is set by the Job itself: leave it out of the sweep's flags"
            )));
        }
        let previous = i.checked_sub(1).map(|p| flags[p].as_str());
        refuse_secret(previous, f)?;
        if f != "--quiet" && f != "-q" {
            sweep.push(f.clone());
        }
    }
    if api_key_secret {
        sweep.extend(["--api-key-env".into(), "OPENAI_API_KEY".into()]);
    }
    Ok(sweep)
}

/// The pod's one container: kneepoint with `command`, its shard index from the Job's
/// annotation, the API key from a Secret when named, the results volume and its resources.
fn container(args: &ShardedJob, command: Vec<String>) -> Result<Container, Error> {
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

/// The Indexed Job `args` describe, or why it cannot run (a name Kubernetes refuses, no
/// shards, nowhere for the results, a flag the Job sets or that carries a secret).
pub fn indexed_job(args: &ShardedJob) -> Result<Job, Error> {
    check_job_name(&args.name)?;
    if args.shards == 0 || args.shards > 10_000 {
        return Err(invalid("--shards must be between 1 and 10,000".into()));
    }
    if args.pvc.is_none() && args.output_s3.is_none() {
        return Err(invalid("give --pvc CLAIM or --output-s3 s3://bucket/prefix: a finished pod's own disk cannot be read back".into()));
    }
    let start_at = args.start_at;
    let sweep = sweep_flags(&args.sweep, args.api_key_secret.is_some())?;
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
        refuse_secret(Some("--output-s3"), s3)?;
        let bucket = s3.strip_prefix("s3://").and_then(|r| r.split('/').next());
        if bucket.is_none_or(str::is_empty) {
            return Err(invalid(format!(
                "--output-s3 {s3:?} is not s3://bucket/prefix"
            )));
        }
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
            // at most 10,000: checked above
            completions: Some(i32::try_from(n).unwrap_or(i32::MAX)),
            parallelism: Some(i32::try_from(n).unwrap_or(i32::MAX)),
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
