//! A run's key figures, read from its answer and its levels.

use kneepoint_core::{Metric, Stat};
use kneepoint_metrics::LevelSummary;
use kneepoint_report::{Artifact, RunKind};
use serde_json::Value;

use serde::{Deserialize, Serialize};

/// The figures `history` prints: the run's answer at a glance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// The concurrency to operate at (a sweep's zone, a search's boundary, a
    /// recommendation's winner's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operate_at: Option<u32>,
    /// The knee (a sweep's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<u32>,
    /// Output tokens/s at the operating level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_token_throughput: Option<f64>,
    /// TTFT p95 at the operating level, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p95_ms: Option<f64>,
    /// End-to-end latency p99 at the operating level, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_p99_ms: Option<f64>,
    /// The highest output tokens/s of any level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_output_token_throughput: Option<f64>,
    /// The winner's cost per million output tokens (a recommendation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_million_output_tokens: Option<f64>,
    /// The winner (a recommendation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<String>,
}

/// The figures of run `a` whose levels are `levels` (concurrency, summary).
pub(crate) fn figures(a: &Artifact, levels: &[(u32, &LevelSummary)]) -> Figures {
    let doc = &a.doc;
    let u32_at = |p: &str| {
        doc.pointer(p)
            .and_then(Value::as_u64)
            .and_then(|v| u32::try_from(v).ok())
    };
    let mut f = Figures {
        peak_output_token_throughput: levels
            .iter()
            .map(|(_, s)| s.output_token_throughput)
            .filter(|v| v.is_finite())
            .reduce(f64::max),
        ..Figures::default()
    };
    match a.kind {
        RunKind::Sweep => {
            f.knee = u32_at("/knee/knee");
            f.operate_at = u32_at("/zone/ideal_balance").or_else(|| u32_at("/zone/safe_max"));
        }
        RunKind::Search => f.operate_at = u32_at("/boundary/feasible_max"),
        RunKind::Lengths => {}
        RunKind::Recommend => {
            // The winner; when nothing could be ranked (capacities only bounded), the first
            // candidate measured, whose figures stand but who is named no winner.
            let candidates = doc.get("candidates").and_then(Value::as_array);
            let ranked = candidates.and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("rank").and_then(Value::as_u64) == Some(1))
            });
            let measured = candidates.and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("point").is_some_and(|p| !p.is_null()))
            });
            if let Some(w) = ranked.or(measured) {
                f.winner = ranked
                    .and_then(|w| w.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                f.cost_per_million_output_tokens = w
                    .get("cost_per_million_output_tokens")
                    .and_then(Value::as_f64);
                let point = w.get("point");
                let at = |k: &str| point.and_then(|p| p.get(k)).and_then(Value::as_f64);
                f.operate_at = point
                    .and_then(|p| p.get("concurrency"))
                    .and_then(Value::as_u64)
                    .and_then(|v| u32::try_from(v).ok());
                f.output_token_throughput = at("output_token_throughput");
                f.e2e_p99_ms = at("e2e_p99_ms");
            }
            return f;
        }
    }
    // The operating level's own figures (the last level run at that concurrency).
    if let Some((_, s)) = f
        .operate_at
        .and_then(|c| levels.iter().rev().find(|(at, _)| *at == c))
    {
        f.output_token_throughput = Some(s.output_token_throughput);
        f.ttft_p95_ms = s.value(Metric::TimeToFirstToken, Stat::P95);
        f.e2e_p99_ms = s.value(Metric::RequestLatency, Stat::P99);
    }
    f
}
