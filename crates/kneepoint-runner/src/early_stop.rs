//! Stopping a long level early once its key metrics are known precisely enough: after a minimum
//! number of requests, the confidence intervals of the mean request latency and mean TTFT
//! (batch means, so that requests finishing in waves do not fake precision) must both be
//! narrower than a fraction of their means. New requests then stop; those in flight finish.
//!
//! With a [`PrecisionTarget`] (`--target-precision`), one chosen statistic decides instead: the
//! level stops once the relative half-width of that statistic's interval is within the target.
//! A percentile's interval comes from sectioning (the standard method for the output of a
//! steady-state simulation): the records so far, in the order they finished, are cut into ten
//! consecutive sections, the statistic is computed on each, and the Student-t interval of
//! their mean is taken; a section must hold at least two values beyond the percentile.

use kneepoint_core::RequestRecord;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// When a level may stop before its request count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EarlyStop {
    /// Requests recorded before the rule is tried.
    pub min_requests: usize,
    /// Largest interval width relative to the mean (e.g. 0.05).
    pub max_relative_width: f64,
    /// Confidence level of the intervals.
    pub confidence: f64,
    /// Records per batch (the level's concurrency suits a closed loop: one wave per batch).
    pub batch: usize,
    /// One statistic whose interval decides instead of the means (`--target-precision`):
    /// `max_relative_width` is then its interval's relative half-width.
    pub target: Option<PrecisionTarget>,
}

/// The statistic `--target-precision` watches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrecisionTarget {
    /// Request latency, TTFT or inter-token latency.
    pub metric: kneepoint_core::Metric,
    /// `avg` or a percentile.
    pub stat: kneepoint_core::Stat,
}

impl PrecisionTarget {
    /// The metrics a target may watch.
    pub const METRICS: [kneepoint_core::Metric; 3] = [
        kneepoint_core::Metric::RequestLatency,
        kneepoint_core::Metric::TimeToFirstToken,
        kneepoint_core::Metric::InterTokenLatency,
    ];

    /// A record's value of the metric, ms.
    fn value(&self, r: &RequestRecord) -> Option<f64> {
        use kneepoint_core::Metric;
        let ms = |ns: u64| ns as f64 / 1e6;
        match self.metric {
            Metric::RequestLatency => Some(ms(r.end_ns.saturating_sub(r.start_ns))),
            Metric::TimeToFirstToken => {
                r.chunk_ns.first().map(|t| ms(t.saturating_sub(r.start_ns)))
            }
            Metric::InterTokenLatency => {
                let (first, last) = (r.chunk_ns.first()?, r.chunk_ns.last()?);
                let n = r.output_tokens.unwrap_or(r.chunk_ns.len() as u32);
                (n > 1).then(|| ms(last.saturating_sub(*first)) / f64::from(n - 1))
            }
            _ => None,
        }
    }

    /// The statistic of `v` (sorted in place).
    fn of(&self, v: &mut [f64]) -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        match self.stat.quantile() {
            None => Some(v.iter().sum::<f64>() / v.len() as f64),
            Some(q) => {
                v.sort_unstable_by(f64::total_cmp);
                let h = (v.len() - 1) as f64 * q;
                let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
                Some(v[lo] + (v[hi] - v[lo]) * (h - h.floor()))
            }
        }
    }
}

/// Sections the target's interval is computed over.
const SECTIONS: usize = 10;

/// Batch means of the metrics watched, fed one record at a time.
#[derive(Debug, Default)]
pub(crate) struct Precision {
    seen: usize,
    /// The target statistic's values, in finishing order, and when it was last judged.
    target_values: Vec<f64>,
    judged_at: usize,
    latency: Vec<f64>,
    ttft: Vec<f64>,
    batch_latency: Vec<f64>,
    batch_ttft: Vec<f64>,
}

fn relative_width(means: &[f64], confidence: f64) -> Option<f64> {
    let k = means.len();
    if k < 10 {
        return None;
    }
    let kf = k as f64;
    let mean = means.iter().sum::<f64>() / kf;
    let sd = (means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (kf - 1.0)).sqrt();
    let t = StudentsT::new(0.0, 1.0, kf - 1.0)
        .ok()?
        .inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
    (mean > 0.0).then(|| 2.0 * t * sd / kf.sqrt() / mean)
}

impl Precision {
    /// Adds a finished record; returns why the level can stop, once it can.
    pub(crate) fn add(&mut self, r: &RequestRecord, rule: &EarlyStop) -> Option<String> {
        if let Some(t) = rule.target {
            return self.add_target(r, rule, &t);
        }
        self.seen += 1;
        if r.is_ok() {
            self.latency
                .push(r.end_ns.saturating_sub(r.start_ns) as f64 / 1e6);
            if let Some(t) = r.chunk_ns.first() {
                self.ttft.push(t.saturating_sub(r.start_ns) as f64 / 1e6);
            }
        }
        let batch = rule.batch.max(1);
        for (open, done) in [
            (&mut self.latency, &mut self.batch_latency),
            (&mut self.ttft, &mut self.batch_ttft),
        ] {
            if open.len() >= batch {
                done.push(open.iter().sum::<f64>() / open.len() as f64);
                open.clear();
            }
        }
        if self.seen < rule.min_requests {
            return None;
        }
        let lat = relative_width(&self.batch_latency, rule.confidence)?;
        // TTFT is watched when the responses stream (else there are no batches of it).
        let ttft = if self.batch_ttft.is_empty() {
            Some(0.0)
        } else {
            relative_width(&self.batch_ttft, rule.confidence)
        }?;
        (lat <= rule.max_relative_width && ttft <= rule.max_relative_width).then(|| {
            format!(
                "stopped early after {} requests: {:.0} % intervals of mean request latency ({:.2} % wide) and mean TTFT ({:.2} % wide) are within {:.1} %",
                self.seen,
                rule.confidence * 100.0,
                lat * 100.0,
                ttft * 100.0,
                rule.max_relative_width * 100.0
            )
        })
    }
}

