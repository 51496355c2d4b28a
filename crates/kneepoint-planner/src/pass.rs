//! The probability that a level meets its SLAs, from its readings and their spread.

use crate::sla::{Sla, SlaCheck};

/// The probability that every SLA holds at a level, from each check's reading and its
/// relative standard error: `ln(load)` taken as normal with that spread, the SLAs as
/// independent. A check without a spread counts as its verdict (1 or 0); a reading of nothing
/// as a breach.
pub fn pass_probability(slas: &[Sla], checks: &[SlaCheck]) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    let normal = Normal::standard();
    checks
        .iter()
        .map(|c| {
            let load = slas
                .iter()
                .find(|s| s.name == c.sla)
                .zip(c.value)
                .and_then(|(s, v)| crate::predict::load(s, v));
            match (load, c.spread) {
                (Some(l), Some(se)) if l > 0.0 && se > 0.0 => normal.cdf(-l.ln() / se),
                _ => f64::from(u8::from(c.holds)),
            }
        })
        .product()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sla::{check_all, Measurement};
    use crate::{Metric, Stat};

    #[test]
    fn pass_probability_from_the_spread() {
        let slas = [Sla::e2e_ms(100.0).unwrap()];
        let at = |v: f64, se: Option<f64>| {
            let mut m = Measurement::new(1.0).with(Metric::RequestLatency, Stat::P99, v);
            if let Some(se) = se {
                m = m.with_spread(Metric::RequestLatency, Stat::P99, se);
            }
            pass_probability(&slas, &check_all(&slas, &m))
        };
        assert!((at(100.0, Some(0.05)) - 0.5).abs() < 1e-9);
        assert!(at(90.0, Some(0.05)) > 0.95 && at(90.0, Some(0.05)) < 1.0);
        assert!(at(110.0, Some(0.05)) < 0.05);
        assert_eq!(at(90.0, None), 1.0);
        assert_eq!(at(110.0, None), 0.0);
    }
}
