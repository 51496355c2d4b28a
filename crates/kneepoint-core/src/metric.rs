//! The identity of every measured quantity: [`Metric`] (what is measured) and [`Stat`] (which
//! statistic of it), the one table of their names, labels and units. The per-request metrics'
//! names are AIPerf's (`profile_export_aiperf.json`); the server's are the concepts of
//! [`crate::server`]. Strings are parsed once, at the edge ([`std::str::FromStr`], with the
//! closest valid name in the error); the planner, the metrics and the reports share these
//! tables instead of keeping their own lists.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::percentile::Percentile;

/// A measured quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Metric {
    /// Time to the first generated token (reasoning included), ms.
    TimeToFirstToken,
    /// Time to the first answer token (after any reasoning), ms.
    TimeToFirstOutputToken,
    /// Time from the first token to the second, ms.
    TimeToSecondToken,
    /// End-to-end request latency, ms.
    RequestLatency,
    /// Until the response stream closed, ms.
    StreamEndLatency,
    /// Mean gap between tokens after the first, per request, ms.
    InterTokenLatency,
    /// Every gap between chunks, ms.
    InterChunkLatency,
    /// Tokens per second one user sees.
    OutputTokenThroughputPerUser,
    /// Generated tokens (reasoning included).
    OutputSequenceLength,
    /// Generated reasoning tokens.
    ReasoningTokenCount,
    /// Generated answer tokens.
    OutputTokenCount,
    /// Prompt tokens.
    InputSequenceLength,
    /// Time to the first token from the request's intended start (open loop), ms.
    TimeToFirstTokenFromSchedule,
    /// Request latency from its intended start (open loop), ms.
    RequestLatencyFromSchedule,
    /// How late a request started against its schedule (open loop), ms.
    ScheduleLag,
    /// Resolving the host name for a new connection, ms (0 on a reused one).
    HttpReqDnsLookup,
    /// The TCP connect of a new connection, ms (0 on a reused one).
    HttpReqConnecting,
    /// The TLS handshake of a new connection, ms (0 for plain HTTP or a reused one).
    HttpReqTlsHandshaking,
    /// DNS, connect and TLS together, ms.
    HttpReqConnectionOverhead,
    /// 1 when the request went on an open connection, 0 when it waited for a new one (the
    /// mean is the share reused).
    HttpReqConnectionReused,
    /// From the request's start to its response headers, less the connection's setup, ms.
    HttpReqWaiting,
    /// Failed requests over recorded ones, per level.
    ErrorRate,
    /// Successful requests per second, per level.
    RequestThroughput,
    /// Output tokens per second, per level.
    OutputTokenThroughput,
    /// Requests per second that met every per-request SLO (goodput), per level; measured only
    /// when SLOs are set.
    Goodput,
    /// Share of a level's requests (failed ones included) that missed at least one per-request
    /// SLO: one minus the SLO attainment; measured only when SLOs are set.
    SloMissRate,
    /// A quantity the server publishes (one of [`crate::CONCEPTS`]).
    Server(crate::server::ServerMetric),
}

impl Metric {
    /// The per-request metrics, summarised over each level's requests, in report order.
    pub const PER_REQUEST: [Metric; 21] = [
        Metric::TimeToFirstToken,
        Metric::TimeToFirstOutputToken,
        Metric::TimeToSecondToken,
        Metric::RequestLatency,
        Metric::StreamEndLatency,
        Metric::InterTokenLatency,
        Metric::InterChunkLatency,
        Metric::OutputTokenThroughputPerUser,
        Metric::OutputSequenceLength,
        Metric::ReasoningTokenCount,
        Metric::OutputTokenCount,
        Metric::InputSequenceLength,
        Metric::TimeToFirstTokenFromSchedule,
        Metric::RequestLatencyFromSchedule,
        Metric::ScheduleLag,
        Metric::HttpReqDnsLookup,
        Metric::HttpReqConnecting,
        Metric::HttpReqTlsHandshaking,
        Metric::HttpReqConnectionOverhead,
        Metric::HttpReqConnectionReused,
        Metric::HttpReqWaiting,
    ];

    /// The level-wide metrics: one value per level, read as [`Stat::Avg`].
    pub const PER_LEVEL: [Metric; 5] = [
        Metric::ErrorRate,
        Metric::RequestThroughput,
        Metric::OutputTokenThroughput,
        Metric::Goodput,
        Metric::SloMissRate,
    ];

