//! The operating zone of a set of measured levels (a sweep or a search's probes).
//!
//! - **Saturation point (knee)**: [`find_knee`]'s rule.
//! - **SLA breaking point**: the lowest level at which any SLA failed.
//! - **Ideal balance**: the level with the highest throughput among those at or below the knee
//!   that meet every SLA (ties go to the lower concurrency): most throughput at acceptable
//!   latency. Without a knee, every level counts; without SLAs, every level passes.
//! - **Safe zone**: levels up to the lower of the knee and the last level before the breaking
//!   point.
//! - **Broken levels**: a level whose error rate is above [`KneeRule::max_error_rate`] is left
//!   out of the knee's curve, counts as failing (the breaking point is the lowest failing or
//!   broken level) and is never the ideal balance: a server that fails fast looks fast.
//!   Requests the run cancelled (an interrupt, a timed level's end) are not failures
//!   ([`ZonePoint::of_counts`]).

use serde::{Deserialize, Serialize};

use crate::knee::{find_knee, KneeEstimate, KneeRule, LevelPoint};
use crate::Error;

/// A measured level with its SLA verdict ([`ZonePoint::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ZonePoint {
    /// Throughput and p99 latency at the level.
    pub point: LevelPoint,
    /// Whether every SLA held (None when no SLA was given).
    pub meets_slas: Option<bool>,
    /// Failed / recorded requests at the level (0 when unknown).
    #[serde(default)]
    pub error_rate: f64,
    /// How precisely the level was measured, when known ([`ZonePoint::with_uncertainty`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncertainty: Option<PointUncertainty>,
    /// The client, not the server, may have shaped this level ([`ZonePoint::client_limited`]):
    /// it is left out of the knee's curve and is never the operating level.
    #[serde(default)]
    pub client_limited: bool,
    /// Successful requests measured at the level, when known ([`ZonePoint::with_successes`]):
    /// fewer than [`MIN_SUCCESSES`] (an interrupted or empty level) leaves it out of the knee
    /// and the zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successes: Option<u64>,
}

/// The fewest successful requests a level needs to count towards the knee, the zone, a fleet
/// or a ranking: below it, its throughput and p99 say nothing (a level interrupted before it
/// sent anything reads as zero throughput, zero errors).
pub const MIN_SUCCESSES: u64 = 10;

/// How precisely one level was measured: what [`crate::zone_intervals`] redraws.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PointUncertainty {
    /// Relative standard error of the throughput.
    pub throughput_se: f64,
    /// Relative standard error of the p99 latency.
    pub latency_se: f64,
    /// The probability that every SLA holds at the level ([`crate::pass_probability`]); `None`
    /// keeps the measured verdict.
    pub pass_probability: Option<f64>,
}

impl ZonePoint {
    /// A level's point, SLA verdict and error rate.
    pub fn new(point: LevelPoint, meets_slas: Option<bool>, error_rate: f64) -> Self {
        ZonePoint {
            point,
            meets_slas,
            error_rate,
            uncertainty: None,
            client_limited: false,
            successes: None,
        }
    }

    /// A level's point and SLA verdict from its request counts: `recorded` requests, `failed`
    /// of them without an answer, `cancelled` of those cut off by the run itself (an
    /// interrupt, or the end of a timed level). A cancelled request did not fail: it counts
    /// neither in the error rate (as a failure or as a request) nor as a success.
    pub fn of_counts(
        point: LevelPoint,
        meets_slas: Option<bool>,
        recorded: usize,
        failed: usize,
        cancelled: usize,
    ) -> Self {
        let cancelled = cancelled.min(failed);
        let judged = recorded.saturating_sub(cancelled);
        let error_rate = if judged > 0 {
            (failed - cancelled) as f64 / judged as f64
        } else {
            0.0
        };
        ZonePoint::new(point, meets_slas, error_rate)
            .with_successes(recorded.saturating_sub(failed) as u64)
    }

    /// The same point with its count of successful requests (builder style).
    pub fn with_successes(mut self, successes: u64) -> Self {
        self.successes = Some(successes);
        self
    }

    /// Too few successful requests to stand for the level (a level whose error rate breaks
    /// the knee rule is left to that rule, which names it as an error break).
    pub fn too_thin(&self) -> bool {
        self.successes.is_some_and(|n| n < MIN_SUCCESSES)
    }

    /// The same point, marked as measured by a client that could not keep up (builder style).
    pub fn client_limited(mut self, limited: bool) -> Self {
        self.client_limited = limited;
        self
    }

