//! Server-Sent Events: the incremental parser ([`parse`]) and the encoder for injected events
//! ([`write`]).

pub mod parse;
pub mod write;

pub use parse::{Event, Item, Parser};
pub use write::{HEARTBEAT, NewEvent, encode};
