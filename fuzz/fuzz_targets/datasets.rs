//! Fuzz target: `kneepoint_fuzz::datasets` (see crates/kneepoint-fuzz).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kneepoint_fuzz::datasets(data));
