//! Event profiles: each renders lifecycle transitions as the SSE events one kind of client
//! expects. A profile is a small pure function of the transition and a [`Context`]; the rewriter
//! numbers and encodes what it returns. Several profiles may be active on one stream.
//!
//! - [`Profile`] (`core/profile.rs`): the profiles by name, and which may go together;
//! - [`render`]: a profile's events for a transition, and the calls it shows;
//! - [`context`]: what a profile may look at besides the transition;
//! - the presentations of a call: [`hosted`] items, [`openai`] companions (and its inline
//!   shape), with what their items share ([`item`]) and their out-of-band [`progress`] events;
//! - the payload-carrying profiles [`stages`], [`tool_call`] and [`tool`], and what they derive
//!   from a call (`text`).

pub mod context;
pub mod hosted;
pub mod item;
pub mod openai;
pub mod progress;
pub mod render;
pub mod stages;
mod text;
pub mod tool;
pub mod tool_call;

pub use crate::core::profile::{PRESENTATIONS, Profile, check_combination, parse_list};
pub use context::Context;
