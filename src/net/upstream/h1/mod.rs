//! HTTP/1.1 responses read by toolpulse itself (issue 28), without hyper's client: less CPU
//! and memory per stream.
//!
//! Both halves are sans-IO, plain functions and structs over the bytes read so far, so the
//! connection code owns the buffer, the socket and the clock, and the parsing can be tested and
//! fuzzed byte by byte:
//!
//! - [`head`] parses the response head and decides how the body is framed (RFC 9112 §6.3);
//! - [`decode`] takes the body apart as that framing says (Content-Length, chunked, or up to
//!   the connection's close).
//!
//! [`conn`] is the connection around them: the request written, the head and body read from
//! one buffer, the connection handed back to the pool.
//!
//! Both are at least as strict as hyper's HTTP/1 client, which fuzz target `h1` uses as their
//! oracle (`fuzz/checks.rs`).

pub mod conn;
pub mod decode;
pub mod head;
mod io;
mod request;
