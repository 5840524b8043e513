//! The sans-IO core: bytes and `now` in, bytes out; no I/O, no clock, no config file type (the
//! config builds the [`settings::Settings`] it takes).
//!
//! - [`sse`]: the incremental, byte-faithful SSE parser and the encoder for injected events;
//! - [`dialect`]: what an upstream event means for tool calls (OpenAI Responses);
//! - [`lifecycle`]: the neutral tool-call model, classification by name, failure rules, and the
//!   per-stream tracker that guarantees exactly-once closing;
//! - [`ids`]: the ids of toolpulse's own items (companions, HMAC-signed hosted items);
//! - [`sanitize`] and [`rules`]: repairs of malformed streams and the stream rules they keep;
//! - [`profiles`]: the presentations, one small emitter per client contract;
//! - [`rewrite`]: the [`rewrite::Rewriter`] that ties them together: `feed(chunk, now) -> Bytes`;
//! - [`ag_ui`]: an AG-UI run from a Responses stream: the request's translation and the
//!   [`ag_ui::Translator`], a presentation of the same lifecycle that emits AG-UI events.

pub mod ag_ui;
pub mod dialect;
pub mod ids;
pub mod lifecycle;
pub mod profile;
pub mod profiles;
pub mod rewrite;
pub mod rules;
pub mod sanitize;
pub mod settings;
pub mod sse;
