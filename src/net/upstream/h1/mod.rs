//! HTTP/1.1 responses read by toolpulse itself, without hyper's client: less CPU and memory per
//! stream.
//!
//! The bytes are parsed and framed with the sans-IO codec both roles share (`http1`, as a
//! client: the response head and how its body is framed, the body decoded, the request head and
//! chunks written); this folder holds the socket and the client's policy around it:
//!
//! - [`conn`] is the connection: the request written, the head and body read from one buffer,
//!   the connection handed back to the pool;
//! - `read` reads it: into the thread's scratch buffer, a small body read decoded there and its
//!   data copied out at its size, a flood read straight into the connection's buffer;
//! - `request` writes the request body as its framing says, while the response may already
//!   be coming;
//! - `io` is the byte stream, TCP or TLS, taken out of the connector's wrappers.
//!
//! The codec is at least as strict as hyper's HTTP/1 client, which fuzz target `h1` uses as its
//! oracle (`fuzz/checks.rs`).

pub mod conn;
mod io;
mod read;
mod request;
