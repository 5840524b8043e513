//! Client connections served as HTTP/1.1 by toolpulse itself, not by hyper's server: its fixed
//! 8 KiB read buffer and 8 KiB head buffer were most of what an open stream held, and its
//! dispatcher and body channel a good part of the CPU per event.
//!
//! The bytes are read and written with the codec both roles share (`http1`: the request head
//! parsed, the body decoded, the response head and chunks framed, as a server); this folder
//! holds the socket and the server's policy around it:
//!
//! - [`body`] is the request body, read from the connection's buffer as it is polled;
//! - [`conn`] is the connection: one exchange at a time, keep-alive, the client's close
//!   watched; [`linger`] closes it without a reset while the client may still be sending;
//!   [`send`] writes it, and times a client that stops taking its response; [`date`] is the
//!   `Date` its responses get.
//!
//! HTTP/2 stays on hyper (the listener's `sniff` tells the two apart).

pub mod body;
pub mod conn;
mod date;
mod gone;
mod linger;
mod send;
