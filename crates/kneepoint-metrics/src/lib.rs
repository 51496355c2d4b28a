//! The metrics core: per-request metrics from records, per-level aggregates with
//! numpy-compatible percentiles, AIPerf-compatible exports (written and read back), and
//! run-to-run comparison with bootstrap intervals, multi-run confidence intervals and
//! convergence.
//!
//! # Example
//! ```
//! use kneepoint_core::{Metric, Phase, RequestRecord, Stat, TokenSource};
//! use kneepoint_metrics::{GoodputSlo, LevelSummary};
//!
//! let ms = 1_000_000;
//! let mut record = RequestRecord::new(0, Phase::Profiling);
//! record.response_ns = Some(5 * ms);
//! record.chunk_ns = vec![50 * ms, 60 * ms, 70 * ms];
//! record.first_content_ns = Some(50 * ms);
//! record.end_ns = 71 * ms;
//! record.input_tokens = Some(128);
//! record.output_tokens = Some(3);
//! record.output_tokens_source = Some(TokenSource::Usage);
//! record.finish_reason = Some("length".into());
//! let summary = LevelSummary::from_records(1, &[record], &GoodputSlo::default());
//! assert_eq!(summary.value(Metric::TimeToFirstToken, Stat::P50), Some(50.0));
//! assert_eq!(summary.value(Metric::InterTokenLatency, Stat::Avg), Some(10.0));
//! ```

mod accumulate;
mod compare;
mod confidence;
mod error;
mod error_groups;
pub mod export;
mod level_interval;
mod loaded;
pub use level_interval::{level_intervals, StatInterval, LEVEL_INTERVAL};
pub use loaded::loaded_duration_s;
mod measurement;
mod prompt_counts;
pub use prompt_counts::ISL_WARNING;
mod request_metrics;
mod slo;
mod stats;
mod steadiness;
mod stream;
mod summary;
mod summary_keys;
pub use summary_keys::{known_keys, OslSource};
mod timeslice;
pub use steadiness::{SliceChange, Steadiness};
pub use timeslice::{time_slices, TimeSlice, TimeSlices, MAX_SLICES, STEADY_TOLERANCE};

pub use accumulate::{SecondPass, StreamingSummary};
pub use compare::{
    compare_run_values, compare_samples, compare_values, CompareConfig, Difference, Scale,
    Statistic, Verdict, MIN_TAIL_SAMPLES,
};
pub use confidence::{
    summary_values, t_critical, Convergence, ConvergenceRule, Criterion, RunAggregate, RunStatistic,
};
pub use error::Error;
pub use request_metrics::{ConnectionMetrics, RequestMetrics};
pub use stats::{quantile_sorted, Stats, PERCENTILES};
pub use stream::{Bracket, StreamColumn};
pub use summary::{ErrorGroup, GoodputSlo, LevelSummary, MetricSummary, SCHEDULE_LAG_LIMIT_MS};
