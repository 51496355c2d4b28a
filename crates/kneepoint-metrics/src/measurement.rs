//! A level's summary as the planner reads it: every statistic keyed `metric:stat`, plus the
//! level-wide values (error rate, request and output token throughput) that are fields of
//! [`LevelSummary`] rather than metrics.

use kneepoint_core::{Metric, Stat};
use kneepoint_planner::Measurement;

use crate::LevelSummary;

impl From<&LevelSummary> for Measurement {
    fn from(s: &LevelSummary) -> Self {
        let mut m = Measurement::new(s.output_token_throughput);
        for (&metric, ms) in &s.metrics {
            for stat in Stat::DISTRIBUTION {
                if let Some(v) = ms.stats.get(stat.label()) {
                    m = m.with(metric, stat, v);
                }
            }
        }
        if let Some(server) = &s.server {
            for (concept, stats) in &server.concepts {
                let Ok(metric) = concept.parse::<Metric>() else {
                    continue;
                };
                for (stat, v) in stats {
                    if let Ok(stat) = stat.parse::<Stat>() {
                        m = m.with(metric, stat, *v);
                    }
                }
            }
        }
        for (key, i) in &s.intervals {
            m = m.with_spread(key.metric(), key.stat(), i.relative_se);
        }
        if let (Some(g), Some(miss)) = (s.goodput, s.slo_miss_rate) {
            m = m
                .with(Metric::Goodput, Stat::Avg, g)
                .with(Metric::SloMissRate, Stat::Avg, miss);
        }
        m.client_limited = s.client.as_ref().and_then(|c| c.client_limited.clone());
        m.with(Metric::ErrorRate, Stat::Avg, s.error_rate)
            .with(Metric::RequestThroughput, Stat::Avg, s.request_throughput)
            .with(
                Metric::OutputTokenThroughput,
                Stat::Avg,
                s.output_token_throughput,
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PERCENTILES;
    use kneepoint_planner::{check_all, Sla, StatKey, STATS};

    #[test]
    fn every_measured_key_is_a_metric_an_sla_can_name() {
        for (label, _) in PERCENTILES {
            assert!(STATS.contains(&label), "{label}");
        }
        let s = crate::summary::tests::sample_summary();
        assert!(s.metrics.keys().all(|m| Metric::PER_REQUEST.contains(m)));
        let m = Measurement::from(&s);
        for key in m.values.keys() {
            let ok = StatKey::measured(key.metric(), key.stat()).is_some();
            assert!(ok, "{key} is measured but no SLA could name it");
        }
    }

    #[test]
    fn error_rate_and_throughput_slas_hold_through_the_conversion() {
        let s = crate::summary::tests::sample_summary();
        assert!(s.error_rate > 0.0 && s.request_throughput > 0.0);
        let m = Measurement::from(&s);
        let holds = |spec: &str| check_all(&[Sla::parse(spec).unwrap()], &m)[0].holds;
        assert!(holds(&format!("error_rate:avg:le:{}", s.error_rate)));
        assert!(!holds(&format!("error_rate:avg:lt:{}", s.error_rate)));
        assert!(check_all(&[Sla::error_rate(1.0).unwrap()], &m)[0].holds);
        let rps = s.request_throughput;
        assert!(holds(&format!("request_throughput:avg:ge:{}", rps * 0.99)));
        assert!(!holds(&format!("request_throughput:avg:ge:{}", rps * 1.01)));
        let tps = s.output_token_throughput;
        assert!(holds(&format!(
            "output_token_throughput:avg:ge:{}",
            tps * 0.99
        )));
        assert!(holds("time_to_first_token:p95:le:1e9"));
    }
}
