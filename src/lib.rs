//! toolpulse: a reverse proxy that injects tool lifecycle events into OpenAI Responses API
//! streams. Its layers, each importing only from the ones below it (`tests/it/layers.rs` walks
//! the module graph and holds the rule):
//!
//! - [`app`]: serve, the admin listener, the demo;
//! - [`proxy`]: the request handler: policy, the next turn, the rewritten body;
//! - [`features`]: the hosted store, progress and its bus, the MCP front, telemetry;
//! - [`net`]: listeners, the upstream client, TLS, body budgets, the drain;
//! - [`metrics`] and [`config`]: counters, and the validated configuration;
//! - [`core`]: the sans-IO rewriter and everything it is made of; [`http1`]: the sans-IO HTTP/1.1
//!   codec both roles share.

pub mod app;
pub mod config;
pub mod core;
pub mod features;
pub mod http1;
pub mod metrics;
pub mod net;
pub mod proxy;

pub use config::Config;
pub use core::rewrite::Rewriter;
