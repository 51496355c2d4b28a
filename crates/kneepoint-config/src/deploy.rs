//! Candidates that kneepoint launches itself: `[candidates.deploy]` (a local server command
//! today), `[candidates.matrix]` (engine settings expanded into one candidate per
//! combination), checked before anything starts, and launched when each candidate's turn
//! comes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kneepoint_deploy::{LocalDeployment, LocalSpec};
use kneepoint_runner::CancelToken;

use crate::command_line::split_line;
pub(crate) use crate::deploy_kubernetes::{kubernetes, write_manifests};
use crate::deploy_section::{Command, DeploySection};
use crate::error::bail;
pub(crate) use crate::expanded::{seconds, Expanded};
use crate::file::CandidateSection;
use crate::Result;

/// At most this many combinations per candidate (each is launched and measured).
const MAX_COMBINATIONS: usize = 64;
/// At most this many launches in one recommendation, over every candidate: at minutes of
/// model loading each, more is weeks of instance time.
pub(crate) const MAX_LAUNCHES: usize = 256;

/// Every candidate with its matrix expanded (`name max_num_seqs=8 tensor_parallel_size=2`, in
/// the order the keys and values are given... keys sorted, values as listed), each checked as
/// far as it can be without starting anything.
pub(crate) fn expand(
    candidates: &[CandidateSection],
    objective: kneepoint_planner::Objective,
    gpus_of: &dyn Fn(&str) -> Option<u32>,
) -> Result<(Vec<Expanded>, Vec<String>)> {
    let mut out = Vec::new();
    let mut proposals = Vec::new();
    for c in candidates {
        let mut matrix = c.matrix.clone().unwrap_or_default();
        // Stage 2: settings the launch names and nothing gives, proposed by the objective.
        let (proposed, why) = crate::stage_two::propose(c, objective);
        matrix.extend(proposed);
        if !matrix.is_empty() && c.deploy.is_none() {
            bail!(
                "candidate {:?} has a matrix but no [candidates.deploy] to launch each combination with",
                c.name
            );
        }
        if let (Some(d), Some(given)) = (&c.deploy, &c.matrix) {
            crate::matrix_keys::unused_matrix_keys(&c.name, d, given.keys())?;
        }
        let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
        for (key, values) in &matrix {
            if values.is_empty() {
                bail!("candidate {:?}: matrix key {key:?} lists no values", c.name);
            }
            combos = combos
                .into_iter()
                .flat_map(|done| {
                    values.iter().map(move |v| {
                        let mut next = done.clone();
                        next.push((key.clone(), v.to_string()));
                        next
                    })
                })
                .collect();
            if combos.len() > MAX_COMBINATIONS {
                let proposed = if why.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (with what the objective proposed for settings nothing gives: {}; give them in `settings` to try fewer)",
                        why.join("; ")
                    )
                };
                bail!(
                    "candidate {:?}: the matrix makes more than {MAX_COMBINATIONS} combinations{proposed}; each one is launched and measured, so split it",
                    c.name
                );
            }
        }
        for combo in combos {
            let mut section = c.clone();
            if !combo.is_empty() {
                let label: Vec<String> = combo.iter().map(|(k, v)| format!("{k}={v}")).collect();
                section.name = format!("{} {}", c.name, label.join(" "));
            }
            let mut values: BTreeMap<String, String> = c
                .deploy
                .as_ref()
                .map(|d| {
                    d.settings
                        .iter()
                        .map(|(k, v)| (k.clone(), v.to_string()))
                        .collect()
                })
                .unwrap_or_default();
            for (k, v) in &combo {
                if values.insert(k.clone(), v.clone()).is_some() {
                    bail!(
                        "candidate {:?}: {k:?} is both a fixed setting and a matrix key",
                        c.name
                    );
                }
            }
            // The stage-1 fit follows a tensor-parallel degree from the matrix (vLLM's name
            // last, so that it wins, as it does in `EngineSettings::from_pairs`).
            for key in ["tensor_parallel", "tensor_parallel_size"] {
                if let Some(tp) = values.get(key).and_then(|v| v.parse().ok()) {
                    section.tensor_parallel = Some(tp);
                }
            }
            let gpus = section.instance_type.as_deref().and_then(gpus_of);
            let replicas = crate::parallelism::parallelism(&section, &mut values, gpus)?;
            values.insert("name".into(), section.name.clone());
            if let Ok(exe) = std::env::current_exe() {
                values.insert("kneepoint".into(), exe.display().to_string());
            }
            let e = Expanded {
                section,
                values,
                combination: combo,
                replicas,
            };
            if let Some(d) = &e.section.deploy {
                check(&e, d)?;
            }
            out.push(e);
        }
        proposals.extend(why);
        if out.iter().filter(|e| e.section.deploy.is_some()).count() > MAX_LAUNCHES {
            bail!(
                "the candidates make more than {MAX_LAUNCHES} launches in all (candidate {:?} and those before it); each one starts a server and measures it: split the recommendation or use fewer matrix values",
                c.name
            );
        }
    }
    Ok((out, proposals))
}

