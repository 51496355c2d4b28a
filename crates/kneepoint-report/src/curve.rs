//! The data of the throughput-latency curves: what a run's levels give the plots.

/// One measured level, as the plots need it.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    /// Concurrency.
    pub concurrency: u32,
    /// Output tokens per second.
    pub throughput: f64,
    /// Request latency p50, ms.
    pub e2e_p50_ms: Option<f64>,
    /// Request latency p90, ms.
    pub e2e_p90_ms: Option<f64>,
    /// Request latency p99, ms.
    pub e2e_p99_ms: Option<f64>,
    /// Whether the level met the SLAs (`None`: no SLAs).
    pub meets_slas: Option<bool>,
}

/// The levels of one endpoint (one candidate), with its knee and chosen operating point.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Curve {
    /// Legend name.
    pub name: String,
    /// Levels, in any order (drawn by concurrency).
    pub points: Vec<CurvePoint>,
    /// The knee's concurrency.
    pub knee: Option<u32>,
    /// The operating point's concurrency.
    pub chosen: Option<u32>,
}
