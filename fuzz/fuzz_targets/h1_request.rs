//! Arbitrary client requests, arbitrarily split, through toolpulse's own HTTP/1.1 server's
//! reading, judged against hyper's HTTP/1 server; see `h1_request::h1_request`.

#![no_main]

#[path = "../checks.rs"]
#[allow(dead_code, reason = "each target uses one of the checks")]
mod checks;
#[path = "../h1_request.rs"]
mod h1_request;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    h1_request::h1_request(data);
});
