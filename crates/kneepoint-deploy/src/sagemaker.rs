//! A candidate as a SageMaker real-time endpoint (feature `sagemaker`): CreateModel (the
//! container image and its environment, e.g. the vLLM container's `SM_VLLM_*` settings),
//! CreateEndpointConfig (instance type and count), CreateEndpoint, then DescribeEndpoint until
//! `InService`; taken down with DeleteEndpoint, DeleteEndpointConfig and DeleteModel (a
//! resource already gone counts as deleted). Everything created is named `kneepoint-...` and
//! tagged with the launching process, so that [`find_sagemaker_leftovers`] finds what a
//! crashed run left.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kneepoint_runner::CancelToken;
use kneepoint_transport::sagemaker::{ApiError, SageMakerApi};
use serde_json::{json, Value};

use crate::Error;

/// The tag naming the launching process: `<host>:<pid>:<start time>`.
pub const LAUNCHER_TAG: &str = "kneepoint:launcher";
/// The tag naming the candidate.
pub const CANDIDATE_TAG: &str = "kneepoint:candidate";

/// How to run one candidate as a SageMaker endpoint. Build with [`SageMakerSpec::new`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SageMakerSpec {
    /// The candidate's name (in messages and tags).
    pub name: String,
    /// The name of the model, endpoint configuration and endpoint created (at most 63
    /// characters: letters, digits and `-`); see [`SageMakerSpec::resource_name`].
    pub resource_name: String,
    /// The inference container's image.
    pub image: String,
    /// The container's environment (the vLLM container reads `SM_VLLM_<FLAG>` as `--flag`).
    pub env: BTreeMap<String, String>,
    /// The model's artifacts in S3, when the container needs them.
    pub model_data_url: Option<String>,
    /// The IAM role SageMaker assumes to pull the image and the artifacts.
    pub execution_role_arn: Option<String>,
    /// The instance type (`ml.g5.12xlarge`...).
    pub instance_type: String,
    /// Instances behind the endpoint.
    pub instance_count: u32,
    /// How long the container may take to pass its health check, seconds (60–3600).
    pub startup_health_check_timeout_s: Option<u32>,
    /// How long to wait for `InService`.
    pub ready_timeout: Duration,
    /// Time between two DescribeEndpoint calls.
    pub poll_interval: Duration,
    /// How long a teardown waits for an endpoint still being created (SageMaker refuses to
    /// delete it until then); default [`SageMakerDeployment::DELETE_WAIT`].
    pub delete_wait: Duration,
}

impl SageMakerSpec {
    /// A spec for candidate `name` running `image` on one `instance_type`; waits up to an hour
    /// for `InService`, asking every 15 s.
    pub fn new(
        name: impl Into<String>,
        image: impl Into<String>,
        instance_type: impl Into<String>,
    ) -> Self {
        let name = name.into();
        SageMakerSpec {
            resource_name: Self::resource_name(&name),
            name,
            image: image.into(),
            env: BTreeMap::new(),
            model_data_url: None,
            execution_role_arn: None,
            instance_type: instance_type.into(),
            instance_count: 1,
            startup_health_check_timeout_s: None,
            ready_timeout: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(15),
            delete_wait: SageMakerDeployment::DELETE_WAIT,
        }
    }

    /// `kneepoint-<candidate>-<8 hex digits of this process and the time>`, cut to 63
    /// characters: unique per launch, recognisable in the console.
    pub fn resource_name(candidate: &str) -> String {
        let mut base: String = candidate
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        while base.contains("--") {
            base = base.replace("--", "-");
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let unique = (nanos as u64 ^ u64::from(std::process::id()).rotate_left(32)) as u32;
        let base: String = base.trim_matches('-').chars().take(43).collect();
        let base = base.trim_end_matches('-');
        if base.is_empty() {
            format!("kneepoint-{unique:08x}")
        } else {
            format!("kneepoint-{base}-{unique:08x}")
        }
    }

    /// Checks the spec without calling anything.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |why: String| Err(Error::Invalid(format!("candidate {:?}: {why}", self.name)));
        let n = &self.resource_name;
        let ok_chars = n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if n.is_empty() || n.len() > 63 || !ok_chars || n.starts_with('-') || n.ends_with('-') {
            return bad(format!(
                "{n:?} is not a SageMaker name (1-63 letters, digits and '-')"
            ));
        }
        if self.image.trim().is_empty() {
            return bad("a SageMaker endpoint needs the container's image".into());
        }
        if !self.instance_type.starts_with("ml.") {
            return bad(format!(
                "{:?} is not a SageMaker instance type (ml.g5.xlarge, ...)",
                self.instance_type
            ));
        }
        if self.instance_count == 0 {
            return bad("instance_count must be at least 1".into());
        }
        if self.env.len() > 100 {
            return bad("SageMaker takes at most 100 environment variables".into());
        }
        for (k, v) in &self.env {
            let key_ok = !k.is_empty()
                && !k.starts_with(|c: char| c.is_ascii_digit())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !key_ok || k.len() > 1024 || v.len() > 1024 {
                return bad(format!(
                    "environment variable {k:?} is not one SageMaker takes"
                ));
            }
        }
        if let Some(t) = self.startup_health_check_timeout_s {
            if !(60..=3600).contains(&t) {
                return bad("startup_health_check_timeout_s must be 60-3600".into());
            }
        }
        if self.ready_timeout.is_zero() || self.poll_interval.is_zero() {
            return bad("the wait for InService and its polling interval must be above 0".into());
        }
        Ok(())
    }

