//! The I/O glue below the features: listeners and their connections, the upstream client and
//! TLS, request-body budgets, hop-by-hop headers, the drain signal.

pub mod budget;
pub mod client;
pub mod drain;
pub mod headers;
pub mod listen;
pub mod server;
pub mod upstream;
