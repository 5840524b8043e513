//! OpenTelemetry end to end: a scripted gateway, the proxy with `[telemetry]` on, and a real
//! OTLP/HTTP receiver (`common::otlp`) decoding what toolpulse exports.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::gateway::{Action, Gateway, Recorded, Reply};
use common::otlp::{self, Collector, Received};
use common::{http_client, read_all, serve_proxy};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use toolpulse::Config;
use toolpulse::config::TelemetryConfig;
use toolpulse::features::telemetry::Telemetry;
use toolpulse::proxy::Proxy;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
/// Marks every argument and result value, so the tests can look for them in what was exported.
const SECRET: &str = "payload-value";

const CONFIG: &str = r#"
[[tools]]
match = ["github_*"]
kind = "mcp"

[failure]
output_patterns = ["^no executor found for tool "]

[failure.kinds]
"^no executor found for tool " = "executor_missing"
"#;

fn event(json: String) -> Vec<u8> {
    let kind = json.split('"').nth(3).expect("type first").to_string();
    format!("event: {kind}\ndata: {json}\n\n").into_bytes()
}

/// A function call's `output_item.added` and `.done` (arguments complete: it runs now).
fn call(seq: u64, index: u64, call_id: &str, name: &str) -> Vec<Vec<u8>> {
    let item = |status: &str, arguments: &str| {
        format!(
            r#"{{"id":"fc_{call_id}","type":"function_call","status":"{status}","name":"{name}","call_id":"{call_id}","arguments":"{arguments}"}}"#
        )
    };
    let arguments = format!(r#"{{\"query\":\"{SECRET}\"}}"#);
    vec![
        event(format!(
            r#"{{"type":"response.output_item.added","sequence_number":{seq},"output_index":{index},"item":{}}}"#,
            item("in_progress", "")
        )),
        event(format!(
            r#"{{"type":"response.output_item.done","sequence_number":{},"output_index":{index},"item":{}}}"#,
            seq + 1,
            item("completed", &arguments)
        )),
    ]
}

fn output(seq: u64, index: u64, call_id: &str, text: &str) -> Vec<u8> {
    event(format!(
        r#"{{"type":"response.output_item.added","sequence_number":{seq},"output_index":{index},"item":{{"id":"fco_{call_id}","type":"function_call_output","call_id":"{call_id}","output":"{text}","status":"completed"}}}}"#
    ))
}

/// A web search that takes 300 ms, an MCP call that fails after 100 ms, and a function call the
/// stream never answers: the upstream ends 200 ms after it.
fn three_tools(request: &Recorded) -> Reply {
    three_tools_stamped(request, &Stamps::default())
}

/// When the gateway began to write, in order: the web search's call, its output, the MCP
/// call, its output, the function call, the end of the body.
type Stamps = Arc<std::sync::Mutex<Vec<std::time::SystemTime>>>;

/// [`three_tools`], noting in `stamps` when each call and output is written.
fn three_tools_stamped(_: &Recorded, stamps: &Stamps) -> Reply {
    let mut actions = vec![Action::Chunk(event(
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}"#.into(),
    ))];
    let chunks = |blocks: Vec<Vec<u8>>| blocks.into_iter().map(Action::Chunk);
    let stamp = || Action::Stamp(stamps.clone());
    actions.push(stamp());
    actions.extend(chunks(call(1, 0, "call_ws", "web_search")));
    actions.push(Action::Sleep(Duration::from_millis(300)));
    actions.push(stamp());
    actions.push(Action::Chunk(output(
        3,
        1,
        "call_ws",
        &format!("found {SECRET}"),
    )));
    actions.push(stamp());
    actions.extend(chunks(call(4, 2, "call_mcp", "github_get_issue")));
    actions.push(Action::Sleep(Duration::from_millis(100)));
    let failed = "no executor found for tool github_get_issue";
    actions.push(stamp());
    actions.push(Action::Chunk(output(6, 3, "call_mcp", failed)));
    actions.push(stamp());
    actions.extend(chunks(call(7, 4, "call_fn", "lookup_user")));
    actions.push(Action::Sleep(Duration::from_millis(200)));
    actions.push(stamp());
    actions.push(Action::End);
    Reply {
        head: Reply::sse(vec![]).head,
        actions,
    }
}

