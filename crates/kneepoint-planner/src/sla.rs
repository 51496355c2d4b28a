//! Service-level agreements and what a probe measured.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use kneepoint_core::metric::{labels, names};
use kneepoint_core::{Metric, Stat, StatKey};

use crate::Error;

/// How a measured value is compared with a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// value ≤ threshold.
    Le,
    /// value < threshold.
    Lt,
    /// value ≥ threshold.
    Ge,
    /// value > threshold.
    Gt,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "le" | "<=" => Op::Le,
            "lt" | "<" => Op::Lt,
            "ge" | ">=" => Op::Ge,
            "gt" | ">" => Op::Gt,
            _ => return None,
        })
    }

    fn symbol(self) -> &'static str {
        match self {
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Ge => ">=",
            Op::Gt => ">",
        }
    }
}

/// Per-request metrics an SLA can name (their distribution statistics are measured), in the
/// names of `profile_export_aiperf.json` (from [`Metric::PER_REQUEST`]).
pub const REQUEST_METRICS: [&str; Metric::PER_REQUEST.len()] = names(Metric::PER_REQUEST);

/// Level-wide metrics an SLA can name: one value per level, read as `avg` (from
/// [`Metric::PER_LEVEL`]).
pub const LEVEL_METRICS: [&str; 5] = names(Metric::PER_LEVEL);

/// The statistics measured for every per-request metric (from [`Stat::DISTRIBUTION`]).
pub const STATS: [&str; 13] = labels(Stat::DISTRIBUTION);

/// Rejects a metric or statistic that no level measures: such an SLA could only ever count as
/// breached. The message lists the valid names (and the closest one).
pub(crate) fn validate(sla: &str, metric: &str, stat: &str) -> Result<(Metric, Stat), Error> {
    let k = StatKey::from_names(metric, stat).map_err(|reason| Error::InvalidSla {
        sla: sla.to_owned(),
        reason,
    })?;
    Ok((k.metric(), k.stat()))
}

/// One SLA: `metric:stat op threshold`, e.g. `request_latency:p99 <= 50000`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sla {
    /// A short name for reports (`e2e_sla_ms`, or the general form as written).
    pub name: String,
    /// The metric (written by its kneepoint/AIPerf name, e.g. `time_to_first_token`, or
    /// `error_rate`).
    pub metric: Metric,
    /// The statistic (written `p95`, `p99`, `avg`, ...).
    pub stat: Stat,
    /// The comparison.
    pub op: Op,
    /// The threshold, in the metric's unit.
    pub threshold: f64,
}

impl Sla {
    /// `metric`'s `stat` compared with `op` to `threshold`, named `name` in reports (a
    /// statistic the metric does not have is refused).
    pub fn new(
        name: &str,
        metric: Metric,
        stat: Stat,
        op: Op,
        threshold: f64,
    ) -> Result<Sla, Error> {
        if !threshold.is_finite() {
            return Err(Error::InvalidSla {
                sla: name.to_owned(),
                reason: "the threshold must be a finite number".into(),
            });
        }
        if let Err(reason) = StatKey::from_names(metric.name(), stat.label()) {
            return Err(Error::InvalidSla {
                sla: name.to_owned(),
                reason,
            });
        }
        Ok(Sla {
            name: name.to_owned(),
            metric,
            stat,
            op,
            threshold,
        })
    }

    /// `ttft_sla_ms`: p95 time to first token ≤ `ms`.
    pub fn ttft_ms(ms: f64) -> Result<Sla, Error> {
        Self::new(
            "ttft_sla_ms",
            Metric::TimeToFirstToken,
            Stat::P95,
            Op::Le,
            ms,
        )
    }

    /// `tpot_sla_ms`: p95 inter-token latency ≤ `ms`.
    pub fn tpot_ms(ms: f64) -> Result<Sla, Error> {
        Self::new(
            "tpot_sla_ms",
            Metric::InterTokenLatency,
            Stat::P95,
            Op::Le,
            ms,
        )
    }

    /// `e2e_sla_ms`: p99 request latency ≤ `ms`.
    pub fn e2e_ms(ms: f64) -> Result<Sla, Error> {
        Self::new("e2e_sla_ms", Metric::RequestLatency, Stat::P99, Op::Le, ms)
    }

