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

    /// The objects' name: the candidate's, as a DNS label.
    pub fn object_name(&self) -> String {
        let mut s: String = self
            .name
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        while s.contains("--") {
            s = s.replace("--", "-");
        }
        let s = s.trim_matches('-');
        let mut s: String = s.chars().take(63).collect();
        while s.ends_with('-') {
            s.pop();
        }
        if s.is_empty() {
            "kneepoint-candidate".into()
        } else {
            s
        }
    }

    /// The Secret the secret-looking variables are read from: `<object name>-secrets`, each
    /// variable under its own name as key.
    pub fn secret_name(&self) -> String {
        let base: String = self.object_name().chars().take(55).collect();
        format!("{}-secrets", base.trim_end_matches('-'))
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
        let env = self
            .env
            .iter()
            .map(|(k, v)| {
                if crate::template::secret_like(k) {
                    EnvVar {
                        name: k.clone(),
                        value_from: Some(EnvVarSource {
                            secret_key_ref: Some(SecretKeySelector {
                                name: self.secret_name(),
                                key: k.clone(),
                                optional: Some(false),
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }
                } else {
                    EnvVar {
                        name: k.clone(),
                        value: Some(v.clone()),
                        ..Default::default()
                    }
                }
            })
            .collect::<Vec<_>>();
        let gpus = (self.gpus > 0).then(|| {
            BTreeMap::from([("nvidia.com/gpu".to_owned(), Quantity(self.gpus.to_string()))])
        });
        let container = Container {
            name: "server".into(),
            image: Some(self.image.clone()),
            command: Some(crate::template::redact_argv(&self.command)),
            env: (!env.is_empty()).then_some(env),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: i32::from(self.port),
                ..Default::default()
            }]),
            readiness_probe: Some(Probe {
                http_get: Some(HTTPGetAction {
                    path: Some(self.ready_path.clone()),
                    port: IntOrString::String("http".into()),
                    ..Default::default()
                }),
                period_seconds: Some(5),
                failure_threshold: Some(3),
                ..Default::default()
            }),
            startup_probe: Some(Probe {
                http_get: Some(HTTPGetAction {
                    path: Some(self.ready_path.clone()),
                    port: IntOrString::String("http".into()),
                    ..Default::default()
                }),
                period_seconds: Some(10),
                // Up to an hour to load weights and compile.
                failure_threshold: Some(360),
                ..Default::default()
            }),
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
        assert_eq!(
            k.object_name(),
            "vllm-max-num-seqs-64-tensor-parallel-size-2"
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
        assert_eq!(
            KubeSpec::new("!!!", "i", vec!["x".into()]).object_name(),
            "kneepoint-candidate"
        );
        assert!(KubeSpec::new("a", "", vec!["x".into()])
            .manifests()
            .is_err());
    }
}
