//! The rewriter's inputs (arbitrary bytes or generated agentic streams, arbitrarily split)
//! through the AG-UI translator, judged by the oracle's AG-UI checker; see `checks::ag_ui`.

#![no_main]

#[path = "../checks.rs"]
#[allow(dead_code, reason = "each target uses one of the checks")]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::ag_ui(data);
});