    /// The name in files, SLAs and flags (`time_to_first_token`).
    pub const fn name(self) -> &'static str {
        match self {
            Metric::TimeToFirstToken => "time_to_first_token",
            Metric::TimeToFirstOutputToken => "time_to_first_output_token",
            Metric::TimeToSecondToken => "time_to_second_token",
            Metric::RequestLatency => "request_latency",
            Metric::StreamEndLatency => "stream_end_latency",
            Metric::InterTokenLatency => "inter_token_latency",
            Metric::InterChunkLatency => "inter_chunk_latency",
            Metric::OutputTokenThroughputPerUser => "output_token_throughput_per_user",
            Metric::OutputSequenceLength => "output_sequence_length",
            Metric::ReasoningTokenCount => "reasoning_token_count",
            Metric::OutputTokenCount => "output_token_count",
            Metric::InputSequenceLength => "input_sequence_length",
            Metric::TimeToFirstTokenFromSchedule => "time_to_first_token_from_schedule",
            Metric::RequestLatencyFromSchedule => "request_latency_from_schedule",
            Metric::ScheduleLag => "schedule_lag",
            Metric::HttpReqDnsLookup => "http_req_dns_lookup",
            Metric::HttpReqConnecting => "http_req_connecting",
            Metric::HttpReqTlsHandshaking => "http_req_tls_handshaking",
            Metric::HttpReqConnectionOverhead => "http_req_connection_overhead",
            Metric::HttpReqConnectionReused => "http_req_connection_reused",
            Metric::HttpReqWaiting => "http_req_waiting",
            Metric::ErrorRate => "error_rate",
            Metric::RequestThroughput => "request_throughput",
            Metric::OutputTokenThroughput => "output_token_throughput",
            Metric::Goodput => "goodput",
            Metric::SloMissRate => "slo_miss_rate",
            Metric::Server(m) => m.name(),
        }
    }

    /// The header AIPerf's exports give it (`Time To First Token`); a server quantity's name.
    pub const fn label(self) -> &'static str {
        match self {
            Metric::TimeToFirstToken => "Time To First Token",
            Metric::TimeToFirstOutputToken => "Time To First Output Token",
            Metric::TimeToSecondToken => "Time To Second Token",
            Metric::RequestLatency => "Request Latency",
            Metric::StreamEndLatency => "Stream End Latency",
            Metric::InterTokenLatency => "Inter Token Latency",
            Metric::InterChunkLatency => "Inter Chunk Latency",
            Metric::OutputTokenThroughputPerUser => "Output Token Throughput Per User",
            Metric::OutputSequenceLength => "Output Sequence Length",
            Metric::ReasoningTokenCount => "Reasoning Token Count",
            Metric::OutputTokenCount => "Output Token Count",
            Metric::InputSequenceLength => "Input Sequence Length",
            Metric::TimeToFirstTokenFromSchedule => "Time To First Token From Intended Start",
            Metric::RequestLatencyFromSchedule => "Request Latency From Intended Start",
            Metric::ScheduleLag => "Schedule Lag",
            Metric::HttpReqDnsLookup => "HTTP DNS Lookup",
            Metric::HttpReqConnecting => "HTTP Connecting",
            Metric::HttpReqTlsHandshaking => "HTTP TLS Handshaking",
            Metric::HttpReqConnectionOverhead => "HTTP Connection Overhead",
            Metric::HttpReqConnectionReused => "HTTP Connection Reused",
            Metric::HttpReqWaiting => "HTTP Waiting",
            Metric::ErrorRate => "Error Rate",
            Metric::RequestThroughput => "Request Throughput",
            Metric::OutputTokenThroughput => "Output Token Throughput",
            Metric::Goodput => "Goodput",
            Metric::SloMissRate => "SLO Miss Rate",
            Metric::Server(m) => m.name(),
        }
    }

    /// Its unit (a server quantity's from its concept).
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Server(m) => m.concept().unit,
            m => m.client_unit(),
        }
    }

    /// The unit of a client-side metric (`""` for a server quantity: see [`Metric::unit`]).
    pub const fn client_unit(self) -> &'static str {
        match self {
            Metric::OutputTokenThroughputPerUser => "tokens/sec/user",
            Metric::OutputSequenceLength
            | Metric::ReasoningTokenCount
            | Metric::OutputTokenCount
            | Metric::InputSequenceLength => "tokens",
            Metric::ErrorRate | Metric::SloMissRate | Metric::HttpReqConnectionReused => "ratio",
            Metric::RequestThroughput | Metric::Goodput => "requests/sec",
            Metric::OutputTokenThroughput => "tokens/sec",
            Metric::Server(_) => "",
            _ => "ms",
        }
    }

    /// Whether it exists only for streamed responses (token timing).
    pub const fn streaming_only(self) -> bool {
        matches!(
            self,
            Metric::TimeToFirstToken
                | Metric::TimeToFirstOutputToken
                | Metric::TimeToSecondToken
                | Metric::InterTokenLatency
                | Metric::InterChunkLatency
                | Metric::OutputTokenThroughputPerUser
        )
    }

    /// Whether it is one value per level ([`Metric::PER_LEVEL`]).
    pub const fn per_level(self) -> bool {
        matches!(
            self,
            Metric::ErrorRate
                | Metric::RequestThroughput
                | Metric::OutputTokenThroughput
                | Metric::Goodput
                | Metric::SloMissRate
        )
    }

    /// The statistics a level reports of it: the distribution for a per-request metric,
    /// `avg` for a level-wide one, the concept's own for a server quantity.
    pub fn stats(self) -> &'static [Stat] {
        match self {
            Metric::Server(m) => m.concept().kind.typed_stats(),
            m if m.per_level() => &[Stat::Avg],
            _ => &Stat::DISTRIBUTION,
        }
    }

    /// Every name a metric may have: the per-request, level-wide and server ones.
    pub fn names() -> impl Iterator<Item = &'static str> + Clone {
        Metric::PER_REQUEST
            .iter()
            .chain(Metric::PER_LEVEL.iter())
            .map(|m| m.name())
            .chain(crate::CONCEPTS.iter().map(|c| c.name))
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = UnknownMetric;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(m) = Metric::PER_REQUEST
            .iter()
            .chain(Metric::PER_LEVEL.iter())
            .find(|m| m.name() == s)
        {
            return Ok(*m);
        }
        match crate::server::ServerMetric::named(s) {
            Some(m) => Ok(Metric::Server(m)),
            None => Err(UnknownMetric {
                got: s.to_owned(),
                closest: closest(s, Metric::names()),
            }),
        }
    }
}

