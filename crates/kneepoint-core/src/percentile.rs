//! The percentiles a level reports of a per-request metric.

/// A percentile a level reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Percentile {
    /// 1st.
    P1,
    /// 5th.
    P5,
    /// 10th.
    P10,
    /// 25th.
    P25,
    /// 50th (the median).
    P50,
    /// 75th.
    P75,
    /// 90th.
    P90,
    /// 95th.
    P95,
    /// 99th.
    P99,
}

impl Percentile {
    /// Every percentile reported, ascending.
    pub const ALL: [Percentile; 9] = [
        Percentile::P1,
        Percentile::P5,
        Percentile::P10,
        Percentile::P25,
        Percentile::P50,
        Percentile::P75,
        Percentile::P90,
        Percentile::P95,
        Percentile::P99,
    ];

    /// The quantile, in `0..1` (`0.99` for the 99th).
    pub const fn fraction(self) -> f64 {
        match self {
            Percentile::P1 => 0.01,
            Percentile::P5 => 0.05,
            Percentile::P10 => 0.10,
            Percentile::P25 => 0.25,
            Percentile::P50 => 0.50,
            Percentile::P75 => 0.75,
            Percentile::P90 => 0.90,
            Percentile::P95 => 0.95,
            Percentile::P99 => 0.99,
        }
    }

    /// Its label in files and SLAs (`p99`).
    pub const fn label(self) -> &'static str {
        match self {
            Percentile::P1 => "p1",
            Percentile::P5 => "p5",
            Percentile::P10 => "p10",
            Percentile::P25 => "p25",
            Percentile::P50 => "p50",
            Percentile::P75 => "p75",
            Percentile::P90 => "p90",
            Percentile::P95 => "p95",
            Percentile::P99 => "p99",
        }
    }
}
