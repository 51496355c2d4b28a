//! A candidate as Kubernetes manifests: a Deployment (the server's image and arguments, its
//! GPUs, an HTTP readiness probe) and a Service in front of it, built from `k8s-openapi`'s
//! typed structs, ready for `kubectl apply -f` (feature `kubernetes`). Secret-looking
//! environment variables are taken from a Secret, never written in the manifest.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SecretKeySelector, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::Error;

/// The longest object name (63, a label's limit, less `-secrets`).
pub const MAX_NAME: usize = 55;

/// Whether `name` is an RFC 1035 label of at most `max_len` characters: lowercase letters,
/// digits and `-`, a letter first, not ending in `-`.
pub fn is_dns_label(name: &str, max_len: usize) -> bool {
    !name.is_empty()
        && name.len() <= max_len
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// `name` as an RFC 1035 label of at most [`MAX_NAME`] characters: unchanged when it already is
/// one, else made of its lowercase letters and digits (`-` between runs of them), starting with
/// a letter (`fallback` when nothing is left), cut to fit and followed by an 8-digit hash of
/// the whole name.
pub fn dns_label(name: &str, fallback: &str) -> String {
    if is_dns_label(name, MAX_NAME) {
        return name.to_owned();
    }
    let mut base = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            base.push(c.to_ascii_lowercase());
        } else if !base.is_empty() && !base.ends_with('-') {
            base.push('-');
        }
    }
    if !base.starts_with(|c: char| c.is_ascii_lowercase()) {
        base = if base.is_empty() {
            fallback.to_owned()
        } else {
            format!("{fallback}-{base}")
        };
    }
    // FNV-1a: stable across builds and platforms (std's hasher is not promised to be).
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let suffix = format!("-{:08x}", (hash >> 32) as u32 ^ hash as u32);
    base.truncate(MAX_NAME - suffix.len());
    let base = base.trim_end_matches('-');
    format!("{base}{suffix}")
}

/// The Secret's keys for the secret values of the command line: `KNEEPOINT_ARG_SECRET_1`...
pub const ARG_SECRET: &str = "KNEEPOINT_ARG_SECRET_";

/// What the manifests describe. Build with [`KubeSpec::new`] and set the fields.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct KubeSpec {
    /// The candidate's name; the objects' name is made from it (lowercase letters, digits and
    /// `-`, at most 63 characters).
    pub name: String,
    /// The container image.
    pub image: String,
    /// The server's command line, already rendered (listening on `port`, all interfaces).
    pub command: Vec<String>,
    /// Environment variables; those whose name holds `TOKEN`, `KEY`, `SECRET` or `PASSWORD`
    /// come from the Secret [`KubeSpec::secret_name`] instead of the manifest.
    pub env: Vec<(String, String)>,
    /// The port the server listens on in its container.
    pub port: u16,
    /// The readiness probe's path.
    pub ready_path: String,
    /// GPUs per pod (`nvidia.com/gpu`); 0: none requested.
    pub gpus: u32,
    /// Pods (instances).
    pub replicas: u32,
    /// The namespace (default: `kubectl`'s).
    pub namespace: Option<String>,
}

impl KubeSpec {
    /// Manifests for `name` running `command` in `image`, listening on 8000, probed at
    /// `/v1/models`, one pod, no GPU.
    pub fn new(name: impl Into<String>, image: impl Into<String>, command: Vec<String>) -> Self {
        KubeSpec {
            name: name.into(),
            image: image.into(),
            command,
            env: Vec::new(),
            port: 8000,
            ready_path: "/v1/models".into(),
            gpus: 0,
            replicas: 1,
            namespace: None,
        }
    }

    /// The objects' name: the candidate's when it already is a valid name (an RFC 1035 label:
    /// lowercase letters, digits and `-`, a letter first, at most [`MAX_NAME`] characters so
    /// that `-secrets` still fits); otherwise the candidate's name made into one, cut to fit,
    /// with a hash of the whole name after it, so two names never share objects (`vLLM
    /// tp=2` and `vllm-tp-2`, two long names that differ only at their end, two names in
    /// another script).
    pub fn object_name(&self) -> String {
        dns_label(&self.name, "candidate")
    }

    /// The Secret the secret-looking variables are read from: `<object name>-secrets`, each
    /// variable under its own name as key, and each secret value of the command line (after
    /// `--api-key`, `--hf-token=`...) under `KNEEPOINT_ARG_SECRET_<n>`, in order of appearance
    /// (the command refers to it as `$(KNEEPOINT_ARG_SECRET_<n>)`).
    pub fn secret_name(&self) -> String {
        format!("{}-secrets", self.object_name())
    }