/// A name that is no metric kneepoint measures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown metric {got:?}{}; valid metrics: {}", hint(*closest), Metric::names().collect::<Vec<_>>().join(", "))]
pub struct UnknownMetric {
    /// The name given.
    pub got: String,
    /// The closest valid name (within two edits), if any.
    pub closest: Option<&'static str>,
}

/// A statistic of a metric over a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Stat {
    /// The mean (a level-wide metric's one value).
    Avg,
    /// The sample standard deviation.
    Std,
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
    /// A percentile.
    Percentile(Percentile),
    /// How many values (a server histogram's observations).
    Count,
    /// A server counter's increase over the level.
    Total,
    /// A server counter's increase per second.
    Rate,
}

impl Stat {
    /// The median.
    pub const P50: Stat = Stat::Percentile(Percentile::P50);
    /// The 90th percentile.
    pub const P90: Stat = Stat::Percentile(Percentile::P90);
    /// The 95th percentile.
    pub const P95: Stat = Stat::Percentile(Percentile::P95);
    /// The 99th percentile.
    pub const P99: Stat = Stat::Percentile(Percentile::P99);

    /// The statistics of every per-request metric (and of a server gauge), in report order.
    pub const DISTRIBUTION: [Stat; 13] = [
        Stat::Avg,
        Stat::Std,
        Stat::Min,
        Stat::Max,
        Stat::Percentile(Percentile::P1),
        Stat::Percentile(Percentile::P5),
        Stat::Percentile(Percentile::P10),
        Stat::Percentile(Percentile::P25),
        Stat::Percentile(Percentile::P50),
        Stat::Percentile(Percentile::P75),
        Stat::Percentile(Percentile::P90),
        Stat::Percentile(Percentile::P95),
        Stat::Percentile(Percentile::P99),
    ];

    /// Its label in files, SLAs and flags (`avg`, `p99`).
    pub const fn label(self) -> &'static str {
        match self {
            Stat::Avg => "avg",
            Stat::Std => "std",
            Stat::Min => "min",
            Stat::Max => "max",
            Stat::Percentile(p) => p.label(),
            Stat::Count => "count",
            Stat::Total => "total",
            Stat::Rate => "rate",
        }
    }

    /// The quantile in `0..1` of a percentile (`None` for the others).
    pub const fn quantile(self) -> Option<f64> {
        match self {
            Stat::Percentile(p) => Some(p.fraction()),
            _ => None,
        }
    }

    /// The statistics only server quantities have.
    const SERVER_ONLY: [Stat; 3] = [Stat::Count, Stat::Total, Stat::Rate];

    /// Every statistic, distribution first.
    fn every() -> impl Iterator<Item = Stat> + Clone {
        Stat::DISTRIBUTION.into_iter().chain(Stat::SERVER_ONLY)
    }
}

impl fmt::Display for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl FromStr for Stat {
    type Err = UnknownStat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Stat::every()
            .find(|t| t.label() == s)
            .ok_or_else(|| UnknownStat {
                got: s.to_owned(),
                closest: match s {
                    "mean" | "average" => Some("avg"),
                    _ => closest(s, Stat::every().map(Stat::label)),
                },
            })
    }
}

