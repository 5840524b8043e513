//! The integration tests, as one binary with a module per area (as tokio and hyper do): each
//! test binary links the whole crate and its dependencies again, so one binary instead of
//! twenty-two keeps the test build small. Tests of every module run in one process, in
//! parallel: none may rely on process-wide state (a fixed port, an environment variable, a
//! global). `tests/faults.rs` is the one binary of its own: it counts the process's open file
//! descriptors, which other tests' sockets would change.
//!
//! Run one module with `cargo test --test it <module>::`, e.g. `cargo test --test it proxy::`.

mod common;

// The fuzz targets' checks, shared with the `fuzz/` crate, which has them at its root too:
// `h1_request.rs` names `crate::checks`.
#[path = "../../fuzz/checks.rs"]
mod checks;
#[path = "../../fuzz/h1_request.rs"]
mod h1_request;

mod ag_ui;
mod attacks;
mod bus;
mod cli;
mod costs;
mod deploy;
mod docs;
mod fixtures;
mod fuzz_corpus;
mod h1_server;
mod h1_upstream;
mod hardening;
mod layers;
mod mcp_front;
mod next_turn;
mod operating;
mod oracle;
mod progress;
mod properties;
mod proxy;
mod replicas;
mod schemas;
mod security;
mod telemetry;
mod tls;
mod upstream;