    fn tags(&self) -> Value {
        json!([
            {"Key": LAUNCHER_TAG, "Value": launcher_identity()},
            {"Key": CANDIDATE_TAG, "Value": tag_value(&self.name)},
        ])
    }

    /// The CreateModel, CreateEndpointConfig and CreateEndpoint request bodies (what the
    /// recipe shows: the exact configuration to deploy).
    pub fn requests(&self) -> [Value; 3] {
        let n = &self.resource_name;
        let mut container = json!({"Image": self.image, "Environment": self.env});
        if let Some(u) = &self.model_data_url {
            container["ModelDataUrl"] = json!(u);
        }
        let mut model = json!({"ModelName": n, "PrimaryContainer": container, "Tags": self.tags()});
        if let Some(r) = &self.execution_role_arn {
            model["ExecutionRoleArn"] = json!(r);
        }
        let mut variant = json!({
            "VariantName": "AllTraffic",
            "ModelName": n,
            "InstanceType": self.instance_type,
            "InitialInstanceCount": self.instance_count,
        });
        if let Some(t) = self.startup_health_check_timeout_s {
            variant["ContainerStartupHealthCheckTimeoutInSeconds"] = json!(t);
        }
        [
            model,
            json!({"EndpointConfigName": n, "ProductionVariants": [variant], "Tags": self.tags()}),
            json!({"EndpointName": n, "EndpointConfigName": n, "Tags": self.tags()}),
        ]
    }

    /// Creates the model, the endpoint configuration and the endpoint, and waits until the
    /// endpoint is `InService`. On any failure, an interrupt or the deadline, what was created
    /// is deleted again before the error returns.
    pub async fn launch(
        &self,
        api: Arc<SageMakerApi>,
        cancel: &CancelToken,
    ) -> Result<SageMakerDeployment, Error> {
        self.validate()?;
        let started = Instant::now();
        let [model, config, endpoint] = self.requests();
        let mut d = SageMakerDeployment {
            name: self.name.clone(),
            resource_name: self.resource_name.clone(),
            api,
            created: Created::default(),
            requests: self.requests().to_vec(),
            launch_time: Duration::ZERO,
            poll_interval: self.poll_interval,
            delete_wait: self.delete_wait,
        };
        let steps = [
            ("CreateModel", model, 0),
            ("CreateEndpointConfig", config, 1),
            ("CreateEndpoint", endpoint, 2),
        ];
        for (op, body, step) in steps {
            if let Err(e) = d.api.call(op, &body).await {
                // Sent but no answer, or a server error: the resource may exist all the same,
                // and a delete of one that does not counts as done.
                if (e.status == 0 && !e.is_local()) || e.status >= 500 {
                    d.mark(step);
                }
                return Err(d.undo(api_error(&self.name, e)).await);
            }
            d.mark(step);
        }
        match self.wait_in_service(&d, started, cancel).await {
            Ok(()) => {
                d.launch_time = started.elapsed();
                Ok(d)
            }
            Err(e) => Err(d.undo(e).await),
        }
    }

