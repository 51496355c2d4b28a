//! Pure decision logic for kneepoint: sweep plans, the `max-concurrency-under-sla` search,
//! knee detection, the operating zone, fleet sizing and ranked recommendations. No I/O, no clock, no async runtime: callers run the levels however they like
//! and hand the numbers in.
//!
//! # Example: a search driven by a scripted curve
//! ```
//! use kneepoint_planner::{Measurement, Metric, SearchConfig, SearchPlanner, Sla, Stat};
//!
//! let mut search = SearchPlanner::new(SearchConfig::new(vec![Sla::e2e_ms(50_000.0).unwrap()])).unwrap();
//! while let Some(probe) = search.next_probe() {
//!     // p99 latency that crosses 50 s at 330 concurrent requests
//!     let p99_ms = 100.0 * f64::from(probe.concurrency) + 17_000.0;
//!     let m = Measurement::new(0.0).with(Metric::RequestLatency, Stat::P99, p99_ms);
//!     search.observe(probe.concurrency, &m).unwrap();
//! }
//! let outcome = search.outcome();
//! assert!(outcome.feasible_max.unwrap() <= 330);
//! assert!(outcome.feasible_max.unwrap() as f64 >= 330.0 * 0.95);
//! ```
//!
//! # Example: the knee of a sweep
//! ```
//! use kneepoint_planner::{find_knee, KneeRule, LevelPoint};
//!
//! // The source documents' sweep: throughput flattens after 256 while p99 latency climbs.
//! let pts = [(16, 492.5, 8.0), (64, 1433.4, 12.0), (256, 2823.4, 28.0), (1024, 2790.0, 98.0)]
//!     .map(|(c, t, p99_s)| LevelPoint::new(c, t, p99_s * 1000.0));
//! let knee = find_knee(&pts, &KneeRule::default()).unwrap();
//! assert_eq!(knee.knee, Some(256));
//! ```

mod capacity;
pub mod config_search;
mod cost;
mod error;
mod explain;
mod fleet;
mod key;
mod knee;
mod pareto;
mod pass;
mod predict;
mod prefill;
mod probe;
mod recommend;
mod search;
mod search_config;
mod shard;
mod sla;
mod sweep;
mod zone;
mod zone_interval;
mod zone_range;

pub use capacity::{search_lower_bound, sweep_lower_bound};
pub use cost::{BaselineCost, ProbeSpend, SearchCost};
pub use error::Error;
pub use explain::{explain_knee, KneeCause, KneeExplanation, HELD_SHARE, KV_FULL};
pub use fleet::{fleet_size, FleetPlan, InstanceCapacity, PeakTraffic};
pub use key::StatKey;
pub use knee::{find_knee, KneeEstimate, KneeRule, LevelPoint, Step};
pub use kneepoint_core::{Metric, Percentile, Stat};
pub use pareto::{pareto_front, ParetoBasis, ParetoFront, ParetoPoint, PARETO_DRAWS};
pub use pass::pass_probability;
pub use prefill::{
    fit_prefill, length_points, LengthPoint, LengthSample, PrefillFit, PREFILL_DRAWS,
};
pub use recommend::{
    candidates_front, grouped, latency_at, objective_value, recommend, Candidate, CurvePoint,
    Objective, OperatingPoint, ParetoStanding, PeakPlan, Recommendation, HOURS_PER_MONTH,
};
pub use search::{
    roundest_in, BoundaryInterval, Confidence, Outcome, Probe, ProbePhase, ProbeRecord,
    SearchConfig, SearchPlanner, StopReason, INTERVAL_LEVEL, MAX_JUMP,
};
pub use shard::Shard;
pub use sla::{check_all, Measurement, Op, Sla, SlaCheck, LEVEL_METRICS, REQUEST_METRICS, STATS};
pub use sweep::{SweepLevel, SweepPlan, MAX_CONCURRENCY};
pub use zone::{operating_zone, OperatingZone, PointUncertainty, ZonePoint, MIN_SUCCESSES};
pub use zone_interval::{zone_intervals, ZONE_DRAWS};
pub use zone_range::{LevelRange, ZoneDraw, ZoneIntervals};
