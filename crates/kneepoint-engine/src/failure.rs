//! A run in which no request succeeded is a failed run, whatever its latencies say: its reason
//! is the most common failure across its levels.

use std::collections::BTreeMap;

use kneepoint_metrics::LevelSummary;

/// `Some(reason)` when at least one request was recorded and none succeeded: the most common
/// failure (kind, status and message) and how many requests it took.
pub fn every_request_failed(summaries: &[LevelSummary]) -> Option<String> {
    let recorded: usize = summaries.iter().map(|s| s.request_count).sum();
    let ok: usize = summaries.iter().map(|s| s.ok_count).sum();
    if recorded == 0 || ok > 0 {
        return None;
    }
    let mut groups: BTreeMap<(String, Option<u16>, String), usize> = BTreeMap::new();
    for g in summaries.iter().flat_map(|s| &s.error_summary) {
        *groups
            .entry((g.kind.clone(), g.code, g.message.clone()))
            .or_default() += g.count;
    }
    let top = groups.into_iter().max_by_key(|(_, n)| *n);
    Some(match top {
        Some(((kind, code, message), n)) => format!(
            "all {recorded} requests failed; most often ({n} of them) {kind}{}: {message}",
            code.map(|c| format!(" {c}")).unwrap_or_default()
        ),
        None => format!("all {recorded} requests failed"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::{ErrorRecord, Phase, RequestRecord};
    use kneepoint_metrics::GoodputSlo;

    fn failed(id: u64, status: u16, msg: &str) -> RequestRecord {
        let mut r = RequestRecord::new(id, Phase::Profiling);
        r.end_ns = 1_000_000;
        r.error = Some(ErrorRecord::from(&kneepoint_core::Error::Status {
            status,
            body_excerpt: msg.into(),
            headers: Vec::new(),
        }));
        r
    }

    #[test]
    fn names_the_most_common_failure_and_stays_quiet_on_any_success() {
        let a = LevelSummary::from_records(
            1,
            &[failed(0, 401, "bad key"), failed(1, 401, "bad key")],
            &GoodputSlo::default(),
        );
        let b = LevelSummary::from_records(2, &[failed(2, 503, "busy")], &GoodputSlo::default());
        let why = every_request_failed(&[a.clone(), b]).unwrap();
        assert!(why.contains("all 3 requests failed"), "{why}");
        assert!(why.contains("2 of them") && why.contains("401"), "{why}");
        let mut ok = RequestRecord::new(9, Phase::Profiling);
        ok.chunk_ns = vec![10];
        ok.end_ns = 20;
        ok.output_tokens = Some(1);
        let c = LevelSummary::from_records(4, &[ok], &GoodputSlo::default());
        assert!(every_request_failed(&[a, c]).is_none());
        assert!(every_request_failed(&[]).is_none());
    }
}
