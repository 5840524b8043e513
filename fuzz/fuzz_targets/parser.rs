//! Arbitrary bytes, arbitrarily split, through the SSE parser; see `checks::parser`.

#![no_main]

#[path = "../checks.rs"]
#[allow(dead_code, reason = "each target uses one of the checks")]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::parser(data));
