//! Fuzz target: `kneepoint_fuzz::config_text` (see crates/kneepoint-fuzz).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kneepoint_fuzz::config_text(data));
