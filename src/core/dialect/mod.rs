//! Upstream dialects: what an upstream event means for tool calls, one small module per API.
//! Only the OpenAI Responses API ([`responses`]) exists today; others (Anthropic Messages,
//! Chat Completions) would produce the same [`crate::core::lifecycle::Signal`]s.

mod members;
pub mod request;
pub mod responses;
mod scan;