/// A proxy in front of `upstream` exporting to `endpoint`.
async fn traced_proxy(
    upstream: &str,
    endpoint: &str,
) -> (std::net::SocketAddr, Arc<Proxy>, Arc<Telemetry>) {
    let mut config = Config::from_toml_str(CONFIG).expect("config");
    config.proxy.upstream = Some(upstream.parse().expect("upstream"));
    config.telemetry = TelemetryConfig {
        traces_endpoint: Some(format!("{endpoint}/v1/traces").parse().expect("url")),
        service_name: "toolpulse-test".into(),
        ..TelemetryConfig::default()
    };
    let proxy = Proxy::new(Arc::new(config.clone())).expect("proxy");
    let telemetry = Telemetry::start(&config.telemetry, proxy.metrics().clone())
        .expect("exporter")
        .expect("on");
    let proxy = Arc::new(proxy.with_telemetry(telemetry.clone()));
    (serve_proxy(proxy.clone()).await, proxy, telemetry)
}

async fn stream(proxy: std::net::SocketAddr, headers: &[(&str, &str)]) -> String {
    let mut request = http::Request::post(format!("http://{proxy}/v1/responses"))
        .header("content-type", "application/json");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let body = http_body_util::Full::new(bytes::Bytes::from_static(b"{\"stream\":true}"));
    let response = http_client()
        .request(request.body(body).expect("request"))
        .await
        .expect("response");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    String::from_utf8(read_all(&mut body).await).expect("utf-8")
}

fn named<'a>(spans: &'a [Received], name: &str) -> &'a Received {
    spans
        .iter()
        .find(|r| r.span.name == name)
        .unwrap_or_else(|| panic!("no span {name:?} in {spans:#?}"))
}

fn length(received: &Received) -> Duration {
    let span = &received.span;
    Duration::from_nanos(span.end_time_unix_nano - span.start_time_unix_nano)
}