/// Checks a launched candidate's settings (its command's placeholders, its endpoint).
fn check(e: &Expanded, d: &DeploySection) -> Result<()> {
    let name = &e.section.name;
    let sagemaker = match d.kind.as_deref().unwrap_or("local") {
        "local" => false,
        "sagemaker" => true,
        other => bail!(
            "candidate {name:?}: deploy kind {other:?} is not known (local or sagemaker; Kubernetes is written as manifests beside a local candidate)"
        ),
    };
    if e.section
        .endpoint
        .as_ref()
        .is_some_and(|ep| ep.url.is_some())
    {
        bail!("candidate {name:?}: a launched candidate's URL is the server kneepoint starts; drop [candidates.endpoint] url");
    }
    if e.section.simulator.is_some() {
        bail!("candidate {name:?}: a launched candidate is not the built-in simulator; drop [candidates.simulator]");
    }
    if sagemaker {
        return check_sagemaker(e, d);
    }
    if d.sagemaker.is_some() {
        bail!("candidate {name:?}: [candidates.deploy.sagemaker] goes with kind = \"sagemaker\"");
    }
    local_spec(e, d, Path::new("."))?.validate()?;
    kubernetes(e, d)?;
    Ok(())
}

/// Checks a candidate launched as a SageMaker endpoint.
fn check_sagemaker(e: &Expanded, d: &DeploySection) -> Result<()> {
    let name = &e.section.name;
    if d.command.is_some() || d.kubernetes.is_some() || d.port.is_some() {
        bail!("candidate {name:?}: a SageMaker candidate runs its image on SageMaker: drop command, port and [candidates.deploy.kubernetes]");
    }
    if e.section
        .endpoint
        .as_ref()
        .is_some_and(|ep| ep.sagemaker_endpoint.is_some())
    {
        bail!("candidate {name:?}: the endpoint's name is the one kneepoint creates; drop [candidates.endpoint] sagemaker_endpoint");
    }
    let Some(s) = &d.sagemaker else {
        bail!("candidate {name:?}: kind = \"sagemaker\" needs [candidates.deploy.sagemaker] (image, environment...)");
    };
    #[cfg(feature = "sagemaker")]
    crate::deploy_sagemaker::spec(e, d, s)?;
    #[cfg(not(feature = "sagemaker"))]
    {
        let _ = s;
        bail!("candidate {name:?}: this build cannot launch SageMaker endpoints: build kneepoint-config with its `sagemaker` feature");
    }
    #[cfg(feature = "sagemaker")]
    Ok(())
}

/// Whether candidate `e` is launched as a SageMaker endpoint.
pub(crate) fn is_sagemaker(e: &Expanded) -> bool {
    e.section
        .deploy
        .as_ref()
        .is_some_and(|d| d.kind.as_deref() == Some("sagemaker"))
}

/// A launched candidate and its manifests: the server's teardown, a recipe with the
/// manifests beside the command line.
#[derive(Debug)]
pub(crate) struct Launched {
    pub server: LocalDeployment,
    pub kubernetes: Option<Vec<serde_json::Value>>,
}

#[async_trait::async_trait]
impl kneepoint_engine::Deployment for Launched {
    async fn teardown(&mut self) -> std::result::Result<(), kneepoint_engine::DeployError> {
        self.server.teardown().await
    }

    fn recipe(&self) -> Option<serde_json::Value> {
        let mut r = self.server.recipe()?;
        if let (Some(k), Some(obj)) = (&self.kubernetes, r.as_object_mut()) {
            obj.insert("kubernetes".into(), serde_json::Value::from(k.clone()));
        }
        Some(r)
    }

    fn launch_time(&self) -> Option<Duration> {
        Some(self.server.launch_time())
    }

    async fn exited(&mut self) -> Option<String> {
        self.server.exited().await
    }
}

