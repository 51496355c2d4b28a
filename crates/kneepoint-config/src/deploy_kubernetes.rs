//! A launched candidate as Kubernetes manifests (a Deployment and a Service) beside its local
//! launch, and the manifests written into a folder.

use std::path::Path;

#[cfg(feature = "kubernetes")]
use crate::command_line::split_line;
#[cfg(feature = "kubernetes")]
use crate::deploy_section::Command;
use crate::deploy_section::DeploySection;
use crate::error::bail;
use crate::expanded::Expanded;
use crate::Result;

/// Candidate `e` as Kubernetes manifests (a Deployment and a Service), when its deploy section
/// asks for them.
#[cfg(feature = "kubernetes")]
pub(crate) fn kubernetes(
    e: &Expanded,
    d: &DeploySection,
) -> Result<Option<Vec<serde_json::Value>>> {
    let Some(k) = &d.kubernetes else {
        return Ok(None);
    };
    let name = &e.section.name;
    let port = k.port.unwrap_or(8000);
    let mut values = e.values.clone();
    values.insert("port".into(), port.to_string());
    values.insert("host".into(), "0.0.0.0".into());
    values.insert("kneepoint".into(), "kneepoint".into());
    let template = match k.command.as_ref().or(d.command.as_ref()) {
        None => bail!("candidate {name:?}: [candidates.deploy.kubernetes] needs a command"),
        Some(Command::Argv(a)) => a.clone(),
        Some(Command::Line(l)) => split_line(l)
            .map_err(|why| crate::Error::Invalid(format!("candidate {name:?}: command: {why}")))?,
    };
    let command = template
        .iter()
        .map(|a| kneepoint_deploy::render(a, &values))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let env = d
        .env
        .iter()
        .map(|(k, v)| Ok((k.clone(), kneepoint_deploy::render(v, &values)?)))
        .collect::<Result<Vec<_>>>()?;
    let mut spec = kneepoint_deploy::KubeSpec::new(name.clone(), k.image.clone(), command);
    spec.env = env;
    spec.port = port;
    spec.ready_path = d.ready_path.clone().unwrap_or_else(|| "/v1/models".into());
    spec.gpus = k.gpus.unwrap_or_else(|| {
        let tp: u32 = values
            .get("tensor_parallel_size")
            .and_then(|v| v.parse().ok())
            .or(e.section.tensor_parallel)
            .unwrap_or(0);
        // every engine of the pod: tensor parallel × the engines it runs
        tp.saturating_mul(e.replicas.unwrap_or(1).max(1))
    });
    spec.replicas = e.section.instance_count.unwrap_or(1);
    spec.namespace = k.namespace.clone();
    Ok(Some(spec.manifests_json()?))
}

/// Without the `kubernetes` feature, a candidate that asks for manifests is refused.
#[cfg(not(feature = "kubernetes"))]
pub(crate) fn kubernetes(
    e: &Expanded,
    d: &DeploySection,
) -> Result<Option<Vec<serde_json::Value>>> {
    if d.kubernetes.is_some() {
        bail!(
            "candidate {:?}: this build writes no Kubernetes manifests: build kneepoint-config with its `kubernetes` feature",
            e.section.name
        );
    }
    Ok(None)
}

/// Writes the manifests as `dir/kubernetes/<kind>.json`, one object each (what `kubectl apply
/// -f dir/kubernetes/` reads).
pub(crate) fn write_manifests(dir: &Path, docs: &[serde_json::Value]) -> Result<()> {
    let out = dir.join("kubernetes");
    std::fs::create_dir_all(&out)
        .map_err(|e| crate::Error::Invalid(format!("creating {}: {e}", out.display())))?;
    for d in docs {
        let kind = d["kind"].as_str().unwrap_or("object").to_ascii_lowercase();
        let path = out.join(format!("{kind}.json"));
        let text = serde_json::to_string_pretty(d)
            .map_err(|e| crate::Error::Invalid(format!("serialising {kind}: {e}")))?;
        let text = kneepoint_core::secrets::scrub(&text).into_owned();
        std::fs::write(&path, text + "\n")
            .map_err(|e| crate::Error::Invalid(format!("writing {}: {e}", path.display())))?;
    }
    Ok(())
}
