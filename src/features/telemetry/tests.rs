//! The spans toolpulse makes, captured by an in-process span processor (no exporter, no
//! sockets): names, parents, attributes, timing, status, trace headers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Request;
use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};

use super::*;
use crate::core::lifecycle::Kind;
use crate::core::rewrite::{Observation, Stats};
use crate::features::progress::Progress;
use crate::metrics::{Response, StreamEnd};

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[derive(Debug, Clone, Default)]
struct Captured(Arc<Mutex<Vec<SpanData>>>);

impl SpanProcessor for Captured {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}
    fn on_end(&self, span: SpanData) {
        self.0.lock().expect("not poisoned").push(span);
    }
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

impl Captured {
    fn spans(&self) -> Vec<SpanData> {
        self.0.lock().expect("not poisoned").clone()
    }
}

fn telemetry(config: TelemetryConfig) -> (Telemetry, Captured) {
    let captured = Captured::default();
    let (flushes, _) = mpsc::channel(1);
    let resource = Resource::builder_empty().build();
    let telemetry = Telemetry::with_processor(captured.clone(), &config, resource, flushes);
    (telemetry, captured)
}

fn head(headers: &[(&str, &str)]) -> Parts {
    let mut request = Request::post("http://gw/v1/responses");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    request.body(()).expect("request").into_parts().0
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> Option<String> {
    attribute(span, key).map(|v| v.as_str().into_owned())
}

/// A finished span, for the export queue's tests.
pub(super) fn span_data(name: &'static str) -> SpanData {
    let (telemetry, captured) = telemetry(TelemetryConfig::default());
    let config = Arc::new(crate::Config::default());
    telemetry.request(&mut head(&[]), &config).end(&end(200));
    let mut span = captured.spans().remove(0);
    span.name = name.into();
    span
}

fn end(status: u16) -> RequestEnd {
    RequestEnd {
        status,
        response: Response::Rewritten,
        stream: Some((
            StreamEnd::Completed,
            Stats {
                events_in: 12,
                injected: 4,
                ..Stats::default()
            },
        )),
        bytes_out: 999,
    }
}

fn running(call_id: &str, name: &str) -> Observation {
    Observation::CallRunning {
        call_id: call_id.into(),
        name: name.into(),
        arguments: r#"{"query":"rust","api_key":"sk-123"}"#.into(),
    }
}

fn finished(call_id: &str, name: &str, kind: Kind, error_kind: Option<&str>) -> Observation {
    Observation::CallFinished {
        call_id: call_id.into(),
        name: name.into(),
        kind,
        rule: None,
        had_output: true,
        outcome: if error_kind.is_some() {
            "failed"
        } else {
            "completed"
        },
        error_kind: error_kind.map(str::to_string),
        output: Some(r#"{"answer":"42","token":"t-9"}"#.into()),
        duration: Duration::from_millis(1500),
    }
}

#[test]
fn routes_name_the_responses_api_and_nothing_else() {
    assert_eq!(route("/v1/responses").as_deref(), Some("/v1/responses"));
    assert_eq!(
        route("/v1/responses/resp_123").as_deref(),
        Some("/v1/responses/{response_id}")
    );
    assert_eq!(
        route("/gw/v1/responses/resp_1/input_items").as_deref(),
        Some("/gw/v1/responses/{response_id}/input_items")
    );
    assert_eq!(route("/v1/models"), None);
}

#[test]
fn an_incoming_trace_is_continued_and_the_gateway_gets_a_child() {
    let (telemetry, captured) = telemetry(TelemetryConfig::default());
    let config = Arc::new(crate::Config::default());
    let mut head = head(&[("traceparent", PARENT), ("tracestate", "vendor=abc")]);
    let span = telemetry.request(&mut head, &config);
    let sent = head.headers["traceparent"]
        .to_str()
        .expect("ascii")
        .to_string();
    assert_eq!(head.headers["tracestate"], "vendor=abc");
    span.end(&end(200));

    let spans = captured.spans();
    let server = &spans[0];
    assert_eq!(server.span_kind, SpanKind::Server);
    assert_eq!(server.name, "POST /v1/responses");
    assert_eq!(
        server.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(server.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert!(server.parent_span_is_remote);
    let child = format!(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01",
        server.span_context.span_id()
    );
    assert_eq!(sent, child, "the gateway's parent is the server span");
    assert_eq!(text(server, "http.route").as_deref(), Some("/v1/responses"));
    assert_eq!(
        attribute(server, "http.response.status_code"),
        Some(&Value::I64(200))
    );
    assert_eq!(
        text(server, "toolpulse.stream.outcome").as_deref(),
        Some("completed")
    );
    assert_eq!(
        attribute(server, "toolpulse.events.in"),
        Some(&Value::I64(12))
    );
    assert_eq!(
        attribute(server, "toolpulse.events.injected"),
        Some(&Value::I64(4))
    );
    assert_eq!(
        attribute(server, "toolpulse.bytes.out"),
        Some(&Value::I64(999))
    );
    assert_eq!(server.status, Status::Unset);
}

#[test]
fn without_a_valid_trace_a_new_one_starts_and_a_stale_tracestate_goes() {
    let (telemetry, captured) = telemetry(TelemetryConfig::default());
    let config = Arc::new(crate::Config::default());
    let mut head = head(&[("traceparent", "garbage"), ("tracestate", "vendor=abc")]);
    let span = telemetry.request(&mut head, &config);
    let trace_id = span.trace_id();
    span.end(&end(502));
    let sent = head.headers["traceparent"].to_str().expect("ascii");
    assert_eq!(
        crate::features::progress::TraceId::from_traceparent(sent),
        Some(trace_id)
    );
    assert!(head.headers.get("tracestate").is_none());
    let server = &captured.spans()[0];
    assert!(!server.parent_span_id.to_string().is_empty());
    assert_eq!(server.parent_span_id, opentelemetry::trace::SpanId::INVALID);
    assert_eq!(server.status, Status::error("rewritten"));
}

#[test]
fn tool_calls_become_child_spans_with_the_measured_duration_and_failure_kind() {
    let (telemetry, captured) = telemetry(TelemetryConfig::default());
    let config = Arc::new(crate::Config::default());
    let mut span = telemetry.request(&mut head(&[]), &config);
    span.observe(&running("call_1", "github_get_issue"));
    let report = Progress {
        progress: 2.0,
        total: Some(5.0),
        message: Some("step 2/5".into()),
    };
    span.observe(&Observation::Progress {
        call_id: "call_1".into(),
        report,
    });
    let failed = finished(
        "call_1",
        "github_get_issue",
        Kind::Mcp,
        Some("executor_missing"),
    );
    span.observe(&failed);
    // Finished without a CallRunning (its arguments never completed): still a span.
    let search = finished("call_2", "file_search", Kind::FileSearch, None);
    span.observe(&search);
    span.end(&end(200));

    let spans = captured.spans();
    let server = spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Server)
        .expect("server");
    let tool = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:?}"))
    };
    let mcp = tool("execute_tool github_get_issue");
    assert_eq!(mcp.parent_span_id, server.span_context.span_id());
    assert_eq!(mcp.span_context.trace_id(), server.span_context.trace_id());
    assert!(!mcp.parent_span_is_remote);
    assert_eq!(
        text(mcp, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(
        text(mcp, "gen_ai.tool.name").as_deref(),
        Some("github_get_issue")
    );
    assert_eq!(text(mcp, "gen_ai.tool.call.id").as_deref(), Some("call_1"));
    assert_eq!(text(mcp, "gen_ai.tool.type").as_deref(), Some("extension"));
    assert_eq!(text(mcp, "toolpulse.tool.kind").as_deref(), Some("mcp"));
    assert_eq!(text(mcp, "error.type").as_deref(), Some("executor_missing"));
    assert_eq!(mcp.status, Status::error("executor_missing"));
    let length = mcp
        .end_time
        .duration_since(mcp.start_time)
        .expect("ordered");
    assert_eq!(length, Duration::from_millis(1500));
    let event = &mcp.events.events[0];
    assert_eq!(event.name, "progress");
    let message = event
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "toolpulse.progress.message");
    assert_eq!(
        message.map(|kv| kv.value.as_str().into_owned()).as_deref(),
        Some("step 2/5")
    );

    let file = tool("execute_tool file_search");
    assert_eq!(text(file, "gen_ai.tool.type").as_deref(), Some("datastore"));
    assert_eq!(file.status, Status::Unset);
    assert_eq!(file.parent_span_id, server.span_context.span_id());
    for span in &spans {
        for kv in &span.attributes {
            let value = kv.value.as_str();
            assert!(
                !value.contains("rust") && !value.contains("42"),
                "a payload value in {}: {kv:?}",
                span.name
            );
        }
    }
}

#[test]
fn payloads_are_recorded_only_when_asked_and_then_sanitized() {
    let config = TelemetryConfig {
        record_payloads: true,
        ..TelemetryConfig::default()
    };
    let (telemetry, captured) = telemetry(config);
    let config = Arc::new(crate::Config::default());
    let mut span = telemetry.request(&mut head(&[]), &config);
    span.observe(&running("call_1", "web_search"));
    span.observe(&finished("call_1", "web_search", Kind::WebSearch, None));
    span.end(&end(200));
    let spans = captured.spans();
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool web_search")
        .expect("tool");
    let arguments = text(tool, "gen_ai.tool.call.arguments").expect("arguments");
    assert!(
        arguments.contains("rust") && arguments.contains("[REDACTED]"),
        "{arguments}"
    );
    assert!(!arguments.contains("sk-123"), "{arguments}");
    let result = text(tool, "gen_ai.tool.call.result").expect("result");
    assert!(result.contains("42") && !result.contains("t-9"), "{result}");
}

#[test]
fn a_call_still_running_when_the_client_leaves_ends_with_the_request() {
    let (telemetry, captured) = telemetry(TelemetryConfig::default());
    let config = Arc::new(crate::Config::default());
    let mut span = telemetry.request(&mut head(&[]), &config);
    span.observe(&running("call_1", "web_search"));
    span.end(&RequestEnd {
        stream: Some((StreamEnd::ClientGone, Stats::default())),
        ..end(200)
    });
    let spans = captured.spans();
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool web_search")
        .expect("tool");
    assert_eq!(
        text(tool, "toolpulse.tool.outcome").as_deref(),
        Some("unfinished")
    );
}

#[test]
fn an_unsampled_trace_records_nothing_but_still_propagates() {
    let config = TelemetryConfig {
        sample_ratio: 0.0,
        ..TelemetryConfig::default()
    };
    let (telemetry, captured) = telemetry(config);
    let config = Arc::new(crate::Config::default());
    let mut head = head(&[]);
    let mut span = telemetry.request(&mut head, &config);
    assert!(!span.is_recording());
    span.observe(&running("call_1", "web_search"));
    span.observe(&finished("call_1", "web_search", Kind::WebSearch, None));
    span.end(&end(200));
    assert!(captured.spans().is_empty());
    let sent = head.headers["traceparent"].to_str().expect("ascii");
    assert!(sent.ends_with("-00"), "not sampled: {sent}");
}

#[test]
fn mcp_requests_are_client_spans_only_under_a_propagated_trace() {
    let (telemetry, captured) = telemetry(TelemetryConfig::default());
    let upstream: http::Uri = "http://github-mcp:3000/mcp".parse().expect("uri");
    let rpc = vec!["tools/call".to_string()];
    let request = |tool| McpRequestFor {
        upstream: &upstream,
        rpc: &rpc,
        tool,
    };
    let mut untraced = head(&[]);
    assert!(
        telemetry
            .mcp_request(&mut untraced, &request(Some(("get_issue", None))).get())
            .is_none()
    );
    assert!(untraced.headers.get("traceparent").is_none());

    // The body's `_meta.traceparent` when the header has none.
    let mut from_meta = head(&[]);
    let meta = request(Some(("get_issue", Some(PARENT))));
    let span = telemetry
        .mcp_request(&mut from_meta, &meta.get())
        .expect("a span");
    span.end(502, crate::metrics::McpOutcome::UpstreamError);
    let spans = captured.spans();
    let client = &spans[0];
    assert_eq!(client.span_kind, SpanKind::Client);
    assert_eq!(client.name, "tools/call get_issue");
    assert_eq!(client.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert_eq!(
        text(client, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        text(client, "gen_ai.tool.name").as_deref(),
        Some("get_issue")
    );
    assert_eq!(
        text(client, "server.address").as_deref(),
        Some("github-mcp")
    );
    assert_eq!(client.status, Status::error("upstream_error"));
    let sent = from_meta.headers["traceparent"].to_str().expect("ascii");
    assert!(
        sent.contains(&client.span_context.span_id().to_string()),
        "{sent}"
    );
}

struct McpRequestFor<'a> {
    upstream: &'a http::Uri,
    rpc: &'a [String],
    tool: Option<(&'a str, Option<&'a str>)>,
}

impl McpRequestFor<'_> {
    fn get(&self) -> mcp::McpRequest<'_> {
        mcp::McpRequest {
            server: "github",
            upstream: self.upstream,
            rpc: self.rpc,
            tool: self.tool,
        }
    }
}