    /// The container's command line, its secrets masked as `$(KNEEPOINT_ARG_SECRET_N)`, and its
    /// environment, secret-looking variables and those masked values read from the Secret.
    fn command_and_env(&self) -> (Vec<String>, Vec<EnvVar>) {
        // A secret in the command line becomes `$(KNEEPOINT_ARG_SECRET_N)`, which Kubernetes
        // fills from the Secret before the container starts.
        let mut arg_secrets: Vec<String> = Vec::new();
        let command = crate::argv_secrets::mask_argv(&self.command, |value| {
            let n = match arg_secrets.iter().position(|v| v == value) {
                Some(i) => i + 1,
                None => {
                    arg_secrets.push(value.to_owned());
                    arg_secrets.len()
                }
            };
            format!("$({ARG_SECRET}{n})")
        });
        let from_secret = |k: &str| EnvVar {
            name: k.to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: self.secret_name(),
                    key: k.to_owned(),
                    optional: Some(false),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut env = self
            .env
            .iter()
            .map(|(k, v)| {
                if kneepoint_core::secrets::name_is_secret(k) {
                    from_secret(k)
                } else {
                    EnvVar {
                        name: k.clone(),
                        value: Some(v.clone()),
                        ..Default::default()
                    }
                }
            })
            .collect::<Vec<_>>();
        // Defined before the command refers to them.
        env.extend((1..=arg_secrets.len()).map(|n| from_secret(&format!("{ARG_SECRET}{n}"))));
        (command, env)
    }

    /// A GET of the ready path every `period_s`, failed after `failures` in a row.
    fn probe(&self, period_s: i32, failures: i32) -> Probe {
        Probe {
            http_get: Some(HTTPGetAction {
                path: Some(self.ready_path.clone()),
                port: IntOrString::String("http".into()),
                ..Default::default()
            }),
            period_seconds: Some(period_s),
            failure_threshold: Some(failures),
            ..Default::default()
        }
    }

    /// The Deployment and the Service.
    pub fn manifests(&self) -> Result<(Deployment, Service), Error> {
        if self.image.trim().is_empty() {
            return Err(Error::Invalid(format!(
                "candidate {:?}: the Kubernetes manifest needs an image",
                self.name
            )));
        }
        if self.command.is_empty() {
            return Err(Error::Invalid(format!(
                "candidate {:?}: the Kubernetes manifest needs a command",
                self.name
            )));
        }
        let name = self.object_name();
        let labels: BTreeMap<String, String> = [
            ("app.kubernetes.io/name".to_owned(), name.clone()),
            (
                "app.kubernetes.io/managed-by".to_owned(),
                "kneepoint".to_owned(),
            ),
        ]
        .into();
        let meta = ObjectMeta {
            name: Some(name.clone()),
            namespace: self.namespace.clone(),
            labels: Some(labels.clone()),
            ..Default::default()
        };
        let (command, env) = self.command_and_env();
        let gpus = (self.gpus > 0).then(|| {
            BTreeMap::from([("nvidia.com/gpu".to_owned(), Quantity(self.gpus.to_string()))])
        });
        let container = Container {
            name: "server".into(),
            image: Some(self.image.clone()),
            command: Some(command),
            env: (!env.is_empty()).then_some(env),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: i32::from(self.port),
                ..Default::default()
            }]),
            readiness_probe: Some(self.probe(5, 3)),
            // Up to an hour to load weights and compile.
            startup_probe: Some(self.probe(10, 360)),
            resources: gpus.map(|g| ResourceRequirements {
                limits: Some(g.clone()),
                requests: Some(g),
                ..Default::default()
            }),
            ..Default::default()
        };
        let deployment = Deployment {
            metadata: meta.clone(),
            spec: Some(DeploymentSpec {
                replicas: Some(i32::try_from(self.replicas.max(1)).unwrap_or(i32::MAX)),
                selector: LabelSelector {
                    match_labels: Some(labels.clone()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels.clone()),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![container],
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            ..Default::default()
        };
        let service = Service {
            metadata: meta,
            spec: Some(ServiceSpec {
                selector: Some(labels),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: i32::from(self.port),
                    target_port: Some(IntOrString::String("http".into())),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        Ok((deployment, service))
    }

    /// The manifests as JSON values, each with its `apiVersion` and `kind` (what `kubectl
    /// apply -f` reads, one file or document each).
    pub fn manifests_json(&self) -> Result<Vec<serde_json::Value>, Error> {
        let (d, s) = self.manifests()?;
        let json = |v: Result<serde_json::Value, serde_json::Error>| {
            v.map_err(|e| Error::Invalid(format!("serialising a manifest: {e}")))
        };
        Ok(vec![
            json(serde_json::to_value(&d))?,
            json(serde_json::to_value(&s))?,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_dns_labels_and_secrets_stay_out() {
        let mut k = KubeSpec::new(
            "vLLM max_num_seqs=64 tensor_parallel_size=2",
            "vllm/vllm-openai:v0.11.0",
            vec!["vllm".into(), "serve".into(), "m".into()],
        );
        assert!(
            k.object_name()
                .starts_with("vllm-max-num-seqs-64-tensor-parallel-size-2-"),
            "{}",
            k.object_name()
        );
        k.env = vec![
            ("HF_TOKEN".into(), "hf_secret".into()),
            ("VLLM_LOGGING_LEVEL".into(), "INFO".into()),
        ];
        k.gpus = 2;
        let docs = k.manifests_json().unwrap();
        let text = serde_json::to_string(&docs).unwrap();
        assert!(!text.contains("hf_secret"), "{text}");
        assert_eq!(docs[0]["kind"], "Deployment");
        assert_eq!(docs[0]["apiVersion"], "apps/v1");
        assert_eq!(docs[1]["kind"], "Service");
        let c = &docs[0]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], "2");
        assert_eq!(
            c["env"][0]["valueFrom"]["secretKeyRef"]["name"],
            format!("{}-secrets", k.object_name())
        );
        assert!(KubeSpec::new("!!!", "i", vec!["x".into()])
            .object_name()
            .starts_with("candidate-"));
        assert!(KubeSpec::new("a", "", vec!["x".into()])
            .manifests()
            .is_err());
    }

    /// Issue 46 item 9: every name gives a valid label, distinct names give distinct labels.
    #[test]
    fn object_names_are_valid_labels_and_never_collide() {
        let long = "x".repeat(80);
        let names = [
            "plain-name".to_owned(),
            "vLLM tp=2".to_owned(),
            "vllm-tp-2".to_owned(),
            format!("{long}-a"),
            format!("{long}-b"),
            "模型甲".to_owned(),
            "模型乙".to_owned(),
            "8xH100".to_owned(),
            "".to_owned(),
            "a/b c".to_owned(),
            "-lead-".to_owned(),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for n in &names {
            let label = dns_label(n, "candidate");
            assert!(label.len() <= MAX_NAME, "{label}");
            assert!(
                label.starts_with(|c: char| c.is_ascii_lowercase()),
                "{label}"
            );
            assert!(!label.ends_with('-'), "{label}");
            assert!(
                label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{label}"
            );
            assert!(seen.insert(label.clone()), "{n:?} -> {label} collides");
            // Stable: the same name, the same label.
            assert_eq!(dns_label(n, "candidate"), label);
        }
        assert_eq!(dns_label("plain-name", "candidate"), "plain-name");
        let k = KubeSpec::new(format!("{long}-a"), "i", vec!["x".into()]);
        assert!(k.secret_name().len() <= 63, "{}", k.secret_name());
    }

    #[test]
    fn command_line_secrets_come_from_the_secret() {
        let k = KubeSpec::new(
            "s",
            "i",
            [
                "vllm",
                "serve",
                "--api-key",
                "k8s-cmd-secret-1",
                "--hf-token=k8s-cmd-secret-2",
            ]
            .map(String::from)
            .to_vec(),
        );
        let docs = k.manifests_json().unwrap();
        let text = serde_json::to_string(&docs).unwrap();
        assert!(!text.contains("k8s-cmd-secret"), "{text}");
        let c = &docs[0]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["command"][3], "$(KNEEPOINT_ARG_SECRET_1)");
        assert_eq!(c["command"][4], "--hf-token=$(KNEEPOINT_ARG_SECRET_2)");
        assert_eq!(c["env"][1]["name"], "KNEEPOINT_ARG_SECRET_2");
        assert_eq!(
            c["env"][1]["valueFrom"]["secretKeyRef"]["name"],
            "s-secrets"
        );
    }
}
