//! What toolpulse adds around the stream: the hosted next-turn store, tools' progress (its
//! inbox and the Redis bus), the MCP front, OpenTelemetry, and the log of unconfigured tools.

pub mod hosted;
pub mod mcp;
pub mod progress;
pub mod telemetry;
pub mod unconfigured;
