//! Server-Sent Events: the incremental parser ([`parse`]), the events it hands out ([`event`]),
//! and the encoder for injected events ([`write`]).

pub mod event;
pub mod parse;
pub mod write;

pub use event::{Event, Item};
pub use parse::Parser;
pub use write::{HEARTBEAT, NewEvent, encode};
