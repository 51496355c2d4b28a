//! The per-request SLOs a level's goodput and SLO miss rate are judged against.

use serde::{Deserialize, Serialize};

use crate::request_metrics::RequestMetrics;

/// Service-level objectives a request must meet to count towards goodput.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GoodputSlo {
    /// Maximum TTFT, ms.
    pub ttft_ms: Option<f64>,
    /// Maximum ITL, ms.
    pub itl_ms: Option<f64>,
    /// Maximum request latency, ms.
    pub request_latency_ms: Option<f64>,
}

impl GoodputSlo {
    /// True when no objective is set.
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none() && self.itl_ms.is_none() && self.request_latency_ms.is_none()
    }

    /// Reads AIPerf's `--goodput` form: `metric:limit` pairs separated by spaces or commas,
    /// limits in ms, e.g. `time_to_first_token:500 inter_token_latency:50`. The metrics a
    /// request can be held to are `time_to_first_token`, `inter_token_latency` and
    /// `request_latency`.
    pub fn parse(spec: &str) -> Result<Self, crate::Error> {
        let bad = |part: &str, reason: String| crate::Error::InvalidSlo {
            spec: part.to_owned(),
            reason,
        };
        let mut slo = GoodputSlo::default();
        for part in spec.split([' ', ',']).filter(|p| !p.trim().is_empty()) {
            let (name, limit) = part.split_once([':', '=']).ok_or_else(|| {
                bad(
                    part,
                    "write metric:limit_ms, e.g. time_to_first_token:500".into(),
                )
            })?;
            let limit: f64 = limit
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v > 0.0)
                .ok_or_else(|| {
                    bad(
                        part,
                        format!("the limit must be a positive number of ms, not {limit:?}"),
                    )
                })?;
            let field = match name.trim() {
                "time_to_first_token" | "ttft" => &mut slo.ttft_ms,
                "inter_token_latency" | "itl" | "tpot" => &mut slo.itl_ms,
                "request_latency" | "e2e" => &mut slo.request_latency_ms,
                other => {
                    return Err(bad(
                        part,
                        format!("{other:?} is not a per-request latency a request can be held to; use time_to_first_token, inter_token_latency or request_latency"),
                    ))
                }
            };
            if field.replace(limit).is_some() {
                return Err(bad(part, "this metric is given twice".into()));
            }
        }
        if slo.is_empty() {
            return Err(bad(spec, "give at least one metric:limit_ms".into()));
        }
        Ok(slo)
    }

    /// Whether a successful request met every objective. A TTFT or latency that was not
    /// measured misses its objective; an ITL that does not exist (one output token, or the
    /// whole answer in one chunk: no gap between tokens) cannot be too long and meets it.
    pub(crate) fn met_by(&self, m: &RequestMetrics) -> bool {
        let ok = |limit: Option<f64>, v: Option<f64>| match limit {
            None => true,
            Some(l) => v.is_some_and(|v| v <= l),
        };
        ok(self.ttft_ms, m.ttft_ms)
            && (m.itl_ms.is_none() || ok(self.itl_ms, m.itl_ms))
            && ok(self.request_latency_ms, m.request_latency_ms)
    }
}

impl std::fmt::Display for GoodputSlo {
    /// The form [`GoodputSlo::parse`] reads: `time_to_first_token:500 request_latency:8000`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts = [
            ("time_to_first_token", self.ttft_ms),
            ("inter_token_latency", self.itl_ms),
            ("request_latency", self.request_latency_ms),
        ];
        let mut first = true;
        for (name, limit) in parts {
            if let Some(l) = limit {
                write!(f, "{}{name}:{l}", if first { "" } else { " " })?;
                first = false;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_itl_meets_its_objective_and_a_missing_ttft_does_not() {
        let slo = GoodputSlo::parse("ttft:100 itl:10").unwrap();
        let m = |ttft: Option<f64>, itl: Option<f64>| RequestMetrics {
            ttft_ms: ttft,
            itl_ms: itl,
            request_latency_ms: Some(50.0),
            ..RequestMetrics::default()
        };
        assert!(slo.met_by(&m(Some(50.0), Some(5.0))));
        // one output token, or the whole answer in one chunk: no gap to be too long
        assert!(slo.met_by(&m(Some(50.0), None)));
        assert!(!slo.met_by(&m(Some(50.0), Some(11.0))));
        assert!(!slo.met_by(&m(None, Some(5.0))));
        assert!(!slo.met_by(&m(Some(150.0), None)));
    }

    #[test]
    fn goodput_slos_read_aiperf_s_form_and_refuse_what_no_request_can_meet() {
        let slo = GoodputSlo::parse(
            "time_to_first_token:500 inter_token_latency:50,request_latency=8000",
        )
        .unwrap();
        assert_eq!(slo.ttft_ms, Some(500.0));
        assert_eq!(slo.itl_ms, Some(50.0));
        assert_eq!(slo.request_latency_ms, Some(8000.0));
        assert_eq!(GoodputSlo::parse(&slo.to_string()).unwrap(), slo);
        for (bad, says) in [
            ("", "at least one"),
            ("time_to_first_token", "metric:limit"),
            ("time_to_first_token:-1", "positive number"),
            ("time_to_first_token:nan", "positive number"),
            ("output_sequence_length:10", "not a per-request latency"),
            ("ttft:1 time_to_first_token:2", "twice"),
        ] {
            let e = GoodputSlo::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
