//! The spans of one proxied request: a server span for the request, and inside it one
//! `execute_tool {name}` span per tool call the stream showed, built from the rewriter's
//! [`Observation`]s (never from a second parse of the stream).
//!
//! A tool span starts when toolpulse saw the call's arguments complete (`CallRunning`) and
//! ends after exactly the duration toolpulse measured (`CallFinished`), so its length is the
//! one the client was shown. Progress the call reported becomes span events. A call still
//! running when the request ends (the client went away) ends with the request, marked
//! `toolpulse.tool.outcome = "unfinished"`. Argument and result values are recorded only with
//! `[telemetry] record_payloads = true`, sanitized by the stream's `[sanitize]`.

use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};

use crate::config::Config;
use crate::core::lifecycle::Kind;
use crate::core::rewrite::{Observation, Stats};
use crate::features::progress::{Progress, TraceId};
use crate::metrics::{Response, StreamEnd};

/// Tool spans open at once per request; calls beyond it get no span (the tracker keeps at
/// most `[limits] max_open_calls` anyway).
pub const MAX_OPEN_TOOL_SPANS: usize = 256;

/// How the request ended, for the server span's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestEnd {
    pub status: u16,
    pub response: Response,
    /// How a rewritten stream ended, and its counters.
    pub stream: Option<(StreamEnd, Stats)>,
    pub bytes_out: u64,
}

/// The server span of one request and its open tool spans.
pub struct RequestSpan {
    tracer: SdkTracer,
    /// The server span, as the parent of the tool spans.
    cx: Context,
    /// The stream's config when payloads are recorded (its sanitizer); `None`: never recorded.
    payloads: Option<Arc<Config>>,
    tools: Vec<OpenTool>,
}

struct OpenTool {
    call_id: String,
    span: Span,
    started: SystemTime,
}

impl RequestSpan {
    pub(super) fn new(tracer: SdkTracer, cx: Context, payloads: Option<Arc<Config>>) -> Self {
        RequestSpan {
            tracer,
            cx,
            payloads,
            tools: Vec::new(),
        }
    }

    /// The trace the request belongs to (and the gateway was told).
    pub fn trace_id(&self) -> TraceId {
        TraceId(self.cx.span().span_context().trace_id().to_bytes())
    }

    /// Whether the trace is sampled; an unsampled one gets no tool spans at all.
    pub fn is_recording(&self) -> bool {
        self.cx.span().is_recording()
    }

    /// Takes what the rewriter observed; called where the proxy records its metrics.
    pub fn observe(&mut self, observation: &Observation) {
        if !self.is_recording() {
            return;
        }
        let now = SystemTime::now();
        match observation {
            Observation::CallRunning {
                call_id,
                name,
                arguments,
            } => {
                if self.tools.len() >= MAX_OPEN_TOOL_SPANS || self.open(call_id).is_some() {
                    return;
                }
                let mut span = self.start_tool(name, call_id, now);
                if let Some(config) = &self.payloads {
                    let value = config.sanitizer.text_as_string(arguments);
                    span.set_attribute(KeyValue::new("gen_ai.tool.call.arguments", value));
                }
                let call_id = call_id.clone();
                let started = now;
                self.tools.push(OpenTool {
                    call_id,
                    span,
                    started,
                });
            }
            Observation::HostedPair { .. } | Observation::ResponseId { .. } => {}
            Observation::Progress { call_id, report } => {
                if let Some(i) = self.open(call_id) {
                    self.tools[i].span.add_event_with_timestamp(
                        "progress",
                        now,
                        progress_attributes(report),
                    );
                }
            }
            Observation::CallFinished {
                call_id,
                name,
                kind,
                outcome,
                error_kind,
                output,
                duration,
                ..
            } => {
                let (mut span, started) = match self.open(call_id) {
                    Some(i) => {
                        let tool = self.tools.swap_remove(i);
                        (tool.span, tool.started)
                    }
                    // Finished without running (arguments never completed): it started
                    // `duration` ago by toolpulse's clock.
                    None => {
                        let started = now.checked_sub(*duration).unwrap_or(now);
                        (self.start_tool(name, call_id, started), started)
                    }
                };
                span.set_attributes([
                    KeyValue::new("gen_ai.tool.type", tool_type(*kind)),
                    KeyValue::new("toolpulse.tool.kind", kind.as_str()),
                    KeyValue::new("toolpulse.tool.outcome", *outcome),
                ]);
                if let (Some(config), Some(output)) = (&self.payloads, output) {
                    let value = config.sanitizer.result_text(output);
                    span.set_attribute(KeyValue::new("gen_ai.tool.call.result", value));
                }
                if let Some(kind) = error_kind {
                    span.set_attribute(KeyValue::new("error.type", kind.clone()));
                    span.set_status(Status::error(kind.clone()));
                }
                span.end_with_timestamp(started + *duration);
            }
            Observation::Injected(_) => {}
        }
    }

    /// Ends the request's span (and any tool span still open) with how the request went.
    pub fn end(mut self, end: &RequestEnd) {
        let now = SystemTime::now();
        for mut tool in self.tools.drain(..) {
            tool.span
                .set_attribute(KeyValue::new("toolpulse.tool.outcome", "unfinished"));
            tool.span.end_with_timestamp(now);
        }
        let span = self.cx.span();
        if !span.is_recording() {
            return;
        }
        span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(end.status),
        ));
        span.set_attribute(KeyValue::new("toolpulse.response", end.response.as_str()));
        span.set_attribute(KeyValue::new("toolpulse.bytes.out", end.bytes_out as i64));
        if let Some((outcome, stats)) = end.stream {
            span.set_attributes([
                KeyValue::new("toolpulse.stream.outcome", outcome.as_str()),
                KeyValue::new("toolpulse.events.in", stats.events_in as i64),
                KeyValue::new("toolpulse.events.injected", stats.injected as i64),
            ]);
        }
        // HTTP server conventions: only 5xx marks a server span as failed.
        if end.status >= 500 {
            span.set_attribute(KeyValue::new("error.type", end.status.to_string()));
            span.set_status(Status::error(end.response.as_str()));
        }
        span.end_with_timestamp(now);
    }

    fn open(&self, call_id: &str) -> Option<usize> {
        self.tools.iter().position(|t| t.call_id == call_id)
    }

    fn start_tool(&self, name: &str, call_id: &str, at: SystemTime) -> Span {
        self.tracer
            .span_builder(format!("execute_tool {name}"))
            .with_kind(SpanKind::Internal)
            .with_start_time(at)
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new("gen_ai.tool.name", name.to_string()),
                KeyValue::new("gen_ai.tool.call.id", call_id.to_string()),
            ])
            .start_with_context(&self.tracer, &self.cx)
    }
}

/// The GenAI conventions' `gen_ai.tool.type`: tools the agent's host runs for it are
/// extensions, a search over the user's files a datastore, anything else a function.
pub fn tool_type(kind: Kind) -> &'static str {
    match kind {
        Kind::Mcp | Kind::WebSearch => "extension",
        Kind::FileSearch => "datastore",
        Kind::Function | Kind::Ignore => "function",
    }
}

fn progress_attributes(report: &Progress) -> Vec<KeyValue> {
    let mut attributes = vec![KeyValue::new("toolpulse.progress", report.progress)];
    if let Some(total) = report.total {
        attributes.push(KeyValue::new("toolpulse.progress.total", total));
    }
    // Already sanitized by the rewriter when it arrived.
    if let Some(message) = &report.message {
        attributes.push(KeyValue::new("toolpulse.progress.message", message.clone()));
    }
    attributes
}
