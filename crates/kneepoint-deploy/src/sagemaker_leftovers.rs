//! What kneepoint created on SageMaker and a crashed run left: found by name (`kneepoint-*`)
//! and by the launcher tag, deleted in order (endpoints, configurations, models).

use std::time::Duration;

use kneepoint_transport::sagemaker::SageMakerApi;
use serde_json::json;

use crate::sagemaker::{
    api_error, delete_endpoint, delete_gone_ok, launcher_identity, LAUNCHER_TAG,
};
use crate::Error;

/// A SageMaker endpoint (or model, or endpoint configuration) kneepoint created and whose
/// launcher is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SageMakerLeftover {
    /// The resource's name.
    pub name: String,
    /// `endpoint`, `endpoint_config` or `model`.
    pub kind: &'static str,
    /// The launcher tag's value.
    pub launcher: String,
}

/// The `kneepoint-...` endpoints, endpoint configurations and models whose launcher tag names a
/// process of this host that is no longer running (`all_hosts`: every kneepoint-tagged one,
/// whoever launched it, unless its launcher is this host's and alive).
pub async fn find_sagemaker_leftovers(
    api: &SageMakerApi,
    all_hosts: bool,
) -> Result<Vec<SageMakerLeftover>, Error> {
    let host = launcher_identity();
    let host = host.split(':').next().unwrap_or_default().to_owned();
    let mut out = Vec::new();
    for (list, key, name_key, arn_key, kind) in [
        (
            "ListEndpoints",
            "Endpoints",
            "EndpointName",
            "EndpointArn",
            "endpoint",
        ),
        (
            "ListEndpointConfigs",
            "EndpointConfigs",
            "EndpointConfigName",
            "EndpointConfigArn",
            "endpoint_config",
        ),
        ("ListModels", "Models", "ModelName", "ModelArn", "model"),
    ] {
        let mut token: Option<String> = None;
        loop {
            let mut body = json!({"NameContains": "kneepoint-", "MaxResults": 100});
            if let Some(t) = &token {
                body["NextToken"] = json!(t);
            }
            let page = api
                .call(list, &body)
                .await
                .map_err(|e| api_error("cleanup", e))?;
            for item in page[key].as_array().cloned().unwrap_or_default() {
                let (Some(name), Some(arn)) = (item[name_key].as_str(), item[arn_key].as_str())
                else {
                    continue;
                };
                if !name.starts_with("kneepoint-") {
                    continue;
                }
                let tags = api
                    .call("ListTags", &json!({"ResourceArn": arn}))
                    .await
                    .map_err(|e| api_error("cleanup", e))?;
                let Some(launcher) = tags["Tags"].as_array().and_then(|t| {
                    t.iter()
                        .find(|t| t["Key"] == LAUNCHER_TAG)
                        .and_then(|t| t["Value"].as_str())
                        .map(str::to_owned)
                }) else {
                    continue;
                };
                let mut parts = launcher.splitn(3, ':');
                let (h, pid, start) = (parts.next(), parts.next(), parts.next());
                // Without /proc (not Linux) no launcher can be told dead: only --all-hosts
                // deletes, and never one of this host's.
                let here = h == Some(host.as_str());
                let alive = here
                    && (!std::path::Path::new("/proc/self/stat").exists()
                        || pid.and_then(|p| p.parse::<i32>().ok()).is_some_and(|p| {
                            crate::process::Stat::read(p)
                                .is_some_and(|s| Some(s.start.to_string().as_str()) == start)
                        }));
                if !alive && (all_hosts || h == Some(host.as_str())) {
                    out.push(SageMakerLeftover {
                        name: name.to_owned(),
                        kind,
                        launcher,
                    });
                }
            }
            token = page["NextToken"].as_str().map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
    }
    Ok(out)
}

/// Deletes `leftovers` (endpoints first, then configurations, then models); an endpoint still
/// being created is waited for (asked every `poll`, up to `wait`). The ones that could not be
/// deleted, with why. A resource already gone counts as deleted.
pub async fn remove_sagemaker_leftovers(
    api: &SageMakerApi,
    leftovers: &[SageMakerLeftover],
    wait: Duration,
    poll: Duration,
) -> Vec<(SageMakerLeftover, String)> {
    let mut failed = Vec::new();
    for kind in ["endpoint", "endpoint_config", "model"] {
        for l in leftovers.iter().filter(|l| l.kind == kind) {
            let done = match kind {
                "endpoint" => delete_endpoint(api, &l.name, wait, poll).await,
                "endpoint_config" => {
                    delete_gone_ok(api, "DeleteEndpointConfig", "EndpointConfigName", &l.name).await
                }
                _ => delete_gone_ok(api, "DeleteModel", "ModelName", &l.name).await,
            };
            if let Err(e) = done {
                failed.push((l.clone(), e.to_string()));
            }
        }
    }
    failed
}
