//! Upstream dialects: what an upstream event means for tool calls, one small module per API.
//! Only the OpenAI Responses API exists today: its events ([`responses`]), the output lists of
//! its response objects ([`listing`]) and its request bodies ([`request`]); others (Anthropic
//! Messages, Chat Completions) would produce the same [`crate::core::lifecycle::Signal`]s.

pub mod listing;
mod members;
pub mod request;
pub mod responses;
mod scan;

/// For writers of JSON strings (`sse::write`): whether one needs no escape.
pub(crate) use scan::is_plain;
