//! The one name of a measured statistic, [`StatKey`] (`metric:stat`, kept in
//! `kneepoint-core` beside [`kneepoint_core::Metric`] so that level summaries are keyed by it
//! too), and an SLA's key.

pub use kneepoint_core::StatKey;

use crate::sla::Sla;

impl Sla {
    /// The metric and statistic, typed (`None` only for a hand-edited SLA whose names no level
    /// measures: [`Sla::parse`] and the constructors refuse those).
    pub fn key(&self) -> Option<crate::StatKey> {
        StatKey::measured(self.metric, self.stat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::{Metric, Stat};

    #[test]
    fn an_slas_key_is_its_metric_and_statistic() {
        let k = Sla::ttft_ms(500.0).unwrap().key().unwrap();
        assert_eq!(
            (k.metric(), k.stat()),
            (Metric::TimeToFirstToken, Stat::P95)
        );
        let mut odd = Sla::error_rate(0.01).unwrap();
        odd.stat = Stat::P99;
        assert_eq!(odd.key(), None);
    }
}