    async fn wait_in_service(
        &self,
        d: &SageMakerDeployment,
        started: Instant,
        cancel: &CancelToken,
    ) -> Result<(), Error> {
        let what = format!("SageMaker endpoint {}", self.resource_name);
        loop {
            let answer = d
                .api
                .call(
                    "DescribeEndpoint",
                    &json!({"EndpointName": self.resource_name}),
                )
                .await
                .map_err(|e| api_error(&self.name, e))?;
            match answer["EndpointStatus"].as_str().unwrap_or_default() {
                "InService" => return Ok(()),
                "Failed" | "OutOfService" | "Deleting" => {
                    return Err(Error::Failed {
                        what,
                        reason: answer["FailureReason"]
                            .as_str()
                            .unwrap_or("no FailureReason given")
                            .to_owned(),
                    })
                }
                _ => {}
            }
            let left = self.ready_timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(Error::NotReady {
                    what,
                    url: "DescribeEndpoint".into(),
                    after: self.ready_timeout,
                    tail: Box::default(),
                });
            }
            tokio::select! {
                _ = tokio::time::sleep(left.min(self.poll_interval)) => {}
                _ = cancel.cancelled() => return Err(Error::Cancelled { what }),
            }
        }
    }
}

/// `s` as a tag value AWS accepts (letters, digits, spaces and `_.:/=+-@`, at most 256).
fn tag_value(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() || c == ' ' || "_.:/=+-@".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(256)
        .collect()
}

pub(crate) fn api_error(candidate: &str, e: ApiError) -> Error {
    Error::Api {
        what: format!("candidate {candidate:?}"),
        source: e,
    }
}

/// `<host>:<pid>:<start time>` of this process.
pub(crate) fn launcher_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let (pid, start) = crate::process::own_identity();
    format!("{host}:{pid}:{start}")
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Created {
    model: bool,
    config: bool,
    endpoint: bool,
}

impl Created {
    fn mark(&mut self, step: usize) {
        match step {
            0 => self.model = true,
            1 => self.config = true,
            _ => self.endpoint = true,
        }
    }
}

/// A SageMaker endpoint kneepoint created: its name, and how to delete it.
#[derive(Debug)]
pub struct SageMakerDeployment {
    name: String,
    resource_name: String,
    api: Arc<SageMakerApi>,
    created: Created,
    requests: Vec<Value>,
    launch_time: Duration,
    poll_interval: Duration,
    delete_wait: Duration,
}

impl SageMakerDeployment {
    /// Records that step `step` (model, configuration, endpoint) may exist.
    fn mark(&mut self, step: usize) {
        self.created.mark(step);
        if self.created.endpoint {
            crate::live::note_remote(&self.resource_name);
        }
    }

    /// The endpoint's (and its model's and configuration's) name.
    pub fn endpoint_name(&self) -> &str {
        &self.resource_name
    }

    /// How long it took to be `InService`.
    pub fn launch_time(&self) -> Duration {
        self.launch_time
    }

    /// Deletes what was created after `e` stopped the launch; `e`, or (when the deletion
    /// failed too) an error that says what may be left and how to remove it.
    async fn undo(&mut self, e: Error) -> Error {
        match self.delete().await {
            Ok(()) => e,
            Err(del) => Error::Stop {
                what: self.name.clone(),
                reason: format!(
                    "{e}; then deleting what was created failed ({del}): SageMaker endpoint {} may be left running; `kneepoint cleanup --sagemaker-region {}` deletes it",
                    self.resource_name,
                    self.api.region()
                ),
            },
        }
    }

