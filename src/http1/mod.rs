//! A sans-IO HTTP/1.1 codec for both roles: toolpulse's own server reads request heads and
//! writes responses with it (`net::listen::h1`), its own client writes requests and reads
//! responses (`net::upstream::h1`). Everything here is plain functions and structs over the
//! bytes read so far or to be written: the connection code owns the socket, the buffer and the
//! clock, so parsing and framing can be tested and fuzzed byte by byte (`fuzz/checks.rs` and
//! `fuzz/h1_request.rs` hold them against hyper's client and server).
//!
//! Shaped as hyper's `proto/h1` (`decode.rs`, `encode.rs`, and `role.rs`, where its client and
//! server share one set of framing rules) and pingora's `http/v1/common.rs`: what both roles
//! share is written once, and each role adds its policy.
//!
//! - [`Framing`] (`framing.rs`): how a message body is delimited, whichever role decided it;
//! - [`head`]: what every head shares: its limits, the field checks (`Content-Length`,
//!   `Transfer-Encoding`, `Connection`), the blank line that ends it, its fields written out;
//! - [`server`]: the server's side: request heads parsed, response heads written;
//! - [`client`]: the client's side: response heads parsed, request heads written;
//! - [`decode`]: a message body taken apart as its framing says;
//! - [`encode`]: a message's bytes framed for writing: chunk size lines (on the stack), and the
//!   queue of head and body pieces one vectored write takes;
//! - [`buffer`]: how much the next read of a connection asks for.

pub mod buffer;
pub mod client;
pub mod decode;
pub mod encode;
mod framing;
pub mod head;
pub mod server;

pub use framing::{Framing, Known};
