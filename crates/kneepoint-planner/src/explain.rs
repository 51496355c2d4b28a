//! Why the knee is where it is, from what the server reported at and beyond it: a full KV
//! cache, a queue in front of a full batch, preemptions, or none of these (the engine's step
//! time grows with the batch: compute; or the server never held the load: the client or the
//! network in front of it).

use kneepoint_core::ServerSummary;
use serde::{Deserialize, Serialize};

/// The cause named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KneeCause {
    /// The KV cache filled up and requests queued (or were preempted) for room.
    KvCacheFull,
    /// Running requests were preempted.
    Preemptions,
    /// The running batch was full (a sequence limit or token budget) and requests queued,
    /// with KV room to spare.
    BatchFull,
    /// Everything ran at once with no queue: each step slows as the batch grows.
    Compute,
    /// The server held far fewer requests than were in flight and queued none: the limit is
    /// in front of the engine (the client, the network, a proxy).
    ClientBound,
    /// No server metrics were scraped.
    NoServerData,
}

/// The explanation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KneeExplanation {
    /// The cause.
    pub cause: KneeCause,
    /// The level it was read at (the knee, or the highest level without a knee).
    pub at: Option<u32>,
    /// One sentence.
    pub summary: String,
    /// What the server showed at each level from `at` on.
    pub evidence: Vec<String>,
}

/// A KV cache at least this full is saturated (vLLM admits nothing more near 1).
pub const KV_FULL: f64 = 0.9;
/// A level whose server held fewer than this share of its requests on average, with no
/// queue, is limited in front of the engine.
pub const HELD_SHARE: f64 = 0.5;

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn evidence(c: u32, s: &ServerSummary) -> String {
    let mut parts = vec![format!("at {c}:")];
    if let (Some(avg), Some(max)) = (
        s.get("server_running", "avg"),
        s.get("server_running", "max"),
    ) {
        parts.push(format!("running {avg:.1} avg (max {max:.0})"));
    }
    if let Some(w) = s.get("server_waiting", "avg") {
        parts.push(format!("waiting {w:.1} avg"));
    }
    if let Some(kv) = s.get("server_kv_cache_usage", "max") {
        parts.push(format!("KV cache {} max", pct(kv)));
    }
    if let Some(p) = s.get("server_preemptions", "total") {
        parts.push(format!("{p:.0} preemptions"));
    }
    if let Some(q) = s.get("server_queue_time", "p95") {
        parts.push(format!("queue time p95 {q:.0} ms"));
    }
    parts.join(" ")
}

