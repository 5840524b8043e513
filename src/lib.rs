//! toolpulse: a reverse proxy that injects tool lifecycle events into OpenAI Responses API
//! streams. This crate is the sans-IO core and its glue:
//!
//! - [`sse`]: the incremental, byte-faithful SSE parser and the encoder for injected events;
//! - [`dialect`]: what an upstream event means for tool calls (`responses`: OpenAI Responses);
//! - [`lifecycle`]: the neutral tool-call model, classification by name, failure rules, and the
//!   per-stream tracker that guarantees exactly-once closing;
//! - [`profiles`]: one small emitter per client contract (`openai` today);
//! - [`rewrite`]: the [`Rewriter`] that ties them together: `feed(chunk, now) -> Bytes`;
//! - [`config`]: the TOML configuration, validated;
//! - [`unconfigured`]: tools the gateway ran that no `[[tools]]` rule names, said once per name;
//! - [`mcp`]: the MCP front (a second listener before the gateway's MCP servers) and
//!   `POST /v1/progress`, which hand tools' progress to a [`progress::ProgressHub`];
//! - [`telemetry`]: OpenTelemetry spans (a server span per request, one per tool call, the MCP
//!   front's client spans) exported over OTLP/HTTP, off unless `[telemetry]` names a collector;
//! - [`invariants`]: a checker of PRODUCT.md §2's invariants over an input/output pair, used by
//!   the tests (and fuzzing).

pub mod admin;
pub mod config;
pub mod demo;
pub mod dialect;
pub mod drain;
pub mod hosted;
pub mod invariants;
pub mod lifecycle;
pub mod listen;
pub mod mcp;
pub mod metrics;
pub mod profiles;
pub mod progress;
pub mod proxy;
pub mod rewrite;
pub mod rules;
pub mod sanitize;
pub mod serve;
pub mod sse;
pub mod telemetry;
pub mod unconfigured;

pub use config::Config;
pub use rewrite::Rewriter;