/// The local launcher's settings for candidate `e`, logging under `dir/logs/`.
pub(crate) fn local_spec(e: &Expanded, d: &DeploySection, dir: &Path) -> Result<LocalSpec> {
    let name = &e.section.name;
    let argv = match &d.command {
        None => bail!("candidate {name:?}: [candidates.deploy] needs a command"),
        Some(Command::Argv(a)) => a.clone(),
        Some(Command::Line(l)) => split_line(l)
            .map_err(|why| crate::Error::Invalid(format!("candidate {name:?}: command: {why}")))?,
    };
    let mut s = LocalSpec::new(name.clone(), argv, dir.join("logs").join("server.log"));
    s.env = d.env.clone();
    s.pass_env = d.pass_env.clone();
    s.values = e.values.clone();
    if let Some(h) = &d.host {
        s.host = h.clone();
    }
    s.port = d.port;
    if let Some(p) = &d.ready_path {
        s.ready_path = p.clone();
    }
    if let Some(t) = d.ready_timeout_s {
        s.ready_timeout = seconds(name, "ready_timeout_s", t, LocalSpec::MAX_READY_TIMEOUT_S)?;
    }
    if let Some(t) = d.stop_grace_s {
        s.stop_grace = seconds(name, "stop_grace_s", t, LocalSpec::MAX_STOP_GRACE_S)?;
    }
    Ok(s)
}

