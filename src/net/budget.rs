//! Request bodies toolpulse reads whole (a `POST …/responses` on the proxy, an MCP POST on the
//! front), held in memory until they are sent on: all of them together within one budget of
//! bytes (`[clients] body_buffer_bytes`, shared by the listeners), each within a deadline
//! (`body_timeout_ms`). A body that would go over the budget is refused at once (503, counted)
//! rather than waited for: a waiting body would hold its part of the budget while it waits.
//! Bodies toolpulse does not read stream through, and may pause at most `body_timeout_ms`
//! between two frames ([`Paced`]).
//!
//! A body is charged for the bytes it received, never for the length it announced: its buffer
//! grows as data arrives ([`read_up_to`]), and each growth is charged before it is made. So a
//! socket that announces 4 MiB and sends one byte holds a few KiB, not 4 MiB.
//!
//! Who may hold what, checked together under one lock at every charge ([`BodyBudget::take`]):
//! - all bodies: the budget;
//! - large bodies (whose buffer is over [`SMALL_BODY_BYTES`]): three quarters, so that the
//!   small ones (most requests are a few KiB) are still read while large ones pin memory;
//! - the proxy listener: all but an eighth ([`MCP_RESERVE_DIVISOR`]), which is kept for the
//!   MCP front, so the gateway's tool calls go on while clients fill the rest;
//! - one peer address on one listener (an IPv6 peer by its /64, which one host commonly holds
//!   whole): `body_buffer_bytes_per_peer`, so one peer cannot take the budget from the others;
//! - one connection (an HTTP/2 one: all its streams): `body_buffer_bytes_per_connection`.
//!
//! A charge is made through the budget of a connection ([`BodyBudget::connection`]); the
//! process-wide one charges the first three only.

mod error;
mod paced;
mod read;
mod shares;

pub use error::ReadError;
pub use paced::{Fault, Paced};
pub use read::{Read, read_up_to, whole};
pub use shares::*;
