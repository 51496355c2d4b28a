//! Test support.
pub mod curves;
pub mod eval;
pub mod hostile;
