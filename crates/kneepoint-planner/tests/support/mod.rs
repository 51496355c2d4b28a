//! Test support.
pub mod curves;
pub mod eval;
