//! The levels a search measures, and their verdicts.

use serde::{Deserialize, Serialize};

use crate::sla::SlaCheck;

/// Why a probe was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbePhase {
    /// Growing from `concurrency_min` until an SLA breaks.
    Bracket,
    /// Aimed at the predicted SLA crossing.
    Narrow,
    /// The middle of the bracket (after missed predictions, or without one); also the phase
    /// of a replayed level that carries no phase of its own.
    Bisect,
    /// A repeat of a close call.
    Confirm,
}

/// A level the planner wants measured (the planner makes them; [`Probe::replayed`] makes one
/// for a level measured without a plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Probe {
    /// 1-based probe number.
    pub iteration: u32,
    /// Requests in flight.
    pub concurrency: u32,
    /// Requests to measure.
    pub request_count: u32,
    /// Why.
    pub phase: ProbePhase,
    /// The verdict the planner expects (None when it has no prediction).
    pub expect_pass: Option<bool>,
}

impl Probe {
    /// Probe `iteration` (1-based) at `concurrency` with `request_count` requests, a level
    /// measured without the planner's plan (its phase is [`ProbePhase::Bisect`], it expects
    /// nothing): what replaying a saved search feeds back.
    pub fn replayed(iteration: u32, concurrency: u32, request_count: u32) -> Probe {
        Probe {
            iteration,
            concurrency,
            request_count,
            phase: ProbePhase::Bisect,
            expect_pass: None,
        }
    }
}

/// One probe and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ProbeRecord {
    /// The probe.
    pub probe: Probe,
    /// Output tokens per second measured.
    pub throughput: f64,
    /// Every SLA's check.
    pub checks: Vec<SlaCheck>,
    /// True when every SLA held.
    pub pass: bool,
    /// The first SLA (in configuration order) that failed.
    pub first_breach: Option<String>,
    /// How far its readings were from what the earlier probes predicted for it (the largest
    /// `|ln(observed / predicted)|` over the SLAs); the search's estimate of measurement noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction_error: Option<f64>,
    /// Why the client, not the server, may have shaped this probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_limited: Option<String>,
}
