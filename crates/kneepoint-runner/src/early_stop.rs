//! Stopping a long level early once its key metrics are known precisely enough: after a minimum
//! number of requests, the confidence intervals of the mean request latency and mean TTFT
//! (batch means, so that requests finishing in waves do not fake precision) must both be
//! narrower than a fraction of their means. New requests then stop; those in flight finish.

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
}

/// Batch means of the metrics watched, fed one record at a time.
#[derive(Debug, Default)]
pub(crate) struct Precision {
    seen: usize,
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
