//! Stage 2 without a matrix: when a launched candidate's command (or its SageMaker
//! environment) names an engine setting that neither `settings` nor the matrix gives, the
//! objective proposes values for it, as the recommendations article's stage 2 applies the
//! optimisations that suit the objective. Each proposal says why; the candidates it makes are
//! measured like any matrix's.

use std::collections::BTreeMap;

use kneepoint_planner::Objective;

use crate::deploy_section::{Command, DeploySection, Scalar};
use crate::file::CandidateSection;

/// One engine setting's proposed values for an objective, and why.
struct Rule {
    key: &'static str,
    cost: (&'static [&'static str], &'static str),
    latency: (&'static [&'static str], &'static str),
    throughput: (&'static [&'static str], &'static str),
}

/// The documented rules (docs/deployments.md, "Stage 2").
const RULES: &[Rule] = &[
    Rule {
        key: "max_num_seqs",
        cost: (&["64", "256"], "a moderate and a large batch: the cheaper one per token is the one that keeps latency within the SLAs"),
        latency: (&["16", "64"], "small batches: each decode step serves fewer sequences, so each token comes sooner"),
        throughput: (&["256", "512"], "large batches: more sequences per decode step carry more tokens/s per GPU"),
    },
    Rule {
        key: "max_num_batched_tokens",
        cost: (&["4096", "8192"], "prefill chunks that keep the GPU busy without stalling decodes"),
        latency: (&["2048"], "small prefill chunks: a long prompt delays the other sequences' tokens less"),
        throughput: (&["8192", "16384"], "large prefill chunks: fewer, fuller steps"),
    },
    Rule {
        key: "kv_cache_dtype",
        cost: (&["auto", "fp8"], "an fp8 KV cache holds about twice the sequences in the same memory"),
        latency: (&["auto"], "the model's own KV precision: no quantisation work per step"),
        throughput: (&["auto", "fp8"], "an fp8 KV cache holds about twice the sequences in the same memory"),
    },
    Rule {
        key: "gpu_memory_utilization",
        cost: (&["0.9"], "most of the memory for the KV cache, with room for activations"),
        latency: (&["0.9"], "most of the memory for the KV cache, with room for activations"),
        throughput: (&["0.95"], "as much memory as possible for the KV cache"),
    },
];

/// The placeholders candidate `c`'s launch names (command, environment, SageMaker
/// environment).
fn named(d: &DeploySection) -> Vec<String> {
    let mut texts: Vec<&str> = Vec::new();
    match &d.command {
        Some(Command::Argv(a)) => texts.extend(a.iter().map(String::as_str)),
        Some(Command::Line(l)) => texts.push(l),
        None => {}
    }
    texts.extend(d.env.values().map(String::as_str));
    if let Some(s) = &d.sagemaker {
        texts.extend(s.environment.values().map(String::as_str));
    }
    let mut out: Vec<String> = texts
        .iter()
        .filter_map(|t| kneepoint_deploy::placeholders(t).ok())
        .flatten()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The matrix entries the objective proposes for `c` (settings its launch names that nothing
/// gives), and one line per entry saying why.
pub(crate) fn propose(
    c: &CandidateSection,
    objective: Objective,
) -> (BTreeMap<String, Vec<Scalar>>, Vec<String>) {
    let mut matrix = BTreeMap::new();
    let mut why = Vec::new();
    let Some(d) = &c.deploy else {
        return (matrix, why);
    };
    let given = |k: &str| {
        d.settings.contains_key(k) || c.matrix.as_ref().is_some_and(|m| m.contains_key(k))
    };
    for key in named(d) {
        let Some(rule) = RULES.iter().find(|r| r.key == key) else {
            continue;
        };
        if given(&key) {
            continue;
        }
        let (values, reason) = match objective {
            Objective::Cost => rule.cost,
            Objective::Latency => rule.latency,
            _ => rule.throughput,
        };
        matrix.insert(
            key.clone(),
            values
                .iter()
                .map(|v| Scalar::Text((*v).to_owned()))
                .collect(),
        );
        why.push(format!(
            "candidate {:?}: {key} = {} proposed for {objective:?}: {reason}",
            c.name,
            values.join(", ")
        ));
    }
    (matrix, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_objective_fills_the_settings_nothing_gives() {
        #[derive(serde::Deserialize)]
        struct F {
            candidates: Vec<CandidateSection>,
        }
        let f: F = toml::from_str(
            r#"
            [[candidates]]
            name = "vllm"
            [candidates.deploy]
            command = "vllm serve m --max-num-seqs {max_num_seqs} --kv-cache-dtype {kv_cache_dtype} --port {port} --tp {tp}"
            settings = { tp = 2 }
            [candidates.matrix]
            kv_cache_dtype = ["auto"]
            "#,
        )
        .unwrap();
        let (m, why) = propose(&f.candidates[0], Objective::Latency);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["max_num_seqs"]);
        assert_eq!(
            m["max_num_seqs"],
            [Scalar::Text("16".into()), Scalar::Text("64".into())]
        );
        assert!(
            why[0].contains("max_num_seqs = 16, 64 proposed for Latency: small batches"),
            "{why:?}"
        );
        let (m, _) = propose(&f.candidates[0], Objective::Throughput);
        assert_eq!(
            m["max_num_seqs"],
            [Scalar::Text("256".into()), Scalar::Text("512".into())]
        );
    }
}