/// Starts candidate `e`'s server in `dir` and waits until it answers.
pub(crate) async fn launch(
    e: &Expanded,
    dir: &Path,
    cancel: &CancelToken,
) -> Result<LocalDeployment> {
    let Some(d) = &e.section.deploy else {
        bail!("candidate {:?} has no [candidates.deploy]", e.section.name);
    };
    let spec = local_spec(e, d, dir)?;
    let fetcher = kneepoint_transport::Fetcher::new(&kneepoint_transport::ConnectOptions {
        proxy: kneepoint_transport::ProxySetting::Off,
        ..Default::default()
    })?;
    Ok(spec.launch(Arc::new(fetcher), cancel).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(toml_text: &str) -> Vec<CandidateSection> {
        #[derive(serde::Deserialize)]
        struct F {
            candidates: Vec<CandidateSection>,
        }
        toml::from_str::<F>(toml_text).unwrap().candidates
    }

    #[test]
    fn a_matrix_expands_into_one_checked_candidate_per_combination() {
        let c = candidate(
            r#"
            [[candidates]]
            name = "vllm"
            [candidates.deploy]
            command = "serve --port {port} --max-num-seqs {max_num_seqs} --tp {tensor_parallel_size} --model {model}"
            settings = { model = "tiny" }
            [candidates.matrix]
            max_num_seqs = [4, 16]
            tensor_parallel_size = [1, 2]
            "#,
        );
        let (e, _) = expand(&c, kneepoint_planner::Objective::Throughput, &|_| None).unwrap();
        let names: Vec<&str> = e.iter().map(|e| e.section.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "vllm max_num_seqs=4 tensor_parallel_size=1",
                "vllm max_num_seqs=4 tensor_parallel_size=2",
                "vllm max_num_seqs=16 tensor_parallel_size=1",
                "vllm max_num_seqs=16 tensor_parallel_size=2",
            ]
        );
        assert_eq!(e[1].values["max_num_seqs"], "4");
        assert_eq!(e[1].section.tensor_parallel, Some(2));
        assert_eq!(e[3].values["model"], "tiny");
        // what the adaptive strategy searches: the matrix alone, not the name, the fixed
        // settings or the binary's path
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(
            e[1].combination,
            [pair("max_num_seqs", "4"), pair("tensor_parallel_size", "2")]
        );
    }

    /// Issue 46 items 14 and 8: a matrix key the launch never reads, or one kneepoint sets,
    /// is refused by name; so is a recommendation of more launches than a person would pay.
    #[test]
    fn unused_matrix_keys_and_runaway_launch_counts_are_refused() {
        let err = |t: &str| {
            expand(
                &candidate(t),
                kneepoint_planner::Objective::Throughput,
                &|_| None,
            )
            .unwrap_err()
            .to_string()
        };
        let e = err(r#"
            [[candidates]]
            name = "a"
            [candidates.deploy]
            command = "serve --port {port} --max-num-seqs {max_num_seqs}"
            [candidates.matrix]
            max_num_seqs = [4, 16]
            dtype = ["fp16", "bf16"]
            "#);
        assert!(e.contains("\"dtype\"") && e.contains("not used"), "{e}");
        let e = err(r#"
            [[candidates]]
            name = "a"
            [candidates.deploy]
            command = "serve --port {port}"
            [candidates.matrix]
            port = [8000, 8001]
            "#);
        assert!(
            e.contains("\"port\"") && e.contains("set by kneepoint"),
            "{e}"
        );
        // Used in the environment only: accepted.
        let ok = r#"
            [[candidates]]
            name = "a"
            [candidates.deploy]
            command = "serve --port {port}"
            env = { VLLM_ATTENTION_BACKEND = "{backend}" }
            [candidates.matrix]
            backend = ["FLASH_ATTN", "XFORMERS"]
            "#;
        assert!(expand(
            &candidate(ok),
            kneepoint_planner::Objective::Throughput,
            &|_| None
        )
        .is_ok());
        // Five candidates of 64 combinations each: 320 launches.
        let one = r#"
            [[candidates]]
            name = "NAME"
            [candidates.deploy]
            command = "serve --port {port} --a {a} --b {b}"
            [candidates.matrix]
            a = [1, 2, 3, 4, 5, 6, 7, 8]
            b = [1, 2, 3, 4, 5, 6, 7, 8]
            "#;
        let many: String = (0..5)
            .map(|i| one.replace("NAME", &format!("c{i}")))
            .collect();
        let e = err(&many);
        assert!(e.contains("more than 256 launches"), "{e}");
    }

    #[test]
    fn launched_candidates_are_checked_before_anything_starts() {
        let err = |t: &str| {
            expand(
                &candidate(t),
                kneepoint_planner::Objective::Throughput,
                &|_| None,
            )
            .unwrap_err()
            .to_string()
        };
        let e = err(r#"
            [[candidates]]
            name = "a"
            [candidates.deploy]
            command = ["serve", "--tp", "{tensor_parallel_size}"]
            "#);
        assert!(e.contains("{tensor_parallel_size}"), "{e}");
        let e = err(r#"
            [[candidates]]
            name = "a"
            [candidates.matrix]
            max_num_seqs = [1]
            "#);
        assert!(e.contains("no [candidates.deploy]"), "{e}");
        let e = err(r#"
            [[candidates]]
            name = "a"
            [candidates.deploy]
            command = "serve {port}"
            [candidates.endpoint]
            url = "http://x"
            "#);
        assert!(e.contains("drop [candidates.endpoint] url"), "{e}");
        let e = err(r#"
            [[candidates]]
            name = "a"
            [candidates.deploy]
            kind = "helm"
            command = "x"
            "#);
        assert!(e.contains("\"helm\" is not known"), "{e}");
        let e = err(r#"
            [[candidates]]
            name = "a"
            [candidates.deploy]
            command = "x"
            ready_timeout_s = -1
            "#);
        assert!(e.contains("ready_timeout_s"), "{e}");
    }
}

#[cfg(test)]
#[cfg(feature = "sagemaker")]
mod sagemaker_tests {
    use crate::file::CandidateSection;

    fn expand(toml_text: &str) -> crate::Result<Vec<crate::expanded::Expanded>> {
        #[derive(serde::Deserialize)]
        struct F {
            candidates: Vec<CandidateSection>,
        }
        super::expand(
            &toml::from_str::<F>(toml_text).unwrap().candidates,
            kneepoint_planner::Objective::Cost,
            &|_| None,
        )
        .map(|(e, _)| e)
    }

    #[test]
    fn sagemaker_candidates_are_checked_before_anything_is_created() {
        let ok = expand(
            r#"
            [[candidates]]
            name = "sm"
            instance_type = "ml.g5.12xlarge"
            [candidates.deploy]
            kind = "sagemaker"
            [candidates.deploy.sagemaker]
            image = "vllm:latest"
            environment = { SM_VLLM_MAX_NUM_SEQS = "{max_num_seqs}" }
            [candidates.matrix]
            max_num_seqs = [8, 64]
            "#,
        )
        .unwrap();
        let e = &ok[1];
        let d = e.section.deploy.as_ref().unwrap();
        let spec = crate::deploy_sagemaker::spec(e, d, d.sagemaker.as_ref().unwrap()).unwrap();
        assert_eq!(spec.env["SM_VLLM_MAX_NUM_SEQS"], "64");
        let err = |t: &str| expand(t).unwrap_err().to_string();
        let e = err(r#"
            [[candidates]]
            name = "sm"
            instance_type = "ml.g5.12xlarge"
            [candidates.deploy]
            kind = "sagemaker"
            "#);
        assert!(e.contains("needs [candidates.deploy.sagemaker]"), "{e}");
        let e = err(r#"
            [[candidates]]
            name = "sm"
            [candidates.deploy]
            kind = "sagemaker"
            [candidates.deploy.sagemaker]
            image = "vllm:latest"
            "#);
        assert!(e.contains("needs its instance_type"), "{e}");
        let e = err(r#"
            [[candidates]]
            name = "sm"
            instance_type = "ml.g5.12xlarge"
            [candidates.deploy]
            kind = "sagemaker"
            command = "vllm serve"
            [candidates.deploy.sagemaker]
            image = "vllm:latest"
            "#);
        assert!(e.contains("drop command"), "{e}");
        let e = err(r#"
            [[candidates]]
            name = "sm"
            instance_type = "ml.g5.12xlarge"
            [candidates.deploy]
            kind = "sagemaker"
            [candidates.deploy.sagemaker]
            image = "vllm:latest"
            environment = { SM_VLLM_TP = "{tensor_parallel_size}" }
            "#);
        assert!(e.contains("{tensor_parallel_size}"), "{e}");
    }
}
