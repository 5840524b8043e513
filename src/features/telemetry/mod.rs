//! OpenTelemetry tracing: what toolpulse measured of each request and tool call,
//! exported as OTLP/HTTP spans into the operators' own traces.
//!
//! - [`Telemetry`]: the tracer, started once by the service when `[telemetry]` names an
//!   endpoint; without one nothing here is created and the proxy does no per-event work.
//! - [`span`]: the server span of a proxied request and its `execute_tool` spans, fed the
//!   rewriter's observations by the body adapter.
//! - [`mcp`]: the MCP front's requests as client spans, under the gateway's trace.
//! - [`export`]: the bounded queue and the export task (drops and failures counted, an outage
//!   logged once); [`transport`]: the hyper + rustls client the exporter sends with.
//!
//! Trace context: an incoming `traceparent`/`tracestate` is continued, else a trace starts; the
//! gateway always receives toolpulse's `traceparent` (its parent is the server span), and the
//! progress registry correlates by that same trace id.

pub mod export;
pub mod mcp;
pub mod span;
pub mod transport;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use http::request::Parts;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, SpanKind, TraceContextExt, Tracer as _, TracerProvider};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    Sampler, SdkTracer, SdkTracerProvider, SpanExporter, SpanProcessor,
};
use tokio::sync::{mpsc, oneshot};

use crate::config::{Config, TelemetryConfig};
use crate::metrics::Metrics;
pub use span::{RequestEnd, RequestSpan};

/// One export request, retries included, may take this long.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// The process's tracer and the handle of its export task.
pub struct Telemetry {
    tracer: SdkTracer,
    propagator: TraceContextPropagator,
    flushes: mpsc::Sender<export::Flush>,
    record_payloads: bool,
}

impl Telemetry {
    /// Starts the exporter on the current tokio runtime; `None` when no endpoint is configured.
    pub fn start(
        config: &TelemetryConfig,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Option<Arc<Telemetry>>> {
        let Some(endpoint) = &config.traces_endpoint else {
            return Ok(None);
        };
        let headers: HashMap<String, String> = config.headers.iter().cloned().collect();
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(endpoint.to_string())
            .with_headers(headers)
            .with_timeout(EXPORT_TIMEOUT)
            .with_http_client(transport::Transport::new(EXPORT_TIMEOUT)?)
            .build()?;
        // The SDK's detectors add `telemetry.sdk.*` and `OTEL_RESOURCE_ATTRIBUTES`; the service
        // name is the config's, which already fell back to `OTEL_SERVICE_NAME`.
        let resource = Resource::builder()
            .with_service_name(config.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        exporter.set_resource(&resource);
        let (queue, spans) = export::Queue::new(metrics.clone());
        let (flushes, flush_requests) = mpsc::channel(1);
        let collector = collector_name(endpoint);
        tokio::spawn(export::run(
            exporter,
            spans,
            flush_requests,
            metrics,
            collector,
        ));
        let telemetry = Telemetry::with_processor(queue, config, resource, flushes);
        Ok(Some(Arc::new(telemetry)))
    }

    /// The tracer around `processor`: parent-based sampling at `config`'s ratio.
    fn with_processor(
        processor: impl SpanProcessor + 'static,
        config: &TelemetryConfig,
        resource: Resource,
        flushes: mpsc::Sender<export::Flush>,
    ) -> Telemetry {
        let ratio = Sampler::TraceIdRatioBased(config.sample_ratio);
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::ParentBased(Box::new(ratio)))
            .with_resource(resource)
            .build();
        let scope = InstrumentationScope::builder("toolpulse")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        Telemetry {
            tracer: provider.tracer_with_scope(scope),
            propagator: TraceContextPropagator::new(),
            flushes,
            record_payloads: config.record_payloads,
        }
    }

    /// Starts the server span of a request, continuing the trace its headers carry, and sets
    /// the request's `traceparent` (and `tracestate`) to the span's for the gateway.
    pub fn request(&self, head: &mut Parts, config: &Arc<Config>) -> RequestSpan {
        let parent = self.parent(&head.headers);
        let path = head.uri.path();
        let route = route(path);
        let name = match &route {
            Some(route) => format!("{} {route}", head.method),
            None => head.method.to_string(),
        };
        let mut attributes = vec![
            KeyValue::new("http.request.method", head.method.to_string()),
            KeyValue::new("url.path", path.to_string()),
            KeyValue::new("network.protocol.version", protocol_version(head.version)),
        ];
        if let Some(route) = route {
            attributes.push(KeyValue::new("http.route", route));
        }
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        let cx = parent.with_span(span);
        set_trace_headers(&mut head.headers, cx.span().span_context());
        let payloads = self.record_payloads.then(|| config.clone());
        RequestSpan::new(self.tracer.clone(), cx, payloads)
    }

    /// Whether tool spans carry arguments and results.
    pub fn records_payloads(&self) -> bool {
        self.record_payloads
    }

    /// Sends the spans queued so far; false when that took longer than `timeout`.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let (done, finished) = oneshot::channel();
        let flushed = async {
            self.flushes.send(done).await.ok()?;
            finished.await.ok()
        };
        matches!(tokio::time::timeout(timeout, flushed).await, Ok(Some(())))
    }

    /// The trace context in `headers`; an empty context (a new trace) when there is none or it
    /// is malformed.
    fn parent(&self, headers: &HeaderMap) -> Context {
        self.propagator
            .extract(&opentelemetry_http::HeaderExtractor(headers))
    }
}

/// Sets `traceparent` to `context` and `tracestate` to its state (removed when empty, as a
/// `tracestate` without the `traceparent` it came with means nothing).
fn set_trace_headers(headers: &mut HeaderMap, context: &SpanContext) {
    if !context.is_valid() {
        return;
    }
    let value = format!(
        "00-{}-{}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags().to_u8() & 1
    );
    if let Ok(value) = http::HeaderValue::from_str(&value) {
        headers.insert(TRACEPARENT, value);
    }
    let state = context.trace_state().header();
    match http::HeaderValue::from_str(&state) {
        Ok(value) if !state.is_empty() => {
            headers.insert(TRACESTATE, value);
        }
        _ => {
            headers.remove(TRACESTATE);
        }
    }
}

/// The route of a Responses API path, with the response id as a placeholder so span names
/// stay few (`POST /v1/responses`, `GET /v1/responses/{response_id}`); `None` for other paths,
/// whose spans are named by the method alone, as the HTTP conventions ask.
fn route(path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('/').collect();
    let at = segments.iter().position(|s| *s == "responses")?;
    let mut route: Vec<&str> = segments[..=at].to_vec();
    if segments.len() > at + 1 && !segments[at + 1].is_empty() {
        route.push("{response_id}");
        route.extend(&segments[at + 2..]);
    }
    Some(route.join("/"))
}

fn protocol_version(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => "1.1",
    }
}

/// The collector as logs name it: scheme, host and port, never user info or path.
fn collector_name(endpoint: &http::Uri) -> String {
    let scheme = endpoint.scheme_str().unwrap_or("http");
    let host = endpoint.host().unwrap_or("?");
    match endpoint.port_u16() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    }
}

#[cfg(test)]
mod tests;
