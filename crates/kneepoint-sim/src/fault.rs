//! Fault injection: per request, with a probability, the simulator misbehaves the way real
//! endpoints do, so clients can be tested against every failure class.

use serde::{Deserialize, Serialize};

/// One way to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// HTTP 429 with `Retry-After: 1`.
    #[serde(rename = "http_429")]
    Http429,
    /// HTTP 500.
    #[serde(rename = "http_500")]
    Http500,
    /// HTTP 503.
    #[serde(rename = "http_503")]
    Http503,
    /// The connection is closed before any response header.
    ResetBeforeHeaders,
    /// The connection is cut after the first tokens.
    ResetMidStream,
    /// No bytes for `stall_ms` after the first token, then the stream goes on.
    Stall,
    /// A chunk whose JSON is broken.
    InvalidJson,
    /// A chunk with bytes that are not UTF-8.
    InvalidUtf8,
    /// A line longer than 1 MiB.
    OverlongLine,
    /// HTTP 200 with an HTML body instead of an event stream.
    WrongContentType,
    /// The stream ends after the last token without `data: [DONE]`.
    NoDone,
    /// Generation is cut short: `[DONE]` arrives, but no chunk had a `finish_reason`
    /// (llama-cpp-python does this when it interrupts a request).
    DoneWithoutFinish,
    /// SageMaker response streams: a frame whose message CRC is wrong.
    EventStreamBadCrc,
    /// SageMaker response streams: a `ModelStreamError` exception mid-stream.
    ModelStreamError,
}

impl Fault {
    /// The faults of the SageMaker protocol's response streams (no effect on OpenAI-protocol
    /// requests; pick them by name).
    pub const SAGEMAKER: [Fault; 2] = [Fault::EventStreamBadCrc, Fault::ModelStreamError];

    /// Every fault of the OpenAI protocol (what an empty `kinds` list picks from).
    pub const ALL: [Fault; 12] = [
        Fault::Http429,
        Fault::Http500,
        Fault::Http503,
        Fault::ResetBeforeHeaders,
        Fault::ResetMidStream,
        Fault::Stall,
        Fault::InvalidJson,
        Fault::InvalidUtf8,
        Fault::OverlongLine,
        Fault::WrongContentType,
        Fault::NoDone,
        Fault::DoneWithoutFinish,
    ];

    /// Parses the snake_case name (`http_429`, `reset_mid_stream`, ...).
    pub fn parse(s: &str) -> Option<Fault> {
        Fault::ALL
            .into_iter()
            .chain(Fault::SAGEMAKER)
            .find(|f| f.name() == s)
    }

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Http429 => "http_429",
            Fault::Http500 => "http_500",
            Fault::Http503 => "http_503",
            Fault::ResetBeforeHeaders => "reset_before_headers",
            Fault::ResetMidStream => "reset_mid_stream",
            Fault::Stall => "stall",
            Fault::InvalidJson => "invalid_json",
            Fault::InvalidUtf8 => "invalid_utf8",
            Fault::OverlongLine => "overlong_line",
            Fault::WrongContentType => "wrong_content_type",
            Fault::NoDone => "no_done",
            Fault::DoneWithoutFinish => "done_without_finish",
            Fault::EventStreamBadCrc => "event_stream_bad_crc",
            Fault::ModelStreamError => "model_stream_error",
        }
    }

    /// True for faults that act on a stream once it has started.
    pub(crate) fn in_stream(self) -> bool {
        matches!(
            self,
            Fault::ResetMidStream
                | Fault::Stall
                | Fault::InvalidJson
                | Fault::InvalidUtf8
                | Fault::OverlongLine
                | Fault::NoDone
                | Fault::DoneWithoutFinish
                | Fault::EventStreamBadCrc
                | Fault::ModelStreamError
        )
    }
}

/// Which faults to inject, how often.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultPlan {
    /// Probability that a request gets a fault (0..=1).
    pub rate: f64,
    /// The faults to choose from, uniformly (empty: every fault).
    #[serde(default)]
    pub kinds: Vec<Fault>,
    /// How long a `stall` lasts, ms.
    #[serde(default = "default_stall_ms")]
    pub stall_ms: u64,
}

fn default_stall_ms() -> u64 {
    2_000
}

impl FaultPlan {
    /// `rate` of requests fail with one of `kinds`.
    pub fn new(rate: f64, kinds: Vec<Fault>) -> Self {
        FaultPlan {
            rate,
            kinds,
            stall_ms: default_stall_ms(),
        }
    }

    /// Picks the fault for one request from two uniform draws in [0, 1).
    pub(crate) fn pick(&self, u: f64, v: f64) -> Option<Fault> {
        if u >= self.rate {
            return None;
        }
        let kinds: &[Fault] = if self.kinds.is_empty() {
            &Fault::ALL
        } else {
            &self.kinds
        };
        let i = ((v * kinds.len() as f64) as usize).min(kinds.len() - 1);
        Some(kinds[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_picking() {
        for f in Fault::ALL.into_iter().chain(Fault::SAGEMAKER) {
            assert_eq!(Fault::parse(f.name()), Some(f));
            assert_eq!(serde_json::to_value(f).unwrap(), f.name());
        }
        let p = FaultPlan::new(0.5, vec![Fault::Http500, Fault::Stall]);
        assert_eq!(p.pick(0.6, 0.1), None);
        assert_eq!(p.pick(0.1, 0.1), Some(Fault::Http500));
        assert_eq!(p.pick(0.1, 0.9), Some(Fault::Stall));
        assert!(FaultPlan::new(1.0, vec![]).pick(0.99, 0.999).is_some());
    }
}