/// A name that is no statistic kneepoint reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown statistic {got:?}{}; valid statistics: {}", hint(*closest), Stat::DISTRIBUTION.map(Stat::label).join(", "))]
pub struct UnknownStat {
    /// The name given.
    pub got: String,
    /// The closest valid name, if any.
    pub closest: Option<&'static str>,
}

// The statistics of the server's concepts, by kind (`server` names the concepts; their
// statistics are this table's).
const COUNTER_STATS: [Stat; 2] = [Stat::Total, Stat::Rate];
const HISTOGRAM_STATS: [Stat; 6] = [
    Stat::Avg,
    Stat::Percentile(Percentile::P50),
    Stat::Percentile(Percentile::P90),
    Stat::Percentile(Percentile::P95),
    Stat::Percentile(Percentile::P99),
    Stat::Count,
];
const RATIO_STATS: [Stat; 1] = [Stat::Avg];

impl crate::server::ConceptKind {
    /// The statistics a concept of this kind has.
    pub fn typed_stats(self) -> &'static [Stat] {
        match self {
            crate::server::ConceptKind::Gauge => &Stat::DISTRIBUTION,
            crate::server::ConceptKind::Counter => &COUNTER_STATS,
            crate::server::ConceptKind::Histogram => &HISTOGRAM_STATS,
            crate::server::ConceptKind::Ratio => &RATIO_STATS,
        }
    }

    /// The labels of [`crate::server::ConceptKind::typed_stats`].
    pub fn stats(self) -> &'static [&'static str] {
        const COUNTER: [&str; 2] = labels(COUNTER_STATS);
        const HISTOGRAM: [&str; 6] = labels(HISTOGRAM_STATS);
        const RATIO: [&str; 1] = labels(RATIO_STATS);
        match self {
            crate::server::ConceptKind::Gauge => &GAUGE_STATS,
            crate::server::ConceptKind::Counter => &COUNTER,
            crate::server::ConceptKind::Histogram => &HISTOGRAM,
            crate::server::ConceptKind::Ratio => &RATIO,
        }
    }
}

/// The statistics of a gauge's samples: a distribution's ([`Stat::DISTRIBUTION`]).
pub const GAUGE_STATS: [&str; 13] = labels(Stat::DISTRIBUTION);

// In files a metric is its name and a statistic its label; reading one back parses it (an
// unknown name is an error that says the closest one).
impl Serialize for Metric {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for Stat {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.label())
    }
}

impl<'de> Deserialize<'de> for Stat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let label = String::deserialize(d)?;
        label.parse().map_err(serde::de::Error::custom)
    }
}

/// The labels of `stats`, in order (a const table of names for the places that list them).
pub const fn labels<const N: usize>(stats: [Stat; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = stats[i].label();
        i += 1;
    }
    out
}

/// The names of `metrics`, in order.
pub const fn names<const N: usize>(metrics: [Metric; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = metrics[i].name();
        i += 1;
    }
    out
}

fn hint(closest: Option<&str>) -> String {
    closest.map_or_else(String::new, |c| format!(" (did you mean {c}?)"))
}

/// The closest of `names` to `word` within two edits.
pub fn closest<'a>(word: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    names
        .map(|n| (edit_distance(word, n), n))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, n)| n)
}

/// Levenshtein distance over chars (names are short; a crate for this would be overkill).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_to_their_metric_and_statistic() {
        for m in Metric::PER_REQUEST.iter().chain(Metric::PER_LEVEL.iter()) {
            assert_eq!(m.name().parse::<Metric>(), Ok(*m));
        }
        for m in crate::server::ServerMetric::all() {
            assert_eq!(m.name().parse::<Metric>(), Ok(Metric::Server(m)));
        }
        for s in Stat::every() {
            assert_eq!(s.label().parse::<Stat>(), Ok(s));
        }
        assert_eq!(Stat::Percentile(Percentile::P99).quantile(), Some(0.99));
        assert_eq!(
            names(Metric::PER_LEVEL),
            [
                "error_rate",
                "request_throughput",
                "output_token_throughput",
                "goodput",
                "slo_miss_rate"
            ]
        );
    }

    #[test]
    fn typos_get_the_closest_name() {
        let e = "time_to_frist_token".parse::<Metric>().unwrap_err();
        assert_eq!(e.closest, Some("time_to_first_token"));
        assert!(
            e.to_string().contains("did you mean time_to_first_token?"),
            "{e}"
        );
        let e = "mean".parse::<Stat>().unwrap_err();
        assert!(e.to_string().contains("did you mean avg?"), "{e}");
        assert_eq!("p98".parse::<Stat>().unwrap_err().closest, Some("p90"));
        assert_eq!(
            "nonsense_entirely".parse::<Metric>().unwrap_err().closest,
            None
        );
    }
}
