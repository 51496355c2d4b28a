//! Data parallelism: the engines one instance runs, and the GPUs they span, as placeholders
//! of a candidate's launch (`{data_parallel_size}`, `{gpu_ids}`).

use std::collections::BTreeMap;

use crate::error::bail;
use crate::{CandidateSection, Result};

/// The placeholders of data parallelism: `data_parallel_size` (an instance of `gpus` GPUs runs
/// gpus / tensor-parallel engines unless the candidate pins it) and `gpu_ids` (`0,1,...`, the
/// GPUs the engines span). Returns the engines one instance runs: the value when the
/// candidate pins it or its launch reads `{data_parallel_size}` (or is not a local launch:
/// SageMaker's containers start one worker per tensor-parallel group), else one.
pub(crate) fn parallelism(
    section: &CandidateSection,
    values: &mut BTreeMap<String, String>,
    gpus: Option<u32>,
) -> Result<Option<u32>> {
    let name = &section.name;
    let tp = section.tensor_parallel.unwrap_or(1).max(1);
    let pinned = match values.get("data_parallel_size") {
        Some(v) => match v.parse::<u32>() {
            Ok(n) if n >= 1 => Some(n),
            _ => bail!("candidate {name:?}: data_parallel_size must be a whole number of engines of at least 1, not {v:?}"),
        },
        None => None,
    };
    if let Some(g) = gpus.filter(|g| tp > *g) {
        bail!("candidate {name:?}: tensor parallelism {tp} needs {tp} GPUs; its instance has {g}");
    }
    let dp = match (pinned, gpus) {
        (Some(n), Some(g)) if n.saturating_mul(tp) > g => bail!(
            "candidate {name:?}: {n} engines at tensor parallelism {tp} need {} GPUs; its instance has {g}",
            n.saturating_mul(tp)
        ),
        (Some(n), _) => n,
        (None, Some(g)) => (g / tp).max(1),
        (None, None) => 1,
    };
    values.insert("data_parallel_size".into(), dp.to_string());
    let ids: Vec<String> = (0..dp.saturating_mul(tp).min(1024))
        .map(|i| i.to_string())
        .collect();
    values.insert("gpu_ids".into(), ids.join(","));
    let Some(d) = &section.deploy else {
        return Ok(pinned.or(gpus.map(|_| dp)));
    };
    let local = d.kind.as_deref().unwrap_or("local") == "local";
    let reads = crate::matrix_keys::reads_placeholder(d, "data_parallel_size");
    Ok(match (local, pinned.is_some() || reads) {
        (true, false) => Some(1),
        _ if gpus.is_some() || pinned.is_some() => Some(dp),
        _ => None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn section(command: &str, tp: u32) -> CandidateSection {
        let text = format!(
            "name = \"v\"\ninstance_type = \"four\"\ntensor_parallel = {tp}\n[deploy]\ncommand = \"{command}\"\n"
        );
        toml::from_str(&text).unwrap()
    }

    /// Issue 58: an instance of g GPUs runs g / TP engines unless pinned; `{gpu_ids}` lists
    /// the GPUs they span; a local launch that does not read `{data_parallel_size}` runs one;
    /// a pin past the GPUs is refused.
    #[test]
    fn data_parallelism_fills_the_instance_unless_pinned() {
        let reads = "serve --tp {tensor_parallel_size} --dp {data_parallel_size}";
        for (tp, engines) in [(1, 4), (2, 2), (4, 1)] {
            let mut values = BTreeMap::new();
            let r = parallelism(&section(reads, tp), &mut values, Some(4)).unwrap();
            assert_eq!(r, Some(engines));
            assert_eq!(values["data_parallel_size"], engines.to_string());
            assert_eq!(values["gpu_ids"], "0,1,2,3");
        }
        // a command that runs one engine whatever the GPUs
        let mut values = BTreeMap::new();
        let r = parallelism(&section("serve --tp 1", 1), &mut values, Some(4)).unwrap();
        assert_eq!(r, Some(1));
        // pinned: 3 engines at TP 2 need 6 GPUs
        let mut values = BTreeMap::from([("data_parallel_size".to_owned(), "3".to_owned())]);
        let e = parallelism(&section(reads, 2), &mut values, Some(4))
            .unwrap_err()
            .to_string();
        assert!(e.contains("need 6 GPUs") && e.contains("has 4"), "{e}");
        // pinned within the GPUs: that many, the GPUs they span
        let mut values = BTreeMap::from([("data_parallel_size".to_owned(), "1".to_owned())]);
        let r = parallelism(&section(reads, 2), &mut values, Some(4)).unwrap();
        assert_eq!((r, values["gpu_ids"].as_str()), (Some(1), "0,1"));
    }
}