/// Explains the knee from the levels' server summaries (`(concurrency, summary)` in any
/// order; a level without one is skipped). `knee` is the knee's concurrency, if found.
pub fn explain_knee(
    levels: &[(u32, Option<&ServerSummary>)],
    knee: Option<u32>,
) -> KneeExplanation {
    let mut seen: Vec<(u32, &ServerSummary)> = levels
        .iter()
        .filter_map(|(c, s)| s.filter(|s| !s.is_empty()).map(|s| (*c, s)))
        .filter(|(_, s)| {
            ["server_running", "server_waiting", "server_kv_cache_usage"]
                .iter()
                .any(|k| s.concepts.contains_key(*k))
        })
        .collect();
    seen.sort_by_key(|(c, _)| *c);
    // Without a knee, the highest level run (scraped or not: an unscraped top level must not
    // make a lower one speak for it).
    let at = knee.or(levels.iter().map(|(c, _)| *c).max());
    let beyond: Vec<(u32, &ServerSummary)> = match at {
        Some(k) => seen.iter().copied().filter(|(c, _)| *c >= k).collect(),
        None => Vec::new(),
    };
    let Some(&(first_c, first)) = beyond.first() else {
        return KneeExplanation {
            cause: KneeCause::NoServerData,
            at,
            summary: "no server gauge (running, waiting, KV-cache usage) was sampled at or beyond the knee, so its cause is not known: the server publishes none, or those levels were shorter than the scrape interval (--server-metrics-interval)".into(),
            evidence: Vec::new(),
        };
    };
    let evidence_lines: Vec<String> = beyond.iter().map(|(c, s)| evidence(*c, s)).collect();
    let max_of = |k: &str, stat: &str| {
        beyond
            .iter()
            .filter_map(|(_, s)| s.get(k, stat))
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let kv_max = max_of("server_kv_cache_usage", "max");
    // A standing queue: waiting for most of the level (its median), not the brief queue of
    // requests that arrive during a step and are admitted at the next.
    let queued_at = beyond.iter().find(|(c, s)| {
        s.get("server_waiting", "p50")
            .is_some_and(|w| w >= (0.05 * f64::from(*c)).max(1.0))
    });
    let preempted_at = beyond.iter().find(|(_, s)| {
        s.get("server_preemptions", "total")
            .is_some_and(|p| p > 0.0)
    });
    let kv_full = kv_max.is_some_and(|kv| kv >= KV_FULL);
    let where_ = if knee.is_some() {
        format!("at the knee ({first_c}) and beyond")
    } else {
        format!("at the highest level ({first_c}; no knee was found)")
    };
    let (cause, summary) = if kv_full && (queued_at.is_some() || preempted_at.is_some()) {
        let queue = queued_at
            .and_then(|(c, s)| {
                s.get("server_waiting", "avg")
                    .map(|w| format!("; {w:.0} requests waited on average at {c}"))
            })
            .unwrap_or_default();
        (
            KneeCause::KvCacheFull,
            format!(
                "KV cache saturated {where_}: usage reached {}{queue}; more concurrency only queues (more KV memory, shorter contexts or another replica would raise the knee)",
                pct(kv_max.unwrap_or(1.0))
            ),
        )
    } else if let Some((c, s)) = preempted_at {
        (
            KneeCause::Preemptions,
            format!(
                "preemptions started {where_}: {:.0} at {c}; running requests lose their KV cache and are recomputed",
                s.get("server_preemptions", "total").unwrap_or(0.0)
            ),
        )
    } else if let Some((c, s)) = queued_at {
        let running = s
            .get("server_running", "max")
            .map_or(String::new(), |r| format!(" (at most {r:.0} running)"));
        let kv = kv_max.map_or(String::new(), |k| format!(", KV cache at most {}", pct(k)));
        (
            KneeCause::BatchFull,
            format!(
                "the running batch was full {where_}{running}: {:.0} requests waited on average at {c}{kv}; the engine's sequence limit or token budget caps it (raise max_num_seqs / max_num_batched_tokens if memory allows)",
                s.get("server_waiting", "avg").unwrap_or(0.0)
            ),
        )
    } else {
        let held = first.get("server_running", "avg");
        match held {
            Some(r) if r < HELD_SHARE * f64::from(first_c) => (
                KneeCause::ClientBound,
                format!(
                    "the server held only {r:.1} of {first_c} requests on average and queued none {where_}: the limit is in front of the engine (the client, the network or a proxy), not the server"
                ),
            ),
            _ => (
                KneeCause::Compute,
                format!(
                    "no queue, no preemption{} {where_}: every request ran at once, and each engine step slows as the batch grows (compute or memory bandwidth)",
                    kv_max.map_or(String::new(), |k| format!(", KV cache at most {}", pct(k)))
                ),
            ),
        }
    };
    KneeExplanation {
        cause,
        at,
        summary,
        evidence: evidence_lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(running: f64, waiting: f64, kv: f64, preemptions: f64) -> ServerSummary {
        let mut s = ServerSummary::default();
        s.set("server_running", "avg", running);
        s.set("server_running", "max", running);
        s.set("server_waiting", "avg", waiting);
        s.set("server_waiting", "p50", waiting);
        s.set("server_kv_cache_usage", "max", kv);
        s.set("server_preemptions", "total", preemptions);
        s
    }

    fn cause(levels: &[(u32, ServerSummary)], knee: Option<u32>) -> KneeCause {
        let v: Vec<(u32, Option<&ServerSummary>)> =
            levels.iter().map(|(c, s)| (*c, Some(s))).collect();
        explain_knee(&v, knee).cause
    }

    #[test]
    fn each_cause_is_named() {
        let kv = [(8, s(8.0, 0.0, 0.5, 0.0)), (32, s(20.0, 12.0, 0.97, 0.0))];
        assert_eq!(cause(&kv, Some(32)), KneeCause::KvCacheFull);
        let batch = [(64, s(64.0, 0.0, 0.3, 0.0)), (128, s(64.0, 60.0, 0.4, 0.0))];
        assert_eq!(cause(&batch, Some(64)), KneeCause::BatchFull);
        let compute = [(64, s(63.0, 0.0, 0.3, 0.0)), (128, s(127.0, 0.0, 0.5, 0.0))];
        assert_eq!(cause(&compute, Some(64)), KneeCause::Compute);
        // A brief queue (high mean, median zero) is not a standing one.
        let mut brief = s(120.0, 7.0, 0.01, 0.0);
        brief.set("server_waiting", "p50", 0.0);
        assert_eq!(cause(&[(128, brief)], Some(128)), KneeCause::Compute);
        let pre = [(64, s(60.0, 0.5, 0.8, 3.0))];
        assert_eq!(cause(&pre, Some(64)), KneeCause::Preemptions);
        let client = [(256, s(40.0, 0.0, 0.2, 0.0))];
        assert_eq!(cause(&client, Some(256)), KneeCause::ClientBound);
        assert_eq!(
            explain_knee(&[(8, None)], Some(8)).cause,
            KneeCause::NoServerData
        );
        // Levels below the knee do not count.
        let below = [(8, s(4.0, 30.0, 0.99, 0.0)), (64, s(63.0, 0.0, 0.3, 0.0))];
        assert_eq!(cause(&below, Some(64)), KneeCause::Compute);
        let e = explain_knee(&[(32, Some(&kv[1].1))], None);
        assert!(e.summary.contains("no knee was found"), "{}", e.summary);
        // The highest level had no gauge sample: the cause is not known, not read lower down.
        let top = explain_knee(
            &[(32, Some(&kv[1].1)), (64, Some(&ServerSummary::default()))],
            None,
        );
        assert_eq!((top.cause, top.at), (KneeCause::NoServerData, Some(64)));
        assert_eq!(e.evidence.len(), 1);
        assert!(
            e.evidence[0].contains("KV cache 97% max"),
            "{:?}",
            e.evidence
        );
    }
}
