//! Arbitrary upstream responses, arbitrarily split, through toolpulse's own HTTP/1.1 reading,
//! judged against hyper's HTTP/1 client; see `checks::h1`.

#![no_main]

#[path = "../checks.rs"]
#[allow(dead_code, reason = "each target uses one of the checks")]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::h1(data);
});
