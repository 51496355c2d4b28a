//! Fuzz target: `kneepoint_fuzz::prometheus_text` (see crates/kneepoint-fuzz).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kneepoint_fuzz::prometheus_text(data));