    /// The same point with the relative standard errors of its throughput and p99 latency and
    /// the probability that its SLAs hold (builder style; non-finite errors count as 0).
    pub fn with_uncertainty(
        mut self,
        throughput_se: f64,
        latency_se: f64,
        pass_probability: Option<f64>,
    ) -> Self {
        let clean = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
        self.uncertainty = Some(PointUncertainty {
            throughput_se: clean(throughput_se),
            latency_se: clean(latency_se),
            pass_probability: pass_probability
                .filter(|p| p.is_finite())
                .map(|p| p.clamp(0.0, 1.0)),
        });
        self
    }

    fn broken(&self, rule: &KneeRule) -> bool {
        // A NaN error rate (nothing recorded) counts as broken.
        self.error_rate.is_nan() || self.error_rate > rule.max_error_rate
    }

    fn fails(&self, rule: &KneeRule) -> bool {
        self.meets_slas == Some(false) || self.broken(rule)
    }
}

/// Where to operate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatingZone {
    /// The saturation knee and its evidence.
    pub knee: KneeEstimate,
    /// The lowest level that failed an SLA or had too many errors.
    pub sla_breaking_point: Option<u32>,
    /// The lowest level whose error rate was above the rule's limit.
    #[serde(default)]
    pub error_breaking_point: Option<u32>,
    /// The recommended operating level.
    pub ideal_balance: Option<u32>,
    /// The highest level of the safe zone.
    pub safe_max: Option<u32>,
    /// One sentence for people.
    pub summary: String,
    /// How sure the knee, the ideal balance and the safe zone are, when the levels carried
    /// their uncertainty ([`crate::zone_intervals`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<crate::zone_range::ZoneIntervals>,
}

