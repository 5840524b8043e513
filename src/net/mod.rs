//! The I/O glue below the features: listeners and their connections, the upstream client and
//! TLS, request-body budgets, hop-by-hop headers, the drain signal. It speaks HTTP/1.1 with the
//! sans-IO codec in `http1` and imports nothing from the layers above it: the listener's
//! service is a trait ([`server::Service`]) the proxy implements.

pub mod budget;
pub mod client;
pub mod drain;
pub mod headers;
pub mod listen;
pub mod server;
pub mod tls;
pub mod upstream;
