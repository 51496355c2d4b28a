//! Fuzz target: `kneepoint_fuzz::sse_stream` (see crates/kneepoint-fuzz).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kneepoint_fuzz::sse_stream(data));
