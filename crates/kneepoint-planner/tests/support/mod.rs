//! Test support.
pub mod curves;
