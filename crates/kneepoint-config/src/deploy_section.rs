//! `[candidates.deploy]` and the values of `[candidates.matrix]`, as the config file spells
//! them.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[candidates.deploy]`: how kneepoint brings the candidate up.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeploySection {
    /// `local` (a server process on this machine; the default) or `sagemaker` (a real-time
    /// endpoint, described in `[candidates.deploy.sagemaker]`).
    pub kind: Option<String>,
    /// The server's command: a list of arguments, or one line split as a shell would
    /// (quotes kept together). Placeholders: `{port}`, `{host}`, `{kneepoint}` (this
    /// program), `{name}`, and every key of `settings` and of the candidate's matrix.
    pub command: Option<Command>,
    /// Environment variables for the server (values are templates too).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of kneepoint's own environment the server may read although their name says
    /// secret (`["HF_TOKEN"]`). Every other secret-named variable, and the client's API key, is
    /// withheld from launched servers.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Fixed values for the command's placeholders (`model = "..."`).
    #[serde(default)]
    pub settings: BTreeMap<String, Scalar>,
    /// The address the server listens on (default 127.0.0.1).
    pub host: Option<String>,
    /// A fixed port (default: a free one, chosen by kneepoint).
    pub port: Option<u16>,
    /// Readiness: the path whose `200` means ready (default `/v1/models`).
    pub ready_path: Option<String>,
    /// How long the server may take to answer, seconds (default 600).
    pub ready_timeout_s: Option<f64>,
    /// Seconds between `SIGTERM` and `SIGKILL` when stopping it (default 30).
    pub stop_grace_s: Option<f64>,
    /// The same candidate as Kubernetes manifests (a Deployment and a Service), written
    /// beside its results and into its recipe, ready for `kubectl apply`.
    pub kubernetes: Option<KubernetesSection>,
    /// `kind = "sagemaker"`: the endpoint to create.
    pub sagemaker: Option<SageMakerDeploySection>,
}

/// `[candidates.deploy.sagemaker]`: the model and endpoint kneepoint creates (and deletes).
/// The instance type and count are the candidate's; the data plane (region, `endpoint_url`,
/// body format) is `[candidates.endpoint]`'s, as for any SageMaker candidate.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SageMakerDeploySection {
    /// The inference container's image.
    pub image: String,
    /// The container's environment; values are templates (`SM_VLLM_MAX_NUM_SEQS =
    /// "{max_num_seqs}"`).
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// The IAM role SageMaker assumes.
    pub execution_role_arn: Option<String>,
    /// The model's artifacts in S3.
    pub model_data_url: Option<String>,
    /// The control plane's URL (default `https://api.sagemaker.<region>.amazonaws.com`).
    pub api_url: Option<String>,
    /// Seconds the container may take to pass its health check (60-3600).
    pub startup_health_check_timeout_s: Option<u32>,
    /// Seconds between two DescribeEndpoint calls while waiting for InService (default 15).
    pub poll_s: Option<f64>,
}

/// `[candidates.deploy.kubernetes]`: the candidate's server as a Kubernetes Deployment.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KubernetesSection {
    /// The container image (e.g. `vllm/vllm-openai:v0.11.0`).
    pub image: String,
    /// The container's command (default: the deploy command, rendered with `{host}` 0.0.0.0,
    /// `{port}` the container port and `{kneepoint}` `kneepoint`).
    pub command: Option<Command>,
    /// The container port (default 8000).
    pub port: Option<u16>,
    /// GPUs per pod (default: the candidate's `tensor_parallel_size`, else none).
    pub gpus: Option<u32>,
    /// The namespace (default: `kubectl`'s).
    pub namespace: Option<String>,
}

/// A server command: arguments, or one line.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Command {
    /// One argument each.
    Argv(Vec<String>),
    /// One line, split as a shell would (single and double quotes, backslashes).
    Line(String),
}

/// A setting's value: a string, a number or a boolean.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Scalar {
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A number.
    Float(f64),
    /// Text.
    Text(String),
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Text(s) => f.write_str(s),
        }
    }
}