fn status(received: &Received) -> (i32, String) {
    let status = received.span.status.clone().unwrap_or_default();
    (status.code, status.message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_with_three_tools_becomes_a_request_span_and_three_tool_spans() {
    let mut collector = Collector::start().await;
    let stamps = Stamps::default();
    let stamped = stamps.clone();
    let mut gw = Gateway::start(move |r| three_tools_stamped(r, &stamped)).await;
    let (proxy, _, _) = traced_proxy(&gw.url(), &collector.endpoint()).await;
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let headers = [
        ("traceparent", traceparent.as_str()),
        ("tracestate", "vendor=abc"),
    ];
    let out = stream(proxy, &headers).await;
    let read = std::time::SystemTime::now();
    assert!(out.contains("response.web_search_call.completed"), "{out}");
    assert!(out.contains("response.mcp_call.failed"), "{out}");

    let spans = collector.spans(4).await;
    // `cargo test --test telemetry -- --nocapture` shows the trace (the README quotes one).
    println!("{}", otlp::render(&spans));
    let server = spans
        .iter()
        .find(|r| r.span.kind == SpanKind::Server as i32)
        .expect("a server span");
    let s = &server.span;
    assert_eq!(server.service.as_deref(), Some("toolpulse-test"));
    assert_eq!(s.name, "POST /v1/responses");
    assert_eq!(
        otlp::hex(&s.trace_id),
        TRACE_ID,
        "the client's trace is continued"
    );
    assert_eq!(otlp::hex(&s.parent_span_id), CLIENT_SPAN);
    assert_eq!(s.trace_state, "vendor=abc");
    let attributes = &s.attributes;
    assert_eq!(
        otlp::string(attributes, "http.request.method").as_deref(),
        Some("POST")
    );
    assert_eq!(
        otlp::string(attributes, "http.route").as_deref(),
        Some("/v1/responses")
    );
    assert_eq!(
        otlp::int(attributes, "http.response.status_code"),
        Some(200)
    );
    assert_eq!(
        otlp::string(attributes, "toolpulse.stream.outcome").as_deref(),
        Some("completed")
    );
    assert_eq!(otlp::int(attributes, "toolpulse.events.in"), Some(9));
    let injected = otlp::int(attributes, "toolpulse.events.injected").expect("injected");
    assert!(injected >= 8, "{injected}");
    let bytes_out = otlp::int(attributes, "toolpulse.bytes.out").expect("bytes");
    assert_eq!(bytes_out, out.len() as i64);

    // The gateway got a child of the server span, and the client's tracestate.
    let upstream = gw.requests.recv().await.expect("a request");
    let sent = format!("00-{TRACE_ID}-{}-01", otlp::hex(&s.span_id));
    assert_eq!(upstream.header("traceparent"), Some(sent.as_str()));
    assert_eq!(upstream.header("tracestate"), Some("vendor=abc"));

    let search = named(&spans, "execute_tool web_search");
    let mcp = named(&spans, "execute_tool github_get_issue");
    let function = named(&spans, "execute_tool lookup_user");
    for (tool, kind, call_id, gen_ai_type) in [
        (search, "web_search", "call_ws", "extension"),
        (mcp, "mcp", "call_mcp", "extension"),
        (function, "function", "call_fn", "function"),
    ] {
        let t = &tool.span;
        assert_eq!(t.trace_id, s.trace_id);
        assert_eq!(t.parent_span_id, s.span_id, "{} under the request", t.name);
        assert_eq!(t.kind, SpanKind::Internal as i32);
        let a = &t.attributes;
        assert_eq!(
            otlp::string(a, "gen_ai.operation.name").as_deref(),
            Some("execute_tool")
        );
        assert_eq!(
            otlp::string(a, "gen_ai.tool.call.id").as_deref(),
            Some(call_id)
        );
        assert_eq!(
            otlp::string(a, "gen_ai.tool.type").as_deref(),
            Some(gen_ai_type)
        );
        assert_eq!(
            otlp::string(a, "toolpulse.tool.kind").as_deref(),
            Some(kind)
        );
        assert!(t.start_time_unix_nano >= s.start_time_unix_nano);
        assert!(t.end_time_unix_nano <= s.end_time_unix_nano);
    }
    assert_eq!(
        otlp::string(&mcp.span.attributes, "gen_ai.tool.name").as_deref(),
        Some("github_get_issue")
    );
    assert_eq!(status(search).0, StatusCode::Unset as i32);
    assert_eq!(
        status(mcp),
        (StatusCode::Error as i32, "executor_missing".into())
    );
    assert_eq!(
        status(function),
        (StatusCode::Error as i32, "no_output".into()),
        "closed at EOF"
    );
    // Each tool's span runs from its call to its end as the gateway wrote them: it starts no
    // sooner than the call was written, ends no sooner than what ended it (the output, or the
    // end of the body) was, and before the client had read the whole stream. Bounds by events,
    // not by the gateway's pauses with a slack a loaded machine can eat.
    let stamps = stamps.lock().expect("stamps").clone();
    assert_eq!(stamps.len(), 6, "{stamps:?}");
    let nanos = |t: std::time::SystemTime| {
        let since = t.duration_since(std::time::UNIX_EPOCH).expect("after 1970");
        u64::try_from(since.as_nanos()).expect("in range")
    };
    for (tool, called, ended) in [(search, 0, 1), (mcp, 2, 3), (function, 4, 5)] {
        let t = &tool.span;
        let (called, ended) = (nanos(stamps[called]), nanos(stamps[ended]));
        assert!(
            t.start_time_unix_nano >= called,
            "{}: starts before its call",
            t.name
        );
        assert!(
            t.end_time_unix_nano >= ended,
            "{}: ends too soon: {:?}",
            t.name,
            length(tool)
        );
        assert!(
            t.end_time_unix_nano <= nanos(read),
            "{}: ends after the stream",
            t.name
        );
    }

    // No argument or result value in any attribute, event or status.
    let exported = format!("{spans:?}");
    assert!(
        !exported.contains(SECRET),
        "a payload was exported: {exported}"
    );
}

/// A collector that fails or is not there costs the stream nothing; the lost spans and failed
/// exports are counted, and the gateway still gets a traceparent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_or_missing_collector_leaves_streams_alone_and_is_counted() {
    let collector = Collector::start().await;
    collector.answer_with(500);
    let unused = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let nobody = format!("http://{}", unused.local_addr().expect("addr"));
    drop(unused);
    for endpoint in [collector.endpoint(), nobody] {
        let mut gw = Gateway::start(three_tools).await;
        let (proxy, handle, _) = traced_proxy(&gw.url(), &endpoint).await;
        let plain =
            common::start_proxy(Config::from_toml_str(CONFIG).expect("config"), &gw.url()).await;
        let traced = stream(proxy, &[]).await;
        let untraced = stream(plain, &[]).await;
        assert_eq!(
            common::comparable(traced.as_bytes()),
            common::comparable(untraced.as_bytes()),
            "{endpoint}: the stream is what it is without tracing"
        );
        let upstream = gw.requests.recv().await.expect("a request");
        let sent = upstream.header("traceparent").expect("a traceparent");
        assert!(
            toolpulse::features::progress::TraceId::from_traceparent(sent).is_some(),
            "{sent}"
        );

        let counted = async {
            loop {
                let text = handle.metrics().encode();
                let failed = r#"toolpulse_telemetry_spans_total{outcome="failed"} 4"#;
                let errors = r#"toolpulse_telemetry_exports_total{outcome="error"}"#;
                if text.contains(failed) && text.contains(errors) {
                    return text;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        let text = tokio::time::timeout(Duration::from_secs(20), counted)
            .await
            .unwrap_or_else(|_| panic!("{endpoint}: {}", handle.metrics().encode()));
        assert!(!text.contains(r#"outcome="exported""#), "{text}");
    }
}

/// Spans recorded after the collector comes back are exported: an outage ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_resumes_when_the_collector_answers_again() {
    let mut collector = Collector::start().await;
    collector.answer_with(503);
    let gw = Gateway::start(three_tools).await;
    let (proxy, handle, telemetry) = traced_proxy(&gw.url(), &collector.endpoint()).await;
    stream(proxy, &[]).await;
    let failed = async {
        while !handle
            .metrics()
            .encode()
            .contains(r#"toolpulse_telemetry_spans_total{outcome="failed"} 4"#)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), failed)
        .await
        .expect("failed and counted");
    collector.answer_with(200);
    stream(proxy, &[]).await;
    let spans = collector.spans(4).await;
    assert_eq!(spans.len(), 4);
    assert!(telemetry.flush(Duration::from_secs(5)).await);
    assert!(
        collector.arrived().is_empty(),
        "nothing more than the second stream's spans"
    );
    let text = handle.metrics().encode();
    assert!(
        text.contains(r#"toolpulse_telemetry_spans_total{outcome="exported"} 4"#),
        "{text}"
    );
}

/// The MCP front's request, traced by the gateway, becomes a client span under the gateway's
/// span, and the MCP server gets the client span as its parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_mcp_request_is_a_client_span_and_the_server_gets_its_context() {
    let mut collector = Collector::start().await;
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}]}}"#;
    let mut server = Gateway::start(move |_| Reply {
        head: format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}",
            answer.len()
        ),
        actions: vec![Action::Raw(answer.as_bytes().to_vec()), Action::End],
    })
    .await;
    let text = format!(
        "[[mcp.servers]]\nname = \"srv\"\nupstream = \"{}/mcp\"\ncall_name = \"srv_{{tool}}\"\n",
        server.url()
    );
    let config = Config::from_toml_str(&text).expect("config");
    let metrics = Arc::new(toolpulse::metrics::Metrics::new());
    let telemetry = TelemetryConfig {
        traces_endpoint: Some(
            format!("{}/v1/traces", collector.endpoint())
                .parse()
                .expect("url"),
        ),
        ..TelemetryConfig::default()
    };
    let telemetry = Telemetry::start(&telemetry, metrics.clone())
        .expect("exporter")
        .expect("on");
    let hub = toolpulse::features::progress::local::LocalHub::new(Duration::from_millis(10));
    let front = toolpulse::features::mcp::Front::new(&config, hub, metrics)
        .expect("front")
        .expect("configured")
        .with_telemetry(telemetry);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(toolpulse::features::mcp::server::serve(
        listener,
        Arc::new(front),
        std::future::pending(),
    ));

    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_issue","arguments":{"n":1}}}"#;
    let gateway_span = "1111111111111111";
    let request = http::Request::post(format!("http://{addr}/srv"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("traceparent", format!("00-{TRACE_ID}-{gateway_span}-01"))
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            call.as_bytes(),
        )))
        .expect("request");
    let response = http_client().request(request).await.expect("response");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    assert!(String::from_utf8_lossy(&read_all(&mut body).await).contains("done"));

    let spans = collector.spans(1).await;
    let client = &spans[0].span;
    assert_eq!(client.kind, SpanKind::Client as i32);
    assert_eq!(client.name, "tools/call get_issue");
    assert_eq!(otlp::hex(&client.trace_id), TRACE_ID);
    assert_eq!(otlp::hex(&client.parent_span_id), gateway_span);
    let a = &client.attributes;
    assert_eq!(
        otlp::string(a, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        otlp::string(a, "toolpulse.mcp.server").as_deref(),
        Some("srv")
    );
    assert_eq!(otlp::int(a, "http.response.status_code"), Some(200));
    assert_eq!(status(&spans[0]).0, StatusCode::Unset as i32);
    let forwarded = server.requests.recv().await.expect("the server's request");
    let sent = format!("00-{TRACE_ID}-{}-01", otlp::hex(&client.span_id));
    assert_eq!(forwarded.header("traceparent"), Some(sent.as_str()));
}

/// The real binary, configured only by the standard environment variables (no config file):
/// spans reach the collector under `OTEL_SERVICE_NAME`, and SIGTERM ends it cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exports_with_only_the_otel_environment_variables() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let mut collector = Collector::start().await;
    let gw = Gateway::start(three_tools).await;
    let child = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .args(["--upstream", &gw.url(), "--listen", "127.0.0.1:0"])
        .args(["--admin-listen", "127.0.0.1:0"])
        .env_remove("TOOLPULSE_CONFIG")
        .env_remove("TOOLPULSE_PROGRESS_TOKEN")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("OTEL_SERVICE_NAME", "from-env")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolpulse");
    let mut child = Running(child);
    let stderr = child.0.stderr.take().expect("stderr");
    let (lines, first) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let first = first
        .recv_timeout(Duration::from_secs(10))
        .expect("a first log line");
    let start = first.find("listen=").expect("listen") + "listen=".len();
    let addr: std::net::SocketAddr = first[start..]
        .split_whitespace()
        .next()
        .expect("address")
        .parse()
        .expect("an address");

    let out = stream(addr, &[]).await;
    // No config file, so no rule for github_*: only the search gets events.
    assert!(out.contains("response.web_search_call.completed"), "{out}");
    let spans = collector.spans(4).await;
    assert!(
        spans
            .iter()
            .all(|r| r.service.as_deref() == Some("from-env")),
        "{spans:#?}"
    );
    let _ = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status();
    let exited = async {
        loop {
            if let Some(status) = child.0.try_wait().expect("wait") {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let status = tokio::time::timeout(Duration::from_secs(20), exited)
        .await
        .expect("toolpulse exits after SIGTERM");
    assert!(status.success(), "{status:?}");
}

/// A child process that is killed when the test ends, however it ends.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `[telemetry]` examples of docs/tracing.md are valid configs.
#[test]
fn the_tracing_page_examples_are_valid() {
    let section = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/tracing.md"))
        .expect("docs/tracing.md");
    let section = section.as_str();
    let blocks: Vec<&str> = section
        .split("```toml\n")
        .skip(1)
        .map(|b| &b[..b.find("```").expect("closed")])
        .collect();
    assert!(blocks.len() >= 2, "{section}");
    let env = |name: &str| match name {
        "LANGFUSE_AUTH" | "TEAM" => Some("x".to_string()),
        _ => None,
    };
    for block in blocks {
        let config =
            Config::from_toml_with_env(block, &env).unwrap_or_else(|e| panic!("{e}\n{block}"));
        assert!(config.telemetry.traces_endpoint.is_some(), "{block}");
    }
}
