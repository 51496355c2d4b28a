//! The one name of a measured statistic: a [`Metric`] and one of its [`Stat`]s, written
//! `metric:stat` (`time_to_first_token:p99`, `error_rate:avg`) in SLAs, summaries and
//! measurements. `metric_stat`, the form of AIPerf's aggregate files and of `converge_on`, is
//! read too and written by [`StatKey::underscored`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::metric::closest;
use crate::{Metric, Stat, UnknownMetric, UnknownStat};

/// A metric and one of its statistics: the key of a level's intervals, of a measurement's
/// values and of an SLA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StatKey {
    metric: Metric,
    stat: Stat,
}

impl StatKey {
    /// `metric`'s `stat`. Both are typed, so no misspelt name can be made; whether the metric
    /// has that statistic is [`StatKey::measured`]'s question.
    pub const fn new(metric: Metric, stat: Stat) -> Self {
        StatKey { metric, stat }
    }

    /// `metric`'s `stat` when a level measures that statistic of it (`None` for, say,
    /// `error_rate:p99`).
    pub fn measured(metric: Metric, stat: Stat) -> Option<Self> {
        metric
            .stats()
            .contains(&stat)
            .then_some(StatKey { metric, stat })
    }

    /// Parses `metric:stat` or `metric_stat`, refusing names no level measures (the message
    /// says the closest valid name, or the metric's own statistics).
    pub fn parse(key: &str) -> Result<Self, InvalidStatKey> {
        let key = key.trim();
        let (metric, stat) = match key.split_once(':') {
            Some((m, s)) => (m, s),
            None => key.rsplit_once('_').unwrap_or((key, "")),
        };
        StatKey::from_names(metric, stat).map_err(|reason| InvalidStatKey {
            key: key.to_owned(),
            reason,
        })
    }

    /// The metric named `metric` and its statistic named `stat`, or why not (the closest
    /// valid name, or the metric's own statistics).
    pub fn from_names(metric: &str, stat: &str) -> Result<Self, String> {
        let m: Metric = metric.parse().map_err(|e: UnknownMetric| e.to_string())?;
        let parsed: Result<Stat, UnknownStat> = stat.parse();
        if parsed.is_err() && (m.per_level() || matches!(m, Metric::Server(_))) {
            // A name outside the general list, for a metric with statistics of its own.
            return Err(wrong_stat(m, stat));
        }
        // A misspelt statistic: the closest of this metric's own (not a server-only one).
        let s = parsed.map_err(|mut e| {
            if e.closest != Some("avg") {
                e.closest = closest(stat, m.stats().iter().map(|s| s.label()));
            }
            e.to_string()
        })?;
        StatKey::measured(m, s).ok_or_else(|| wrong_stat(m, stat))
    }

    /// The metric (`Metric::TimeToFirstToken`; its `name()` is `time_to_first_token`).
    pub const fn metric(&self) -> Metric {
        self.metric
    }

    /// The statistic (`Stat::Avg`, a percentile; its `label()` is `avg`, `p99`).
    pub const fn stat(&self) -> Stat {
        self.stat
    }

    /// `metric_stat`, as AIPerf's aggregate files and `converge_on` name it.
    pub fn underscored(&self) -> String {
        format!("{}_{}", self.metric, self.stat)
    }

    /// Every key an SLA may name on the client's side: each per-request metric's distribution
    /// statistics and each level-wide metric's `avg`, in report order.
    pub fn all() -> impl Iterator<Item = StatKey> {
        Metric::PER_REQUEST
            .into_iter()
            .flat_map(|m| Stat::DISTRIBUTION.map(|s| StatKey::new(m, s)))
            .chain(Metric::PER_LEVEL.map(|m| StatKey::new(m, Stat::Avg)))
    }
}

/// Why `stat` is not one of `m`'s statistics.
fn wrong_stat(m: Metric, stat: &str) -> String {
    let valid = m
        .stats()
        .iter()
        .map(|s| s.label())
        .collect::<Vec<_>>()
        .join(", ");
    match m {
        Metric::Server(_) => {
            format!("{m} (scraped from the server) has the statistics {valid}, not {stat:?}")
        }
        _ if m.per_level() => {
            format!("{m} is one value per level: its statistic is avg, not {stat:?}")
        }
        _ => format!("{m} has the statistics {valid}, not {stat:?}"),
    }
}

/// A `metric:stat` that names no statistic a level measures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid statistic {key:?}: {reason}")]
pub struct InvalidStatKey {
    /// The key as written.
    pub key: String,
    /// Why it was rejected (with the closest valid name, where one is near).
    pub reason: String,
}

impl fmt::Display for StatKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.metric, self.stat)
    }
}

impl FromStr for StatKey {
    type Err = InvalidStatKey;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StatKey::parse(s)
    }
}

// In files a key is its `metric:stat` string (also as a map key). Reading one back takes any
// typed pair, so a file written with a statistic kneepoint no longer lists still reads.
impl Serialize for StatKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StatKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let text = String::deserialize(d)?;
        let (m, s) = text
            .split_once(':')
            .ok_or_else(|| D::Error::custom(format!("{text:?} is not metric:stat")))?;
        let metric: Metric = m.parse().map_err(D::Error::custom)?;
        let stat: Stat = s.parse().map_err(D::Error::custom)?;
        Ok(StatKey::new(metric, stat))
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
        assert_eq!(a, StatKey::new(Metric::TimeToFirstToken, Stat::P99));
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
        let e = StatKey::parse("error_rate:p99").unwrap_err().to_string();
        assert!(e.contains("one value per level"), "{e}");
        assert!(StatKey::all().any(|k| k.to_string() == "inter_token_latency:p50"));
        assert_eq!(StatKey::measured(Metric::ErrorRate, Stat::P99), None);
    }

    #[test]
    fn a_key_is_its_string_in_files_and_as_a_map_key() {
        let k = StatKey::new(Metric::RequestLatency, Stat::P99);
        let map = std::collections::BTreeMap::from([(k, 1.5)]);
        let json = serde_json::to_string(&map).unwrap();
        assert_eq!(json, r#"{"request_latency:p99":1.5}"#);
        let back: std::collections::BTreeMap<StatKey, f64> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, map);
        let e = serde_json::from_str::<StatKey>(r#""request_latncy:p99""#).unwrap_err();
        assert!(
            e.to_string().contains("did you mean request_latency?"),
            "{e}"
        );
        assert!(serde_json::from_str::<StatKey>(r#""request_latency""#).is_err());
    }
}
