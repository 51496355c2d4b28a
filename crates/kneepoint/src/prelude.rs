//! The names most programs use: `use kneepoint::prelude::*;`.
//!
//! The transport's error is `TransportError` here (it is `kneepoint::types::Error`), so that it
//! does not hide a program's own `Error`. `Search` is the engine's search (it runs probes and
//! writes artifacts); `SearchPlanner` is the pure decision logic under it, for a program that
//! measures by itself. `BenchOptions` gives the sweep and search builders their common
//! options (`.workload`, `.artifacts`, `.settings`, `.observer`...).

pub use kneepoint_core::{
    async_trait, iter_stream, Chunk, Error as TransportError, EventStream, Metric, Request,
    RequestRecord, ResponseEvent, Stat, StatKey, TokenCounter, Transport, Usage,
};
pub use kneepoint_engine::{
    BenchOptions, CancelToken, LevelSettings, Observer, Recommend, RecommendReport, Search,
    SearchReport, Sweep, SweepReport,
};
pub use kneepoint_planner::{SearchConfig, SearchPlanner, Sla, SweepPlan};
#[cfg(feature = "builtin-tokenizer")]
pub use kneepoint_workload::load_tokenizer;
pub use kneepoint_workload::{LengthDist, SyntheticConfig, SyntheticWorkload, Workload};

#[cfg(all(feature = "sim", feature = "openai"))]
pub use crate::LocalSim;
#[cfg(feature = "sim")]
pub use kneepoint_sim::{SimProfile, SimServer};
#[cfg(feature = "openai")]
pub use kneepoint_transport::{OpenAiConfig, OpenAiTransport};
