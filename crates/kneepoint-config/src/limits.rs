//! Bounds on numeric inputs: lengths and deadlines that fit in memory and in a `Duration`.

use std::time::Duration;

use kneepoint_workload::LengthDist;

use crate::error::bail;
use crate::Result;

/// The longest input or output length accepted, in tokens: the longest context windows served
/// today (10 M tokens); `--isl 1e12` would otherwise try to allocate terabytes.
const MAX_TOKENS: f64 = kneepoint_workload::MAX_TOKENS as f64;

pub(crate) fn dist(mean: f64, stddev: f64, what: &str) -> Result<LengthDist> {
    if !mean.is_finite() || mean < 1.0 {
        bail!("{what} mean must be at least 1 token (got {mean})");
    }
    if mean > MAX_TOKENS {
        bail!("{what} mean must be at most {MAX_TOKENS} tokens (got {mean})");
    }
    if !stddev.is_finite() || !(0.0..=MAX_TOKENS).contains(&stddev) {
        bail!("{what} stddev must be between 0 and {MAX_TOKENS} (got {stddev})");
    }
    Ok(LengthDist::mean_stddev(mean, stddev))
}

/// The longest deadline accepted: 30 days (a larger one is a typo, and `1e300` would not fit a
/// `Duration`).
const MAX_DEADLINE_S: f64 = 30.0 * 86_400.0;

pub(crate) fn seconds(what: &str, v: Option<f64>) -> Result<Option<Duration>> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= MAX_DEADLINE_S => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(s) => bail!(
            "the {what} must be a positive number of seconds up to {MAX_DEADLINE_S} (30 days), not {s}"
        ),
    }
}