    /// `error_rate_sla`: mean error rate (a fraction) ≤ `fraction`.
    pub fn error_rate(fraction: f64) -> Result<Sla, Error> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(Error::InvalidSla {
                sla: "error_rate_sla".into(),
                reason: format!("must be a fraction between 0 and 1, not {fraction}"),
            });
        }
        Self::new(
            "error_rate_sla",
            Metric::ErrorRate,
            Stat::Avg,
            Op::Le,
            fraction,
        )
    }

    /// The general form `metric:stat:op:threshold`, e.g. `time_to_first_token:p99:le:800`
    /// (`op` is `le`, `lt`, `ge`, `gt` or `<=`, `<`, `>=`, `>`).
    pub fn parse(spec: &str) -> Result<Sla, Error> {
        let parts: Vec<&str> = spec.split(':').map(str::trim).collect();
        let bad = |reason: &str| Error::InvalidSla {
            sla: spec.to_owned(),
            reason: reason.to_owned(),
        };
        let [metric, stat, op, threshold] = parts.as_slice() else {
            return Err(bad("expected metric:stat:op:threshold"));
        };
        if metric.is_empty() || stat.is_empty() {
            return Err(bad("metric and stat must not be empty"));
        }
        let op = Op::parse(op).ok_or_else(|| bad("op must be le, lt, ge or gt"))?;
        let threshold: f64 = threshold
            .parse()
            .map_err(|_| bad("the threshold must be a number"))?;
        let (metric, stat) = validate(spec, metric, stat)?;
        Self::new(spec, metric, stat, op, threshold)
    }

    /// True when the metric only exists for streamed responses.
    pub fn requires_streaming(&self) -> bool {
        self.metric.streaming_only()
    }

    /// The relative margin of `value`: ≥ 0 when the SLA holds (for strict ops, > 0), negative
    /// when breached; `(threshold − value) / |threshold|` for upper limits.
    pub fn margin(&self, value: f64) -> f64 {
        let scale = if self.threshold.abs() > f64::EPSILON {
            self.threshold.abs()
        } else {
            1.0
        };
        match self.op {
            Op::Le | Op::Lt => (self.threshold - value) / scale,
            Op::Ge | Op::Gt => (value - self.threshold) / scale,
        }
    }

    /// Whether `value` satisfies the SLA.
    pub fn holds(&self, value: f64) -> bool {
        match self.op {
            Op::Le => value <= self.threshold,
            Op::Lt => value < self.threshold,
            Op::Ge => value >= self.threshold,
            Op::Gt => value > self.threshold,
        }
    }
}

impl std::fmt::Display for Sla {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} {}",
            self.metric,
            self.stat,
            self.op.symbol(),
            self.threshold
        )
    }
}

/// What one probe measured: any `metric:stat` values the SLAs need, and the output throughput.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Output tokens per second at the probe.
    pub throughput: f64,
    /// Values keyed `metric:stat` (e.g. `request_latency:p99`, `error_rate:avg`).
    pub values: BTreeMap<StatKey, f64>,
    /// The relative standard error of a value, keyed like `values` (e.g. 0.03: the value is
    /// known to about 3 %), where the caller estimated one (a bootstrap over the level's
    /// requests); the search spends repeat probes where this noise straddles a threshold.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spread: BTreeMap<StatKey, f64>,
    /// Why the client, not the server, may have shaped this measurement (its own CPU or
    /// scheduling lag); `None` when the client kept up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_limited: Option<String>,
}

impl Measurement {
    /// A measurement with throughput only.
    pub fn new(throughput: f64) -> Self {
        Measurement {
            throughput,
            values: BTreeMap::new(),
            spread: BTreeMap::new(),
            client_limited: None,
        }
    }

    /// Adds the relative standard error of `metric`'s `stat` (builder style); a value that is
    /// not finite and positive is ignored.
    pub fn with_spread(mut self, metric: Metric, stat: Stat, relative_se: f64) -> Self {
        if relative_se.is_finite() && relative_se > 0.0 {
            self.spread.insert(StatKey::new(metric, stat), relative_se);
        }
        self
    }

    /// The relative standard error of a value, if the caller gave one.
    pub fn spread(&self, metric: Metric, stat: Stat) -> Option<f64> {
        self.spread.get(&StatKey::new(metric, stat)).copied()
    }

    /// Adds a value (builder style): `metric`'s `stat`, typed, so that no misspelt name can
    /// slip in (a statistic the metric does not have is stored all the same, and no SLA
    /// reads it).
    pub fn with(mut self, metric: Metric, stat: Stat, value: f64) -> Self {
        self.values.insert(StatKey::new(metric, stat), value);
        self
    }

    /// A value, if measured.
    pub fn value(&self, metric: Metric, stat: Stat) -> Option<f64> {
        self.values.get(&StatKey::new(metric, stat)).copied()
    }
}

/// One SLA checked at one probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlaCheck {
    /// The SLA's name.
    pub sla: String,
    /// The SLA's metric.
    pub metric: Metric,
    /// The SLA's statistic.
    pub stat: Stat,
    /// The threshold.
    pub threshold: f64,
    /// The measured value (None when the metric was not measured, e.g. every request failed).
    pub value: Option<f64>,
    /// Relative margin (≥ 0 holds).
    pub margin: Option<f64>,
    /// Whether the SLA held.
    pub holds: bool,
    /// The value's relative standard error, when the measurement gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
}

