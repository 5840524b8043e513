//! The record of one request on the MCP listener, written when its answer is done (or
//! dropped): one log line and `toolpulse_mcp_requests_total`. It holds the JSON-RPC method
//! names, never bodies, argument values or header values.

use std::sync::Arc;
use std::time::Instant;

use http::Method;

use crate::features::telemetry::mcp::McpSpan;
use crate::metrics::{McpOutcome, Metrics, labels};

pub struct McpLog {
    metrics: Arc<Metrics>,
    /// The configured server, or `None` for `/v1/progress` and unknown paths.
    pub server: Option<String>,
    method: Method,
    path: String,
    started: Instant,
    /// The JSON-RPC methods of a POST body.
    pub rpc: Vec<String>,
    /// `tools/call` requests whose progress is followed.
    pub calls: usize,
    pub status: u16,
    /// How it ended: answered, the client gone, broken, ended (drain), unreachable, timed
    /// out, an upstream error, not found, or a `/v1/progress` answer.
    pub outcome: McpOutcome,
    pub bytes_out: u64,
    /// The request's client span, when tracing is on and the gateway traced the request.
    pub span: Option<McpSpan>,
}

impl McpLog {
    pub fn new(metrics: Arc<Metrics>, method: Method, path: &str) -> Self {
        McpLog {
            metrics,
            server: None,
            method,
            path: path.chars().take(MAX_LOGGED_PATH_CHARS).collect(),
            started: Instant::now(),
            rpc: Vec::new(),
            calls: 0,
            status: 0,
            outcome: McpOutcome::ClientGone,
            bytes_out: 0,
            span: None,
        }
    }
}

/// Paths are logged; an unknown path is cut to this length.
const MAX_LOGGED_PATH_CHARS: usize = 128;

impl Drop for McpLog {
    fn drop(&mut self) {
        if let Some(server) = &self.server {
            let label = labels::McpRequests {
                server: server.clone(),
                outcome: self.outcome,
            };
            self.metrics.mcp_requests.get_or_create(&label).inc();
        }
        tracing::info!(
            server = self.server.as_deref(),
            method = %self.method,
            path = %self.path,
            rpc = ?self.rpc,
            calls = self.calls,
            status = self.status,
            outcome = self.outcome.as_str(),
            bytes_out = self.bytes_out,
            duration_ms = self.started.elapsed().as_millis() as u64,
            "mcp request"
        );
        if let Some(span) = self.span.take() {
            span.end(self.status, self.outcome);
        }
    }
}
