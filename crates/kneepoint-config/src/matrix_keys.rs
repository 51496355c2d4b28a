//! The keys of a candidate's matrix, checked against what its launch reads.

use crate::deploy_section::{Command, DeploySection};
use crate::error::bail;
use crate::Result;

/// Placeholders kneepoint fills itself for every launch: a matrix key cannot vary them.
const OWN_PLACEHOLDERS: [&str; 5] = ["port", "host", "name", "kneepoint", "gpu_ids"];

/// Whether the launch (its command, its Kubernetes command, its environment or a SageMaker
/// container's environment) reads `{key}`.
pub(crate) fn reads_placeholder(d: &DeploySection, key: &str) -> bool {
    let needle = format!("{{{key}}}");
    let mut texts: Vec<&str> = Vec::new();
    for command in [
        d.command.as_ref(),
        d.kubernetes.as_ref().and_then(|k| k.command.as_ref()),
    ]
    .into_iter()
    .flatten()
    {
        match command {
            Command::Argv(a) => texts.extend(a.iter().map(String::as_str)),
            Command::Line(l) => texts.push(l),
        }
    }
    texts.extend(d.env.values().map(String::as_str));
    texts.iter().any(|t| t.contains(&needle))
}

/// Refuses a matrix key the launch never reads (each of its values would launch the same
/// server under another label) or one kneepoint sets itself (`port`, `host`, `name`,
/// `kneepoint`).
pub(crate) fn unused_matrix_keys<'a>(
    name: &str,
    d: &DeploySection,
    keys: impl Iterator<Item = &'a String>,
) -> Result<()> {
    let mut templates: Vec<String> = Vec::new();
    for command in [
        d.command.as_ref(),
        d.kubernetes.as_ref().and_then(|k| k.command.as_ref()),
    ]
    .into_iter()
    .flatten()
    {
        match command {
            Command::Argv(a) => templates.extend(a.iter().cloned()),
            Command::Line(l) => templates.push(l.clone()),
        }
    }
    templates.extend(d.env.values().cloned());
    if let Some(sm) = &d.sagemaker {
        templates.extend(sm.environment.values().cloned());
    }
    let mut used = std::collections::BTreeSet::new();
    for t in &templates {
        // A malformed template is reported with its candidate's other checks.
        used.extend(kneepoint_deploy::placeholders(t).unwrap_or_default());
    }
    for key in keys {
        if OWN_PLACEHOLDERS.contains(&key.as_str()) {
            bail!("candidate {name:?}: matrix key {key:?} is set by kneepoint for every launch; drop it from the matrix");
        }
        if !used.contains(key) {
            bail!(
                "candidate {name:?}: matrix key {key:?} is not used by the deploy command or environment (no {{{key}}}): each of its values would launch the same server under another name; use {{{key}}} or drop the key"
            );
        }
    }
    Ok(())
}
