//! Pure decision logic for kneepoint: sweep plans and saturation-knee detection. No I/O, no
//! clock, no async runtime: callers run the levels however they like and hand the numbers in.
//!
//! # Example
//! ```
//! use kneepoint_planner::{find_knee, KneeRule, LevelPoint};
//!
//! // The source documents' sweep: throughput flattens after 256 while p99 latency climbs.
//! let pts = [(16, 492.5, 8.0), (64, 1433.4, 12.0), (256, 2823.4, 28.0), (1024, 2790.0, 98.0)]
//!     .map(|(c, t, p99_s)| LevelPoint::new(c, t, p99_s * 1000.0));
//! let knee = find_knee(&pts, &KneeRule::default()).unwrap();
//! assert_eq!(knee.knee, Some(256));
//! ```

mod error;
mod knee;
mod sweep;

pub use error::Error;
pub use knee::{find_knee, KneeEstimate, KneeRule, LevelPoint, Step};
pub use sweep::{SweepLevel, SweepPlan};
