//! The MCP front's requests as client spans (toolpulse calling an MCP server for the gateway),
//! under the trace the gateway propagated: the request's `traceparent` header, else the
//! `params._meta.traceparent` of the body's first `tools/call` (the MCP SDKs' way). A request
//! with neither gets no span, so a gateway that does not trace its MCP calls does not scatter
//! one-span traces over the backend. The server receives the client span's `traceparent`.
//!
//! Names and attributes follow the MCP semantic conventions where they apply:
//! `tools/call {tool}` or the JSON-RPC method, `mcp.method.name`, `gen_ai.tool.name`, and the
//! HTTP client ones (`http.request.method`, `server.address`, `http.response.status_code`).

use http::request::Parts;
use http::{HeaderMap, Uri};
use opentelemetry::KeyValue;
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry_sdk::trace::Span;

use super::{Telemetry, set_trace_headers};
use crate::metrics::McpOutcome;

/// What of an MCP request names its span.
pub struct McpRequest<'a> {
    /// The `[[mcp.servers]]` name.
    pub server: &'a str,
    pub upstream: &'a Uri,
    /// The JSON-RPC methods of a POST body, in order.
    pub rpc: &'a [String],
    /// The first `tools/call`'s tool name and `params._meta.traceparent`.
    pub tool: Option<(&'a str, Option<&'a str>)>,
}

/// One MCP request's client span, ended when its answer is done.
pub struct McpSpan {
    span: Span,
}

impl Telemetry {
    /// Starts the client span of an MCP request the gateway traced, and points the request's
    /// `traceparent` at it; `None` (and the headers untouched) when the gateway sent no trace.
    pub fn mcp_request(&self, head: &mut Parts, request: &McpRequest<'_>) -> Option<McpSpan> {
        let parent = Some(self.parent(&head.headers))
            .filter(|cx| cx.span().span_context().is_valid())
            .or_else(|| {
                let meta = request.tool.and_then(|(_, traceparent)| traceparent)?;
                let mut headers = HeaderMap::new();
                headers.insert("traceparent", meta.parse().ok()?);
                Some(self.parent(&headers)).filter(|cx| cx.span().span_context().is_valid())
            })?;
        let method = match request.rpc {
            [one] => Some(one.as_str()),
            _ => None,
        };
        let name = match (method, request.tool) {
            (Some(m @ "tools/call"), Some((tool, _))) => format!("{m} {tool}"),
            (Some(m), _) => m.to_string(),
            (None, _) => format!("{} {}", head.method, request.server),
        };
        let mut attributes = vec![
            KeyValue::new("http.request.method", head.method.to_string()),
            KeyValue::new(
                "server.address",
                request.upstream.host().unwrap_or("").to_string(),
            ),
            KeyValue::new("toolpulse.mcp.server", request.server.to_string()),
        ];
        if let Some(port) = request.upstream.port_u16() {
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
        if let Some(method) = method {
            attributes.push(KeyValue::new("mcp.method.name", method.to_string()));
        }
        if let Some((tool, _)) = request.tool {
            attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_string()));
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        }
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        set_trace_headers(&mut head.headers, span.span_context());
        Some(McpSpan { span })
    }
}

impl McpSpan {
    /// Ends the span with the answer's status and how the request ended (`answered`,
    /// `unreachable`, `timeout`, …; see the MCP log line).
    pub fn end(mut self, status: u16, outcome: McpOutcome) {
        let broken = outcome.is_server_failure();
        let outcome = outcome.as_str();
        if status > 0 {
            let status = KeyValue::new("http.response.status_code", i64::from(status));
            self.span.set_attribute(status);
        }
        self.span
            .set_attribute(KeyValue::new("toolpulse.mcp.outcome", outcome));
        // HTTP client conventions: 4xx and 5xx fail a client span; so does a server that
        // could not be reached, did not answer in time or broke off its answer.
        if status >= 400 || broken {
            let kind = match broken {
                true => outcome.to_string(),
                false => status.to_string(),
            };
            self.span.set_attribute(KeyValue::new("error.type", kind));
            self.span.set_status(Status::error(outcome));
        }
        self.span.end();
    }
}
