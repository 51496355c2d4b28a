//! The default sweep, owned by the engine so that a library sweep and the CLI agree: the
//! levels a sweep given none runs, and how many requests each sends when given no count.

/// Default levels: the source documents' sweep (a level of 16 was dropped: at four waves it
/// is a transient, and its 1,024 requests took 52 of the first run's 124 s).
pub const DEFAULT_CONCURRENCY: [u32; 3] = [64, 256, 1024];

/// A sweep's default lead-in, in requests (and at least one per slot): each level of a sweep
/// given no request count is kept loaded ([`crate::LevelSettings::lead_in`]).
pub const DEFAULT_LEAD_IN: u32 = 256;

/// The requests of a sweep level given no request count, at `concurrency` in a closed loop:
/// `(lead-in, measured)`. One wave of lead-in (at least 256 requests, so a low level's
/// lock-step waves have decayed) and two waves measured (at least 256), with the server kept
/// loaded until the last measured request ends. Against the calibrated simulator's long runs
/// these counts give TTFT p50/p95 and end-to-end p50/p99 within a few percent at every default
/// level (`kneepoint-config/tests/default_job.rs`, in virtual time), in about a third of the
/// wall time of the four unloaded waves they replace.
pub fn default_level_counts(concurrency: u32) -> (u32, u32) {
    (
        concurrency.max(DEFAULT_LEAD_IN),
        concurrency.saturating_mul(2).max(DEFAULT_LEAD_IN),
    )
}