/// Computes the zone of `points` (any order).
pub fn operating_zone(points: &[ZonePoint], rule: &KneeRule) -> Result<OperatingZone, Error> {
    let limited: Vec<u32> = points
        .iter()
        .filter(|p| p.client_limited)
        .map(|p| p.point.concurrency)
        .collect();
    let thin: Vec<String> = points
        .iter()
        .filter(|p| p.too_thin() && !p.client_limited && !p.broken(rule))
        .map(|p| format!("{} ({})", p.point.concurrency, p.successes.unwrap_or(0)))
        .collect();
    let mut pts: Vec<ZonePoint> = points
        .iter()
        // a level broken by errors stays: the error rule names it more precisely
        .filter(|p| !p.client_limited && (!p.too_thin() || p.broken(rule)))
        .copied()
        .collect();
    pts.sort_by_key(|p| p.point.concurrency);
    let healthy: Vec<LevelPoint> = pts
        .iter()
        .filter(|p| !p.broken(rule))
        .map(|p| p.point)
        .collect();
    let mut knee = find_knee(&healthy, rule)?;
    let error_break = pts
        .iter()
        .find(|p| p.broken(rule))
        .map(|p| p.point.concurrency);
    if healthy.is_empty() && !pts.is_empty() {
        knee.reason = format!(
            "every level had more than {} % of its requests fail: no curve to find a knee on",
            rule.max_error_rate * 100.0
        );
    } else if error_break.is_some() {
        knee.reason.push_str(&format!(
            " (levels with more than {} % errors left out)",
            rule.max_error_rate * 100.0
        ));
    }
    let breaking = pts
        .iter()
        .find(|p| p.fails(rule))
        .map(|p| p.point.concurrency);
    let limit = knee.knee.unwrap_or(u32::MAX);
    let ideal = pts
        .iter()
        .filter(|p| p.point.concurrency <= limit && !p.fails(rule))
        .filter(|p| breaking.is_none_or(|b| p.point.concurrency < b))
        .fold(None::<&ZonePoint>, |best, p| match best {
            Some(b) if b.point.throughput >= p.point.throughput => Some(b),
            _ => Some(p),
        })
        .map(|p| p.point.concurrency);
    let below_break =
        breaking.and_then(|b| pts.iter().map(|p| p.point.concurrency).rfind(|&c| c < b));
    let safe_max = match (knee.knee, breaking) {
        (Some(k), Some(_)) => below_break.map(|b| b.min(k)),
        (Some(k), None) => Some(k),
        (None, Some(_)) => below_break,
        (None, None) => pts.last().map(|p| p.point.concurrency),
    };
    let mut summary = match ideal {
        Some(i) => format!("operate at {i} concurrent requests"),
        None if healthy.is_empty() && !pts.is_empty() => format!(
            "no level is usable: more than {} % of requests failed at every level",
            rule.max_error_rate * 100.0
        ),
        None => "no level meets the SLAs".to_owned(),
    };
    if let Some(k) = knee.knee {
        summary.push_str(&format!("; throughput saturates at {k}"));
    }
    // The error limit's own level is named once, as errors.
    if let Some(b) = breaking.filter(|&b| error_break != Some(b)) {
        summary.push_str(&format!("; SLAs break at {b}"));
    }
    if let Some(e) = error_break {
        summary.push_str(&format!(
            "; errors exceed {} % at {e}",
            rule.max_error_rate * 100.0
        ));
    }
    if !limited.is_empty() {
        let list: Vec<String> = limited.iter().map(u32::to_string).collect();
        summary.push_str(&format!(
            "; left out, the client was the bottleneck: {}",
            list.join(", ")
        ));
        knee.reason.push_str(&format!(
            " (client-limited levels left out: {})",
            list.join(", ")
        ));
    }
    if !thin.is_empty() {
        let why = format!(
            "fewer than {MIN_SUCCESSES} successful requests (interrupted or failed): {}",
            thin.join(", ")
        );
        if pts.is_empty() {
            summary = format!("no level is usable: {why}");
        } else {
            summary.push_str(&format!("; left out, {why}"));
        }
        knee.reason.push_str(&format!(" (left out, {why})"));
    }
    Ok(OperatingZone {
        knee,
        sla_breaking_point: breaking,
        error_breaking_point: error_break,
        ideal_balance: ideal,
        safe_max,
        summary,
        intervals: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn z(c: u32, t: f64, l: f64, ok: Option<bool>) -> ZonePoint {
        ZonePoint::new(LevelPoint::new(c, t, l), ok, 0.0)
    }

    /// Issue 34: Ctrl-C 3 s into a level left it with no request, and the empty level (zero
    /// throughput, zero errors) became the operating advice. A level with fewer than
    /// `MIN_SUCCESSES` successes is left out, and the answer says so.
    #[test]
    fn a_level_with_too_few_successes_is_left_out_and_named() {
        let rule = KneeRule::default();
        let empty = z(64, 0.0, 0.0, None).with_successes(0);
        let zone = operating_zone(&[empty], &rule).unwrap();
        assert_eq!(
            (zone.ideal_balance, zone.safe_max),
            (None, None),
            "{zone:?}"
        );
        assert!(
            zone.summary
                .starts_with("no level is usable: fewer than 10"),
            "{}",
            zone.summary
        );
        let pts = [
            z(16, 5000.0, 800.0, None).with_successes(1024),
            z(64, 14000.0, 1100.0, None).with_successes(1024),
            z(256, 3.0, 40.0, None).with_successes(9),
        ];
        let zone = operating_zone(&pts, &rule).unwrap();
        assert_eq!(zone.ideal_balance, Some(64), "{zone:?}");
        assert_eq!(zone.safe_max, Some(64), "{zone:?}");
        assert!(
            zone.summary.contains(
                "left out, fewer than 10 successful requests (interrupted or failed): 256 (9)"
            ),
            "{}",
            zone.summary
        );
        assert!(zone.knee.reason.contains("256 (9)"), "{}", zone.knee.reason);
        // ten successes are enough; an unknown count changes nothing
        let pts = [
            pts[0],
            pts[1],
            z(256, 20000.0, 2000.0, None).with_successes(10),
        ];
        assert_eq!(operating_zone(&pts, &rule).unwrap().safe_max, Some(256));
        assert!(!z(1, 1.0, 1.0, None).too_thin());
        // a level of few successes because most requests failed is an error break, named so
        let failing = ZonePoint::new(LevelPoint::new(256, 3.0, 40.0), None, 0.9).with_successes(3);
        let zone = operating_zone(&[pts[0], pts[1], failing], &rule).unwrap();
        assert_eq!(zone.error_breaking_point, Some(256), "{zone:?}");
        assert!(!zone.summary.contains("left out"), "{}", zone.summary);
    }

    /// A server that answers 503 beyond two streams: the levels at 97 % errors look fast (the
    /// failures return at once) and their throughput of the few successes is flat. They must
    /// never be the operating level or define the knee.
    #[test]
    fn levels_with_errors_are_never_the_operating_level() {
        let e =
            |c: u32, t: f64, l: f64, err: f64| ZonePoint::new(LevelPoint::new(c, t, l), None, err);
        let pts = [
            e(1, 100.0, 50.0, 0.0),
            e(2, 190.0, 55.0, 0.0),
            e(8, 200.0, 20.0, 0.75),
            e(32, 205.0, 21.0, 0.97),
        ];
        let zone = operating_zone(&pts, &KneeRule::default()).unwrap();
        assert_eq!(zone.ideal_balance, Some(2), "{zone:?}");
        assert_eq!(zone.safe_max, Some(2), "{zone:?}");
        assert_eq!(zone.error_breaking_point, Some(8));
        assert_eq!(zone.sla_breaking_point, Some(8));
        assert!(
            zone.summary.contains("errors exceed 5 % at 8"),
            "{}",
            zone.summary
        );
        assert!(
            zone.knee.reason.contains("left out"),
            "{}",
            zone.knee.reason
        );
        // The same levels with SLAs that the fast failures meet: still not chosen.
        let with_slas: Vec<ZonePoint> = pts
            .iter()
            .map(|p| ZonePoint::new(p.point, Some(true), p.error_rate))
            .collect();
        let zone = operating_zone(&with_slas, &KneeRule::default()).unwrap();
        assert_eq!(zone.ideal_balance, Some(2));
    }

    #[test]
    fn a_run_where_every_request_failed_has_no_operating_level() {
        let pts = [
            ZonePoint::new(LevelPoint::new(1, 0.0, 3.0), None, 1.0),
            ZonePoint::new(LevelPoint::new(8, 0.0, 3.0), None, 1.0),
        ];
        let zone = operating_zone(&pts, &KneeRule::default()).unwrap();
        assert_eq!(zone.ideal_balance, None);
        assert_eq!(zone.knee.knee, None);
        assert_eq!(zone.safe_max, None);
        assert!(
            zone.summary.starts_with("no level is usable"),
            "{}",
            zone.summary
        );
        assert!(
            zone.knee.reason.contains("every level"),
            "{}",
            zone.knee.reason
        );
    }

    /// Issue 57, item 17: a level cut short by Ctrl-C (5 answered, 4 cancelled in flight) read
    /// as "more than 5 % of requests failed". Cancelled requests are not failures: the level
    /// is too thin to use, and the zone says that, not that requests failed.
    #[test]
    fn cancelled_requests_are_not_failures() {
        let p = ZonePoint::of_counts(LevelPoint::new(4, 50.0, 900.0), None, 9, 4, 4);
        assert_eq!((p.error_rate, p.successes), (0.0, Some(5)));
        let zone = operating_zone(&[p], &KneeRule::default()).unwrap();
        assert_eq!(zone.error_breaking_point, None, "{zone:?}");
        assert!(
            !zone.summary.contains("failed at every level"),
            "{}",
            zone.summary
        );
        assert!(
            zone.summary
                .starts_with("no level is usable: fewer than 10"),
            "{}",
            zone.summary
        );
        // real failures beside the cancelled ones still count, over the requests judged
        let p = ZonePoint::of_counts(LevelPoint::new(4, 50.0, 900.0), None, 104, 14, 4);
        assert!((p.error_rate - 0.1).abs() < 1e-12, "{}", p.error_rate);
        assert_eq!(p.successes, Some(90));
        // everything cancelled: nothing failed, nothing succeeded
        let p = ZonePoint::of_counts(LevelPoint::new(4, 0.0, 0.0), None, 3, 3, 3);
        assert_eq!((p.error_rate, p.successes), (0.0, Some(0)));
    }

    #[test]
    fn source_sweep_without_slas() {
        let pts = [
            z(64, 1433.0, 12_000.0, None),
            z(256, 2823.0, 28_600.0, None),
            z(1024, 2790.0, 98_000.0, None),
        ];
        let zone = operating_zone(&pts, &KneeRule::default()).unwrap();
        assert_eq!(zone.knee.knee, Some(256));
        assert_eq!(zone.ideal_balance, Some(256));
        assert_eq!(zone.safe_max, Some(256));
        assert_eq!(zone.sla_breaking_point, None);
        assert!(zone.summary.contains("operate at 256"));
    }

    #[test]
    fn sla_breaks_before_the_knee() {
        let pts = [
            z(16, 490.0, 8_000.0, Some(true)),
            z(64, 1430.0, 12_000.0, Some(true)),
            z(128, 2060.0, 17_000.0, Some(false)),
            z(256, 2820.0, 28_000.0, Some(false)),
            z(1024, 2800.0, 98_000.0, Some(false)),
        ];
        let zone = operating_zone(&pts, &KneeRule::default()).unwrap();
        assert_eq!(zone.knee.knee, Some(256));
        assert_eq!(zone.sla_breaking_point, Some(128));
        assert_eq!(zone.ideal_balance, Some(64));
        assert_eq!(zone.safe_max, Some(64));
        assert!(zone.summary.contains("SLAs break at 128"));
    }

    #[test]
    fn nothing_meets_the_slas() {
        let pts = [
            z(16, 490.0, 8_000.0, Some(false)),
            z(32, 900.0, 9_000.0, Some(false)),
        ];
        let zone = operating_zone(&pts, &KneeRule::default()).unwrap();
        assert_eq!(zone.ideal_balance, None);
        assert_eq!(zone.safe_max, None);
        assert!(zone.summary.starts_with("no level"));
    }
}