    /// Deletes the endpoint, its configuration and its model (whatever of them exists),
    /// waiting first, when SageMaker refuses to delete an endpoint still being created or
    /// updated, until it is not (up to [`SageMakerDeployment::DELETE_WAIT`]). Idempotent: a
    /// resource already gone counts as deleted. Every deletion is tried; the first error is
    /// returned.
    pub async fn delete(&mut self) -> Result<(), Error> {
        let name = self.resource_name.clone();
        let mut first_error = None;
        if self.created.endpoint {
            match delete_endpoint(&self.api, &name, self.delete_wait, self.poll_interval).await {
                Ok(()) => {
                    self.created.endpoint = false;
                    crate::live::forget_remote(&name);
                }
                Err(e) => first_error = Some(api_error(&self.name, e)),
            }
        }
        if self.created.config {
            match delete_gone_ok(
                &self.api,
                "DeleteEndpointConfig",
                "EndpointConfigName",
                &name,
            )
            .await
            {
                Ok(()) => self.created.config = false,
                Err(e) => {
                    first_error.get_or_insert(api_error(&self.name, e));
                }
            }
        }
        if self.created.model {
            match delete_gone_ok(&self.api, "DeleteModel", "ModelName", &name).await {
                Ok(()) => self.created.model = false,
                Err(e) => {
                    first_error.get_or_insert(api_error(&self.name, e));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The longest wait for an endpoint being created before it can be deleted.
    pub const DELETE_WAIT: Duration = Duration::from_secs(3600);
}

/// `op` on the resource `name` (under `key`); a resource already gone counts as deleted.
pub(crate) async fn delete_gone_ok(
    api: &SageMakerApi,
    op: &str,
    key: &str,
    name: &str,
) -> Result<(), ApiError> {
    match api.call(op, &json!({ key: name })).await {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}

/// Deletes endpoint `name`; while SageMaker refuses because it is being created or updated,
/// asks again every `poll` for up to `wait`. An endpoint already gone counts as deleted.
pub(crate) async fn delete_endpoint(
    api: &SageMakerApi,
    name: &str,
    wait: Duration,
    poll: Duration,
) -> Result<(), ApiError> {
    let until = Instant::now() + wait;
    let mut was_busy = false;
    loop {
        let Err(e) = delete_gone_ok(api, "DeleteEndpoint", "EndpointName", name).await else {
            return Ok(());
        };
        let status = api
            .call("DescribeEndpoint", &json!({"EndpointName": name}))
            .await
            .ok()
            .and_then(|d| d["EndpointStatus"].as_str().map(str::to_owned));
        if status.as_deref() == Some("Deleting") {
            // An earlier attempt went through (its answer was lost).
            return Ok(());
        }
        // Only SageMaker's refusal of a busy endpoint is waited out; any other error is final.
        let busy = e.code.as_deref() == Some("ValidationException")
            && matches!(
                status.as_deref(),
                Some("Creating" | "Updating" | "SystemUpdating" | "RollingBack")
            );
        if !busy && was_busy {
            // It has just left the state that refused the delete: ask again at once.
            was_busy = false;
            continue;
        }
        if !busy || Instant::now() >= until {
            return Err(e);
        }
        was_busy = true;
        tokio::time::sleep(poll).await;
    }
}

#[async_trait::async_trait]
impl kneepoint_engine::Deployment for SageMakerDeployment {
    async fn teardown(&mut self) -> Result<(), kneepoint_engine::DeployError> {
        Ok(self.delete().await?)
    }

    fn recipe(&self) -> Option<Value> {
        let mut create_model = self.requests.first().cloned();
        if let Some(env) = create_model
            .as_mut()
            .and_then(|m| m["PrimaryContainer"]["Environment"].as_object_mut())
        {
            for (k, v) in env.iter_mut() {
                if kneepoint_core::secrets::name_is_secret(k) {
                    *v = json!("[redacted]");
                }
            }
        }
        Some(json!({
            "kind": "sagemaker",
            "endpoint_name": self.resource_name,
            "region": self.api.region(),
            "create_model": create_model,
            "create_endpoint_config": self.requests.get(1),
            "create_endpoint": self.requests.get(2),
        }))
    }

    fn launch_time(&self) -> Option<Duration> {
        Some(self.launch_time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_sagemaker_names_and_bodies_carry_the_settings() {
        let mut s = SageMakerSpec::new(
            "vllm max_num_seqs=64",
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.19.1-gpu",
            "ml.g5.12xlarge",
        );
        assert!(
            s.resource_name
                .starts_with("kneepoint-vllm-max-num-seqs-64-"),
            "{}",
            s.resource_name
        );
        assert!(s.resource_name.len() <= 63);
        s.env.insert("SM_VLLM_MAX_NUM_SEQS".into(), "64".into());
        s.startup_health_check_timeout_s = Some(1800);
        s.validate().unwrap();
        let [m, c, e] = s.requests();
        assert_eq!(
            m["PrimaryContainer"]["Environment"]["SM_VLLM_MAX_NUM_SEQS"],
            "64"
        );
        assert_eq!(c["ProductionVariants"][0]["InstanceType"], "ml.g5.12xlarge");
        assert_eq!(
            c["ProductionVariants"][0]["ContainerStartupHealthCheckTimeoutInSeconds"],
            1800
        );
        assert_eq!(e["EndpointConfigName"], s.resource_name);
        assert_eq!(e["Tags"][0]["Key"], LAUNCHER_TAG);
        let long = SageMakerSpec::new("x".repeat(200), "i", "ml.m5.xlarge");
        assert!(long.resource_name.len() <= 63);
        let mut bad = s.clone();
        bad.instance_type = "g5.12xlarge".into();
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("not a SageMaker instance type"));
        let mut bad = s.clone();
        bad.env.insert("1BAD".into(), "x".into());
        assert!(bad.validate().is_err());
    }
}
