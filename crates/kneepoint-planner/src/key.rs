//! The one name of a measured statistic: `metric:stat` (`time_to_first_token:p99`,
//! `error_rate:avg`), the form SLAs and [`crate::Measurement`] use. `metric_stat`, the form of
//! AIPerf's aggregate files and of `converge_on`, is read too and written by
//! [`StatKey::underscored`].

use kneepoint_core::{Metric, Stat};

use crate::sla::{Sla, LEVEL_METRICS, REQUEST_METRICS, STATS};
use crate::Error;

/// A metric and one of its statistics, both checked against the names levels measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StatKey {
    metric: Metric,
    stat: Stat,
}

impl StatKey {
    /// Parses `metric:stat` or `metric_stat`, refusing names no level measures (the message
    /// lists the valid ones).
    pub fn parse(key: &str) -> Result<Self, Error> {
        let key = key.trim();
        let (metric, stat) = match key.split_once(':') {
            Some((m, s)) => (m, s),
            None => key.rsplit_once('_').unwrap_or((key, "")),
        };
        let (metric, stat) = crate::sla::validate(key, metric, stat)?;
        Ok(StatKey { metric, stat })
    }

    /// The metric (`Metric::TimeToFirstToken`; its `name()` is `time_to_first_token`).
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The statistic (`Stat::Avg`, a percentile; its `label()` is `avg`, `p99`).
    pub fn stat(&self) -> Stat {
        self.stat
    }

    /// `metric_stat`, as AIPerf's aggregate files and `converge_on` name it.
    pub fn underscored(&self) -> String {
        format!("{}_{}", self.metric, self.stat)
    }

    /// Every valid key, `metric:stat`.
    pub fn all() -> Vec<String> {
        REQUEST_METRICS
            .iter()
            .flat_map(|m| STATS.iter().map(move |s| format!("{m}:{s}")))
            .chain(LEVEL_METRICS.iter().map(|m| format!("{m}:avg")))
            .collect()
    }
}

impl std::fmt::Display for StatKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.metric, self.stat)
    }
}

impl std::str::FromStr for StatKey {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StatKey::parse(s)
    }
}

impl Sla {
    /// The metric and statistic, typed (`None` only for a hand-edited SLA whose names no level
    /// measures: [`Sla::parse`] and the constructors refuse those).
    pub fn key(&self) -> Option<crate::StatKey> {
        self.metric.stats().contains(&self.stat).then_some(StatKey {
            metric: self.metric,
            stat: self.stat,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_name_the_same_statistic_and_typos_are_refused() {
        let a = StatKey::parse("time_to_first_token:p99").unwrap();
        let b = StatKey::parse("time_to_first_token_p99").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "time_to_first_token:p99");
        assert_eq!(a.underscored(), "time_to_first_token_p99");
        let k = StatKey::parse("error_rate_avg").unwrap();
        assert_eq!((k.metric(), k.stat()), (Metric::ErrorRate, Stat::Avg));
        let e = StatKey::parse("time_to_frist_token_p99")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean time_to_first_token?"), "{e}");
        let e = StatKey::parse("request_latency:p99.9")
            .unwrap_err()
            .to_string();
        assert!(e.contains("valid statistics"), "{e}");
        assert!(StatKey::all().contains(&"inter_token_latency:p50".to_owned()));
    }
}
