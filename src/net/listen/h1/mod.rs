//! Client connections served as HTTP/1.1 by toolpulse itself (issue 28), not by hyper's
//! server: its fixed 8 KiB read buffer and 8 KiB head buffer were most of what an open stream
//! held, and its dispatcher and body channel a good part of the CPU per event.
//!
//! - [`head`] parses a request head and decides how its body is framed (sans-IO);
//! - [`response`] frames a response: its head, chunk size lines (sans-IO); [`out`] queues its
//!   bytes for vectored writes (sans-IO);
//! - [`body`] is the request body, read from the connection's buffer as it is polled;
//! - [`conn`] is the connection: one exchange at a time, keep-alive, the client's close
//!   watched; [`linger`] closes it without a reset while the client may still be sending;
//!   [`send`] writes it, and times a client that stops taking its response.
//!
//! HTTP/2 stays on hyper ([`super::sniff`]).

pub mod body;
pub mod conn;
pub mod head;
mod linger;
mod out;
pub mod response;
mod send;
