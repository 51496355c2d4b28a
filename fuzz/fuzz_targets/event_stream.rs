//! Fuzz target: `kneepoint_fuzz::event_stream` (see crates/kneepoint-fuzz).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kneepoint_fuzz::event_stream(data));
