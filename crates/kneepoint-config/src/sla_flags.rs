//! The SLA flags every command that judges levels shares (`sweep`, `search`, `recommend`).

use clap::Args;

/// SLA thresholds (SageMaker's names).
#[derive(Debug, Clone, Default, Args)]
pub struct SlaArgs {
    /// Maximum p95 time to first token, ms (needs streaming).
    #[arg(long, value_name = "MS")]
    pub ttft_sla_ms: Option<f64>,
    /// Maximum p95 time per output token (ITL), ms (needs streaming).
    #[arg(long, value_name = "MS")]
    pub tpot_sla_ms: Option<f64>,
    /// Maximum p99 end-to-end latency, ms.
    #[arg(long, value_name = "MS")]
    pub e2e_sla_ms: Option<f64>,
    /// Maximum fraction of failed requests (0.01 = 1 %).
    #[arg(long, value_name = "FRACTION")]
    pub error_rate_sla: Option<f64>,
    /// Any SLA as metric:stat:op:threshold, e.g. time_to_first_token:p99:le:800 (repeatable).
    #[arg(long = "sla", value_name = "SPEC")]
    pub slas: Vec<String>,
}