impl Precision {
    /// [`Precision::add`] for a [`PrecisionTarget`]: judged whenever the sample grew by a
    /// batch (or 5 %), so that the cost stays linear in the level.
    fn add_target(
        &mut self,
        r: &RequestRecord,
        rule: &EarlyStop,
        t: &PrecisionTarget,
    ) -> Option<String> {
        self.seen += 1;
        if let Some(v) = r.is_ok().then(|| t.value(r)).flatten() {
            self.target_values.push(v);
        }
        let n = self.target_values.len();
        let step = rule.batch.max(n / 20).max(1);
        if self.seen < rule.min_requests || n < self.judged_at + step {
            return None;
        }
        self.judged_at = n;
        let size = n / SECTIONS;
        let tail = t
            .stat
            .quantile()
            .map_or(f64::INFINITY, |q| size as f64 * (1.0 - q));
        if size == 0 || tail < 2.0 {
            return None;
        }
        let mut all = self.target_values.clone();
        let whole = t.of(&mut all)?;
        let mut parts: Vec<f64> = self
            .target_values
            .chunks(size)
            .take(SECTIONS)
            .filter_map(|c| t.of(&mut c.to_vec()))
            .collect();
        let k = parts.len() as f64;
        let mean = parts.iter().sum::<f64>() / k;
        let sd = (parts.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
        let tq = StudentsT::new(0.0, 1.0, k - 1.0)
            .ok()?
            .inverse_cdf(1.0 - (1.0 - rule.confidence) / 2.0);
        parts.clear();
        let half = tq * sd / k.sqrt() / whole.abs();
        (whole > 0.0 && half <= rule.max_relative_width).then(|| {
            format!(
                "stopped at the target precision after {} requests: the {:.0} % interval of {} {} is ±{:.2} % (target ±{:.1} %)",
                self.seen,
                rule.confidence * 100.0,
                t.metric,
                t.stat,
                half * 100.0,
                rule.max_relative_width * 100.0
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::Phase;

    fn rec(latency_ms: u64, ttft_ms: u64) -> RequestRecord {
        {
            let mut built = RequestRecord::new(0, Phase::Profiling);
            built.x_request_id = None;
            built.worker = 0;
            built.origin_unix_ns = 0;
            built.start_ns = 0;
            built.response_ns = Some(1);
            built.chunk_ns = vec![ttft_ms * 1_000_000, latency_ms * 1_000_000];
            built.first_content_ns = None;
            built.end_ns = latency_ms * 1_000_000;
            built.input_tokens = None;
            built.server_input_tokens = None;
            built.output_tokens = Some(2);
            built.output_tokens_source = None;
            built.client_output_tokens = None;
            built.output_bytes = 0;
            built.requested_output_tokens = None;
            built.finish_reason = Some("stop".into());
            built.error = None;
            built.attempts = 1;
            built.intended_start_ns = None;
            built
        }
    }

    #[test]
    fn steady_latencies_stop_early_and_noisy_ones_do_not() {
        let rule = EarlyStop {
            min_requests: 100,
            max_relative_width: 0.05,
            confidence: 0.95,
            batch: 8,
            target: None,
        };
        let mut steady = Precision::default();
        let stop = (0..1000u64).find_map(|i| steady.add(&rec(100 + i % 3, 20 + i % 2), &rule));
        let reason = stop.expect("steady latencies converge");
        assert!(
            reason.starts_with("stopped early after 100 requests"),
            "{reason}"
        );

        let mut noisy = Precision::default();
        let stop = (0..400u64).find_map(|i| {
            let spike = if i % 7 == 0 { 900 } else { 50 };
            noisy.add(&rec(spike + (i * 37) % 400, 10 + (i * 13) % 90), &rule)
        });
        assert!(stop.is_none(), "{stop:?}");
    }
}

#[cfg(test)]
mod target_tests {
    use super::*;
    use kneepoint_core::{Metric, Percentile, Phase, Stat};

    fn rec(i: u64, latency_ms: f64) -> RequestRecord {
        let mut r = RequestRecord::new(i, Phase::Profiling);
        r.start_ns = i * 1_000_000;
        r.end_ns = r.start_ns + (latency_ms * 1e6) as u64;
        r.chunk_ns = vec![r.start_ns + 1_000_000, r.end_ns];
        r.output_tokens = Some(2);
        r
    }

    fn stop_after(spread: f64, target: f64) -> Option<usize> {
        let rule = EarlyStop {
            min_requests: 200,
            max_relative_width: target,
            confidence: 0.9,
            batch: 16,
            target: Some(PrecisionTarget {
                metric: Metric::RequestLatency,
                stat: Stat::Percentile(Percentile::P95),
            }),
        };
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut p = Precision::default();
        (0..20_000u64).position(|i| {
            // log-normal latencies around 100 ms
            let z: f64 = rng.sample(rand_distr::StandardNormal);
            p.add(&rec(i, 100.0 * (spread * z).exp()), &rule).is_some()
        })
    }

    #[test]
    fn a_tighter_target_or_a_noisier_level_needs_more_requests() {
        let loose = stop_after(0.2, 0.02).expect("stops");
        let tight = stop_after(0.2, 0.005).expect("stops");
        assert!(loose >= 199 && tight > loose, "{loose} {tight}");
        let noisy = stop_after(0.6, 0.005);
        assert!(noisy.is_none_or(|n| n > tight), "{noisy:?} {tight}");
    }
}
