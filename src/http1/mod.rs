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
//! - [`Framing`]: how a message body is delimited, whichever role decided it;
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
pub mod head;
pub mod server;

/// How a message body is delimited (RFC 9112 §6). Each role decides it from a head, as it
/// reads one or as it writes one; [`decode::Decoder`] reads a body by it, and the connection
/// code writes one by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body, whatever the head says: a response to `HEAD`, a 1xx, a 204 or a 304.
    Nothing,
    /// Exactly this many bytes; `Length(0)` for an empty body (a request without framing
    /// fields has one).
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
    /// Everything up to the connection's close (a response's body only).
    Close,
}

/// What a body to be sent says of itself before it is read: each role frames it by this
/// ([`server::encode`], [`client::frame`]).
#[derive(Debug, Clone, Copy)]
pub struct Known {
    pub empty: bool,
    pub length: Option<u64>,
}