/// Checks every SLA against `m`. A metric that was not measured (e.g. every request failed)
/// counts as a breach.
pub fn check_all(slas: &[Sla], m: &Measurement) -> Vec<SlaCheck> {
    slas.iter()
        .map(|s| {
            let value = m.value(s.metric, s.stat).filter(|v| v.is_finite());
            SlaCheck {
                sla: s.name.clone(),
                metric: s.metric,
                stat: s.stat,
                threshold: s.threshold,
                value,
                margin: value.map(|v| s.margin(v)),
                holds: value.is_some_and(|v| s.holds(v)),
                spread: m.spread(s.metric, s.stat),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_slas_and_margins() {
        let e2e = Sla::e2e_ms(50_000.0).unwrap();
        assert_eq!((e2e.metric, e2e.stat), (Metric::RequestLatency, Stat::P99));
        // Written by name, read back by name.
        let json = serde_json::to_string(&e2e).unwrap();
        assert!(
            json.contains(r#""metric":"request_latency","stat":"p99""#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Sla>(&json).unwrap(), e2e);
        let typo = json.replace("request_latency", "request_latncy");
        let e = serde_json::from_str::<Sla>(&typo).unwrap_err().to_string();
        assert!(e.contains("did you mean request_latency?"), "{e}");
        assert!(!e2e.requires_streaming());
        assert!((e2e.margin(40_000.0) - 0.2).abs() < 1e-12);
        assert!(e2e.holds(50_000.0) && !e2e.holds(50_001.0));
        let ttft = Sla::ttft_ms(1500.0).unwrap();
        assert!(ttft.requires_streaming());
        assert_eq!(
            Sla::tpot_ms(50.0).unwrap().metric,
            Metric::InterTokenLatency
        );
        assert!(Sla::error_rate(1.5).is_err());
        assert_eq!(Sla::error_rate(0.01).unwrap().stat, Stat::Avg);
    }

    #[test]
    fn general_form() {
        let s = Sla::parse("output_token_throughput_per_user:p50:ge:20").unwrap();
        assert_eq!(s.op, Op::Ge);
        assert!(s.holds(25.0) && !s.holds(19.0));
        assert!((s.margin(30.0) - 0.5).abs() < 1e-12);
        assert_eq!(Sla::parse("request_latency:p90:<:100").unwrap().op, Op::Lt);
        for bad in [
            "a:b:c",
            "a:p9:xx:1",
            "a:p9:le:abc",
            ":p9:le:1",
            "a:p9:le:inf",
        ] {
            assert!(Sla::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(s.to_string(), "output_token_throughput_per_user p50 >= 20");
    }

    #[test]
    fn slas_on_server_metrics() {
        let s = Sla::parse("server_kv_cache_usage:max:<:0.9").unwrap();
        assert!(s.holds(0.85) && !s.holds(0.95));
        assert!(!s.requires_streaming());
        assert!(Sla::parse("server_ttft:p95:le:500").is_ok());
        assert!(Sla::parse("gpu_power:avg:le:700").is_ok());
        let e = Sla::parse("server_preemptions:p99:le:1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("total, rate"), "{e}");
        let e = Sla::parse("server_kv_usage:max:le:1")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("did you mean server_kv_cache_usage?")
                || e.contains("server_kv_cache_usage"),
            "{e}"
        );
    }

    #[test]
    fn misspelt_metrics_and_stats_are_refused_with_the_valid_names() {
        let e = Sla::parse("request_latncy:p99:le:100")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown metric \"request_latncy\""), "{e}");
        assert!(e.contains("did you mean request_latency?"), "{e}");
        for name in REQUEST_METRICS.iter().chain(LEVEL_METRICS.iter()) {
            assert!(e.contains(name), "{name} missing from: {e}");
        }
        let e = Sla::parse("request_latency:p99.9:le:100")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown statistic \"p99.9\""), "{e}");
        assert!(e.contains("p95, p99"), "{e}");
        let e = Sla::parse("request_latency:mean:le:100")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean avg?"), "{e}");
        // the closest of the metric's own statistics, never a server-only one
        let e = Sla::parse("request_latency:totl:le:1")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("did you mean total"), "{e}");
        let e = Sla::parse("request_latency:p98:le:1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean p90?"), "{e}");
        let e = Sla::parse("ttft:p95:le:100").unwrap_err().to_string();
        assert!(e.contains("unknown metric \"ttft\""), "{e}");
        let e = Sla::parse("error_rate:p99:le:0.1").unwrap_err().to_string();
        assert!(e.contains("its statistic is avg"), "{e}");
        assert!(Sla::parse("error_rate:avg:le:0.1").is_ok());
        assert!(Sla::parse("request_throughput:avg:ge:5").is_ok());
    }

    #[test]
    fn measurement_lookup() {
        let m = Measurement::new(10.0).with(Metric::RequestLatency, Stat::P99, 5.0);
        assert_eq!(m.value(Metric::RequestLatency, Stat::P99), Some(5.0));
        assert_eq!(m.value(Metric::RequestLatency, Stat::P50), None);
        let json = serde_json::to_string(&m).unwrap();
        assert!(
            json.contains(r#""values":{"request_latency:p99":5.0}"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Measurement>(&json).unwrap(), m);
    }
}
