//! The MCP front on real sockets: the official Rust MCP SDK (`rmcp`) as the server (a tool that
//! reports progress when the client gave a token) and as the gateway's MCP client, raw HTTP
//! where the test must see bytes or send what the SDK never sends (a call without a token),
//! and `POST /v1/progress`. The hub is a recording double (matching calls to client streams is
//! the registry's job, tested with it), except in the last test, where the real registry
//! carries a real server's progress into a client stream through the proxy.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::NotificationContext;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use toolpulse::Config;
use toolpulse::features::mcp::{Front, server};
use toolpulse::features::progress::{
    BindingId, Delivery, McpToolCall, PostFuture, Progress, ProgressHub, Target, TraceId,
};
use toolpulse::metrics::Metrics;

use common::{HttpClient, http_client, json_body, read_all};

const TOKEN: &str = "test-token-0123456789";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const PROTOCOL: &str = "2025-06-18";

// ---------------------------------------------------------------------------------------------
// The hub double.

#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Bind(BindingId, McpToolCall),
    Progress(BindingId, Progress),
    Release(BindingId),
    Post(Target, Progress),
}

struct RecordingHub {
    seen: Mutex<Vec<Seen>>,
    next: AtomicU64,
    /// What `progress` and `post` answer.
    answer: Mutex<Delivery>,
}

impl RecordingHub {
    fn new() -> Arc<RecordingHub> {
        Arc::new(RecordingHub {
            seen: Mutex::default(),
            next: AtomicU64::new(1),
            answer: Mutex::new(Delivery::Delivered),
        })
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }

    fn answer_with(&self, delivery: Delivery) {
        *self.answer.lock().expect("lock") = delivery;
    }

    fn record(&self, seen: Seen) {
        self.seen.lock().expect("lock").push(seen);
    }

    /// Waits (bounded) until the hub saw `n` releases: answers release when their body ends,
    /// which may be just after the client has read it.
    async fn releases(&self, n: usize) -> Vec<Seen> {
        for _ in 0..500 {
            let seen = self.seen();
            if seen
                .iter()
                .filter(|s| matches!(s, Seen::Release(_)))
                .count()
                >= n
            {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("fewer than {n} releases: {:?}", self.seen());
    }
}

impl ProgressHub for RecordingHub {
    fn bind(&self, call: McpToolCall) -> BindingId {
        let id = BindingId(self.next.fetch_add(1, Ordering::SeqCst));
        self.record(Seen::Bind(id, call));
        id
    }

    fn progress(&self, binding: BindingId, progress: Progress) -> Delivery {
        self.record(Seen::Progress(binding, progress));
        *self.answer.lock().expect("lock")
    }

    fn release(&self, binding: BindingId) {
        self.record(Seen::Release(binding));
    }

    fn post(&self, target: Target, progress: Progress) -> PostFuture<'_> {
        self.record(Seen::Post(target, progress));
        Box::pin(std::future::ready(*self.answer.lock().expect("lock")))
    }
}

// ---------------------------------------------------------------------------------------------
// Plain HTTP servers.

/// Serves `answer` on a loopback port over HTTP/1.1 until the test ends.
async fn serve_http<F, Fut, B>(answer: F) -> SocketAddr
where
    F: Fn(http::Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = http::Response<B>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let answer = answer.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

// ---------------------------------------------------------------------------------------------
// The front.

fn config(upstream: SocketAddr, token: Option<&str>) -> Config {
    let mut text = format!(
        "[[mcp.servers]]\nname = \"srv\"\nupstream = \"http://{upstream}/mcp\"\ncall_name = \"srv_{{tool}}\"\n"
    );
    if let Some(token) = token {
        text.push_str(&format!("[progress]\ntoken = \"{token}\"\n"));
    }
    Config::from_toml_str(&text).expect("valid config")
}

async fn start_front(config: Config, hub: Arc<dyn ProgressHub>) -> (SocketAddr, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let front = Front::new(&config, hub, metrics.clone())
        .expect("front")
        .expect("configured");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(server::serve(
        listener,
        Arc::new(front),
        std::future::pending(),
    ));
    (addr, metrics)
}

// ---------------------------------------------------------------------------------------------
// Raw MCP over HTTP.

async fn send(
    client: &HttpClient,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: String,
) -> http::Response<Incoming> {
    let mut request = http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(Bytes::from(body))).expect("request");
    tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .expect("answered in time")
        .expect("response")
}

/// A POST the way MCP clients send it; `session` once there is one.
async fn post_rpc(
    client: &HttpClient,
    url: &str,
    session: Option<&str>,
    extra: &[(&str, &str)],
    body: Value,
) -> http::Response<Incoming> {
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", PROTOCOL),
    ];
    if let Some(session) = session {
        headers.push(("mcp-session-id", session));
    }
    headers.extend_from_slice(extra);
    send(client, "POST", url, &headers, body.to_string()).await
}

/// Initializes a session at `url`; returns its id.
async fn initialize(client: &HttpClient, url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let mut response = post_rpc(client, url, None, &[], init).await;
    assert_eq!(response.status(), 200);
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("a session id, forwarded")
        .to_str()
        .expect("ascii")
        .to_string();
    read_all(response.body_mut()).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post_rpc(client, url, Some(&session), &[], initialized).await;
    assert_eq!(response.status(), 202);
    session
}

/// The `data` of each SSE event of a body.
fn datas(body: &[u8]) -> Vec<Vec<u8>> {
    let mut parser = toolpulse::core::sse::Parser::new(usize::MAX);
    parser.push(body);
    parser.finish();
    std::iter::from_fn(|| parser.next_item())
        .filter_map(|item| match item {
            toolpulse::core::sse::Item::Event(e) => e.data().map(|d| d.into_owned()),
            _ => None,
        })
        .filter(|d| !d.is_empty())
        .collect()
}

fn call_steps(id: u64, n: u64, meta: Option<Value>) -> Value {
    let mut params = json!({"name": "steps", "arguments": {"n": n}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

fn progress_of(seen: &[Seen], binding: BindingId) -> Vec<Progress> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Progress(b, p) if *b == binding => Some(p.clone()),
            _ => None,
        })
        .collect()
}

fn steps(n: u64) -> Vec<Progress> {
    (1..=n)
        .map(|k| Progress {
            progress: k as f64,
            total: Some(n as f64),
            message: Some(format!("step {k}/{n}")),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Calls through the front.

#[tokio::test]
async fn a_call_without_a_token_gets_toolpulses_and_no_notification_reaches_the_gateway() {
    let server = common::steps::start_mcp_server().await;
    let hub = RecordingHub::new();
    let (front, metrics) = start_front(config(server, None), hub.clone()).await;
    let client = http_client();
    let via_front = format!("http://{front}/srv");
    let direct = format!("http://{server}/mcp");

    let session = initialize(&client, &via_front).await;
    let traced = [("traceparent", TRACEPARENT)];
    let mut response = post_rpc(
        &client,
        &via_front,
        Some(&session),
        &traced,
        call_steps(1, 3, None),
    )
    .await;
    assert_eq!(response.status(), 200);
    let through = read_all(response.body_mut()).await;
    let text = String::from_utf8_lossy(&through);
    assert!(!text.contains("notifications/progress"), "{text}");

    // The same call made directly: the server sends no progress without a token.
    let direct_session = initialize(&client, &direct).await;
    let mut response = post_rpc(
        &client,
        &direct,
        Some(&direct_session),
        &[],
        call_steps(1, 3, None),
    )
    .await;
    let direct_body = read_all(response.body_mut()).await;
    let result = |body: &[u8]| {
        datas(body)
            .into_iter()
            .find(|d| String::from_utf8_lossy(d).contains("did 3 steps"))
            .expect("the result event")
    };
    assert_eq!(
        result(&through),
        result(&direct_body),
        "byte-identical result"
    );

    let seen = hub.releases(1).await;
    let Seen::Bind(binding, call) = &seen[0] else {
        panic!("bind first: {seen:?}")
    };
    assert_eq!(call.server, "srv");
    assert_eq!(call.function_name, "srv_steps");
    assert_eq!(call.arguments, json!({"n": 3}));
    assert_eq!(call.trace_id, TraceId::from_traceparent(TRACEPARENT));
    assert_eq!(
        progress_of(&seen, *binding),
        steps(3),
        "every step, in order"
    );
    assert_eq!(seen.last(), Some(&Seen::Release(*binding)));

    let text = metrics.encode();
    for line in [
        r#"toolpulse_progress_total{source="mcp",outcome="delivered"} 3"#,
        r#"toolpulse_mcp_requests_total{server="srv",outcome="answered"}"#,
        "toolpulse_mcp_bound_calls 0",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
}

#[tokio::test]
async fn the_gateways_own_token_gets_every_notification_and_meta_traceparent_wins() {
    let server = common::steps::start_mcp_server().await;
    let hub = RecordingHub::new();
    let (front, _) = start_front(config(server, None), hub.clone()).await;
    let client = http_client();
    let url = format!("http://{front}/srv");
    let session = initialize(&client, &url).await;
    let meta_trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let meta = json!({"progressToken": "gw-7", "traceparent": meta_trace});
    let header = [("traceparent", TRACEPARENT)];
    let mut response = post_rpc(
        &client,
        &url,
        Some(&session),
        &header,
        call_steps(5, 2, Some(meta)),
    )
    .await;
    let body = read_all(response.body_mut()).await;
    let notes: Vec<Value> = datas(&body)
        .iter()
        .filter_map(|d| serde_json::from_slice::<Value>(d).ok())
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(notes.len(), 2, "{}", String::from_utf8_lossy(&body));
    assert!(notes.iter().all(|n| n["params"]["progressToken"] == "gw-7"));

    let seen = hub.releases(1).await;
    let Seen::Bind(binding, call) = &seen[0] else {
        panic!("bind first: {seen:?}")
    };
    assert_eq!(
        call.trace_id,
        TraceId::from_traceparent(meta_trace),
        "_meta wins"
    );
    assert_eq!(progress_of(&seen, *binding), steps(2));
}

/// An attack: a stateless MCP server (no `Mcp-Session-Id`) and a gateway whose
/// tokens restart per request (the official SDKs use the JSON-RPC id): two users' concurrent
/// calls both carry `progressToken: 1`. Each call's progress is the one its own answer stream
/// carried, never the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stateless_calls_with_one_token_each_get_only_their_own_progress() {
    let server = common::steps::start_stateless_mcp_server().await;
    let hub = RecordingHub::new();
    let (front, _) = start_front(config(server, None), hub.clone()).await;
    let url = format!("http://{front}/srv");
    let post = |label: &'static str| {
        let url = url.clone();
        async move {
            let client = http_client();
            let arguments = json!({"name": "steps", "_meta": {"progressToken": 1},
                "arguments": {"n": 3, "delay_ms": 150, "label": label}});
            let call =
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": arguments});
            let mut response = post_rpc(&client, &url, None, &[], call).await;
            assert_eq!(response.status(), 200);
            assert!(
                response.headers().get("mcp-session-id").is_none(),
                "stateless"
            );
            read_all(response.body_mut()).await
        }
    };
    let (alice, bob) = tokio::join!(post("ALICE-"), post("BOB-"));
    for (body, label) in [(&alice, "ALICE-"), (&bob, "BOB-")] {
        let text = String::from_utf8_lossy(body);
        assert_eq!(text.matches("notifications/progress").count(), 3, "{text}");
        assert!(text.contains("did 3 steps"), "{text}");
        assert!(
            !text.contains(if label == "BOB-" { "ALICE-" } else { "BOB-" }),
            "{text}"
        );
    }

    let seen = hub.releases(2).await;
    let binding_of = |label: &str| {
        seen.iter()
            .find_map(|s| match s {
                Seen::Bind(b, call) if call.arguments["label"] == label => Some(*b),
                _ => None,
            })
            .expect("bound")
    };
    for label in ["ALICE-", "BOB-"] {
        let messages: Vec<_> = progress_of(&seen, binding_of(label))
            .into_iter()
            .map(|p| p.message.unwrap_or_default())
            .collect();
        let want: Vec<_> = (1..=3).map(|k| format!("{label}step {k}/3")).collect();
        assert_eq!(
            messages, want,
            "{label}'s progress, and only theirs: {seen:?}"
        );
    }
}

/// A gateway's own token that happens to look like toolpulse's (`tp-` and 32
/// hex digits) is the gateway's: its notifications reach the gateway.
#[tokio::test]
async fn a_gateway_token_shaped_like_toolpulses_reaches_the_gateway() {
    let server = common::steps::start_mcp_server().await;
    let hub = RecordingHub::new();
    let (front, _) = start_front(config(server, None), hub.clone()).await;
    let client = http_client();
    let url = format!("http://{front}/srv");
    let session = initialize(&client, &url).await;
    let token = format!("tp-{}", "0123456789abcdef".repeat(2));
    let meta = json!({"progressToken": token});
    let call = call_steps(3, 2, Some(meta));
    let mut response = post_rpc(&client, &url, Some(&session), &[], call).await;
    let body = read_all(response.body_mut()).await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!(text.matches(token.as_str()).count(), 2, "{text}");
    let seen = hub.releases(1).await;
    let Seen::Bind(binding, _) = &seen[0] else {
        panic!("bind first: {seen:?}")
    };
    assert_eq!(progress_of(&seen, *binding), steps(2));
}

/// The SDK's client, through the front, always sends its own token: it gets every notification
/// and the same result as without the front.
#[tokio::test]
async fn rmcp_client_through_the_front() {
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);
    impl ClientHandler for Recorder {
        async fn on_progress(
            &self,
            params: ProgressNotificationParam,
            _context: NotificationContext<RoleClient>,
        ) {
            let message = params.message.unwrap_or_default();
            self.0.lock().expect("lock").push(message);
        }
    }

    let server = common::steps::start_mcp_server().await;
    let hub = RecordingHub::new();
    let (front, _) = start_front(config(server, None), hub.clone()).await;
    let call = || {
        let arguments = json!({"n": 4}).as_object().cloned().expect("object");
        CallToolRequestParams::new("steps").with_arguments(arguments)
    };

    let recorder = Recorder::default();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{front}/srv"));
    let client = recorder
        .clone()
        .serve(transport)
        .await
        .expect("initialized");
    let through = client.call_tool(call()).await.expect("result");
    let direct_client = ()
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "http://{server}/mcp"
        )))
        .await
        .expect("initialized");
    let direct = direct_client.call_tool(call()).await.expect("result");
    assert_eq!(through, direct);

    for _ in 0..500 {
        if recorder.0.lock().expect("lock").len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let messages = recorder.0.lock().expect("lock").clone();
    assert_eq!(messages, ["step 1/4", "step 2/4", "step 3/4", "step 4/4"]);
    let seen = hub.releases(1).await;
    let Seen::Bind(binding, call) = &seen[0] else {
        panic!("bind first: {seen:?}")
    };
    assert_eq!(call.function_name, "srv_steps");
    assert_eq!(progress_of(&seen, *binding), steps(4));
    let _ = client.cancel().await;
    let _ = direct_client.cancel().await;
}

#[tokio::test]
async fn session_get_stream_and_delete_are_forwarded() {
    let server = common::steps::start_mcp_server().await;
    let (front, _) = start_front(config(server, None), RecordingHub::new()).await;
    let client = http_client();
    let url = format!("http://{front}/srv");
    let session = initialize(&client, &url).await;

    let get = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", PROTOCOL),
    ];
    let stream = send(&client, "GET", &url, &get, String::new()).await;
    assert_eq!(stream.status(), 200);
    let content_type = stream.headers()["content-type"].to_str().expect("ascii");
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    drop(stream);

    let delete = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", PROTOCOL),
    ];
    let deleted = send(&client, "DELETE", &url, &delete, String::new()).await;
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    let gone = post_rpc(&client, &url, Some(&session), &[], list).await;
    assert_eq!(
        gone.status(),
        404,
        "the server's answer for a deleted session"
    );
}

/// A server that answers every request with what it received, as JSON (not SSE).
async fn start_echo_server() -> SocketAddr {
    serve_http(|request: http::Request<Incoming>| async move {
        let (head, body) = request.into_parts();
        let body = body.collect().await.expect("body").to_bytes();
        let headers: serde_json::Map<String, Value> = head
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(v.to_str().unwrap_or("?"))))
            .collect();
        let echo = json!({
            "method": head.method.as_str(),
            "uri": head.uri.to_string(),
            "headers": headers,
            "body": String::from_utf8_lossy(&body),
        });
        http::Response::builder()
            .header("content-type", "application/json")
            .header("mcp-session-id", "s-42")
            .body(Full::new(Bytes::from(echo.to_string())))
            .expect("response")
    })
    .await
}

#[tokio::test]
async fn headers_and_bodies_reach_the_server_and_a_json_answer_releases_the_call() {
    let echo = start_echo_server().await;
    let hub = RecordingHub::new();
    let (front, _) = start_front(config(echo, None), hub.clone()).await;
    let client = http_client();
    let headers = [
        ("authorization", "Bearer gateway-credential"),
        ("mcp-session-id", "s-42"),
        ("last-event-id", "17"),
        ("x-custom", "kept"),
        ("connection", "x-hop"),
        ("x-hop", "dropped"),
    ];
    let call = call_steps(3, 1, None);
    let response = post_rpc(
        &client,
        &format!("http://{front}/srv?x=1"),
        None,
        &headers,
        call,
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["mcp-session-id"], "s-42");
    let echo = json_body(response).await;
    assert_eq!(
        echo["uri"], "/mcp?x=1",
        "the server's endpoint, the query kept"
    );
    let got = &echo["headers"];
    assert_eq!(got["authorization"], "Bearer gateway-credential");
    assert_eq!(got["mcp-session-id"], "s-42");
    assert_eq!(got["mcp-protocol-version"], PROTOCOL);
    assert_eq!(got["last-event-id"], "17");
    assert_eq!(got["x-custom"], "kept");
    assert!(got.get("x-hop").is_none(), "hop-by-hop fields go");
    let sent: Value = serde_json::from_str(echo["body"].as_str().expect("body")).expect("json");
    let token = sent["params"]["_meta"]["progressToken"]
        .as_str()
        .expect("a token");
    assert!(token.starts_with("tp-") && token.len() == 35, "{token}");
    assert_eq!(
        sent["params"]["arguments"],
        json!({"n": 1}),
        "the rest untouched"
    );

    let seen = hub.releases(1).await;
    assert!(
        matches!(&seen[..], [Seen::Bind(a, _), Seen::Release(b)] if a == b),
        "{seen:?}"
    );

    // Other methods pass as they are.
    let response = send(
        &client,
        "DELETE",
        &format!("http://{front}/srv"),
        &headers[..2],
        String::new(),
    )
    .await;
    let echo = json_body(response).await;
    assert_eq!(echo["method"], "DELETE");
    assert_eq!(
        echo["headers"]["authorization"],
        "Bearer gateway-credential"
    );
}

#[tokio::test]
async fn only_configured_servers_are_reached() {
    let echo = start_echo_server().await;
    let (front, _) = start_front(config(echo, None), RecordingHub::new()).await;
    let client = http_client();
    for path in [
        "/",
        "/other",
        "/srv/sub",
        "/srv2",
        "/v1/progress/x",
        "/http://evil/",
    ] {
        let response = send(
            &client,
            "POST",
            &format!("http://{front}{path}"),
            &[],
            "{}".into(),
        )
        .await;
        assert_eq!(response.status(), 404, "{path}");
        let body = json_body(response).await;
        assert_eq!(body["error"]["code"], "unknown_server", "{path}");
    }
}

#[tokio::test]
async fn connections_over_the_limit_are_answered_503() {
    use common::gateway::{Action, Gateway, Reply};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let release = Arc::new(tokio::sync::Notify::new());
    let wait = release.clone();
    let mut gateway = Gateway::start(move |_| Reply {
        head: "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2".into(),
        actions: vec![Action::Wait(wait.clone()), Action::Raw(b"{}".to_vec())],
    })
    .await;
    let mut config = config(gateway.addr, None);
    if let Some(mcp) = config.mcp.as_mut() {
        mcp.max_connections = 1;
    }
    let (front, metrics) = start_front(config, RecordingHub::new()).await;
    let request = b"POST /srv HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}";
    // The first connection holds the only place while its request is in flight (a connection
    // that asks nothing would make room for the next one instead).
    let mut held = tokio::net::TcpStream::connect(front)
        .await
        .expect("connect");
    held.write_all(request).await.expect("write");
    gateway
        .requests
        .recv()
        .await
        .expect("the first request upstream");
    let mut second = tokio::net::TcpStream::connect(front)
        .await
        .expect("connect");
    second.write_all(request).await.expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), second.read_to_end(&mut answer))
        .await
        .expect("closed in time")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert_eq!(metrics.mcp_connections_rejected.get(), 1);
    // A stored permit: the gateway task may reach its wait only after this.
    release.notify_one();
    let mut first = [0u8; 12];
    held.read_exact(&mut first)
        .await
        .expect("the first is answered");
    assert_eq!(&first, b"HTTP/1.1 200");
    drop(held);
    // The place is free again once the first connection is gone.
    let client = http_client();
    let mut answered = false;
    for _ in 0..50 {
        let response = send(
            &client,
            "POST",
            &format!("http://{front}/nope"),
            &[],
            "{}".into(),
        )
        .await;
        if response.status() == 404 {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(answered, "a connection after the first closed is served");
}

// ---------------------------------------------------------------------------------------------
// POST /v1/progress.

async fn post_progress(
    client: &HttpClient,
    front: SocketAddr,
    token: Option<&str>,
    body: String,
) -> http::Response<Incoming> {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth));
    }
    send(
        client,
        "POST",
        &format!("http://{front}/v1/progress"),
        &headers,
        body,
    )
    .await
}

#[tokio::test]
async fn progress_endpoint_answers_and_token() {
    let echo = start_echo_server().await;
    let hub = RecordingHub::new();
    let (front, metrics) = start_front(config(echo, Some(TOKEN)), hub.clone()).await;
    let client = http_client();
    let report =
        json!({"call_id": "call_1", "progress": 1, "total": 2, "message": "half"}).to_string();

    for token in [
        None,
        Some("wrong-token-0123456789"),
        Some("test-token-012345678"),
    ] {
        let response = post_progress(&client, front, token, report.clone()).await;
        assert_eq!(response.status(), 401, "{token:?}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
    }
    assert!(
        hub.seen().is_empty(),
        "nothing reaches the hub without the token"
    );

    for (delivery, status) in [
        (Delivery::Delivered, 202),
        (Delivery::Unmatched, 404),
        (Delivery::Late, 404),
        (Delivery::Ambiguous, 409),
    ] {
        hub.answer_with(delivery);
        let response = post_progress(&client, front, Some(TOKEN), report.clone()).await;
        assert_eq!(response.status(), status, "{delivery:?}");
    }

    let bad = post_progress(
        &client,
        front,
        Some(TOKEN),
        r#"{"tool":"t","progress":"1"}"#.into(),
    )
    .await;
    assert_eq!(bad.status(), 400);
    let body = json_body(bad).await;
    assert_eq!(body["error"]["param"], "progress");
    let none = post_progress(&client, front, Some(TOKEN), r#"{"message":"x"}"#.into()).await;
    assert_eq!(json_body(none).await["error"]["param"], "call_id");
    let big = json!({"tool": "t", "message": "x".repeat(17 * 1024)}).to_string();
    let response = post_progress(&client, front, Some(TOKEN), big).await;
    assert_eq!(response.status(), 413);
    let auth = format!("Bearer {TOKEN}");
    let get = send(
        &client,
        "GET",
        &format!("http://{front}/v1/progress"),
        &[("authorization", &auth)],
        String::new(),
    )
    .await;
    assert_eq!(get.status(), 405);

    let text = metrics.encode();
    assert!(
        text.contains(r#"toolpulse_progress_total{source="http",outcome="ambiguous"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_message_that_would_break_sse_framing_reaches_the_hub_unchanged() {
    let echo = start_echo_server().await;
    let hub = RecordingHub::new();
    let (front, _) = start_front(config(echo, None), hub.clone()).await;
    let client = http_client();
    let message = "step 1\r\ndata: {\"type\":\"evil\"}\n\nevent: x\r";
    let report =
        json!({"tool": "search", "arguments": {"q": "a"}, "progress": 1, "message": message});
    let response = post_progress(&client, front, None, report.to_string()).await;
    assert_eq!(response.status(), 202, "no token configured: none needed");
    assert_eq!(
        hub.seen(),
        [Seen::Post(
            Target::Tool {
                name: "search".into(),
                arguments: Some(json!({"q": "a"}))
            },
            Progress {
                progress: 1.0,
                total: None,
                message: Some(message.into())
            }
        )]
    );
}

// ---------------------------------------------------------------------------------------------
// The whole chain: a real MCP server's progress reaches the client stream, never the gateway.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_servers_progress_reaches_the_client_stream_and_not_the_gateway() {
    use common::gateway::{self, Gateway};
    use toolpulse::features::progress::local::LocalHub;
    use toolpulse::proxy::Proxy;

    let mcp = common::steps::start_mcp_server().await;
    // The gateway: the model calls srv_steps, the stream waits while the tool runs.
    let release = Arc::new(tokio::sync::Notify::new());
    let ev = |json: Value| format!("data: {json}\n\n").into_bytes();
    let item = json!({"id": "fc_1", "type": "function_call", "name": "srv_steps",
        "call_id": "call_1", "arguments": "{\"n\": 3}"});
    let output = json!({"id": "o_1", "type": "function_call_output", "call_id": "call_1",
        "output": "did 3 steps"});
    let before = [
        ev(json!({"type": "response.created", "sequence_number": 0, "response": {"id": "r"}})),
        ev(
            json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item}),
        ),
        ev(
            json!({"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": item}),
        ),
    ];
    let after = [
        ev(
            json!({"type": "response.output_item.added", "sequence_number": 3, "output_index": 1, "item": output}),
        ),
        ev(json!({"type": "response.completed", "sequence_number": 4, "response": {"id": "r"}})),
    ];
    let held = release.clone();
    let mut gw = Gateway::start(move |_| gateway::held(&before, &held, &after)).await;

    let hub = LocalHub::new(Duration::from_secs(5));
    let text = format!(
        "[[mcp.servers]]\nname = \"srv\"\nupstream = \"http://{mcp}/mcp\"\ncall_name = \"srv_{{tool}}\"\n\n[[tools]]\nmatch = [\"srv_*\"]\nkind = \"mcp\"\n"
    );
    let mut proxy_config = Config::from_toml_str(&text).expect("valid config");
    proxy_config.proxy.upstream = Some(gw.url().parse().expect("url"));
    let proxy = Proxy::new(Arc::new(proxy_config.clone()))
        .expect("proxy")
        .with_progress(hub.clone());
    let proxy = common::serve_proxy(Arc::new(proxy)).await;
    let (front, _) = start_front(proxy_config, hub.clone()).await;

    // The client's stream, up to the running call.
    let request = http::Request::post(format!("http://{proxy}/v1/responses"))
        .header("x-toolpulse-profiles", "tool")
        .body(Full::new(Bytes::from_static(
            br#"{"model":"m","stream":true}"#,
        )))
        .expect("request");
    let mut stream = http_client()
        .request(request)
        .await
        .expect("response")
        .into_body();
    let mut seen = common::read_until(&mut stream, "tool_start").await;
    let traceparent = gw
        .requests
        .recv()
        .await
        .expect("forwarded")
        .header("traceparent")
        .map(String::from);

    // The gateway's MCP client calls the tool through the front, with no token of its own and
    // the client request's trace context.
    let client = http_client();
    let url = format!("http://{front}/srv");
    let session = initialize(&client, &url).await;
    let trace = traceparent.expect("the proxy sent a traceparent");
    let extra = [("traceparent", trace.as_str())];
    let mut answer = post_rpc(
        &client,
        &url,
        Some(&session),
        &extra,
        call_steps(7, 3, None),
    )
    .await;
    let answer = read_all(answer.body_mut()).await;
    let messages = datas(&answer);
    assert_eq!(
        messages.len(),
        1,
        "only the result reaches the gateway: {messages:?}"
    );
    assert!(String::from_utf8_lossy(&messages[0]).contains("did 3 steps"));

    seen.extend(common::read_until(&mut stream, "step 3/3").await);
    release.notify_one();
    seen.extend(read_all(&mut stream).await);
    let text = String::from_utf8_lossy(&seen);
    let (last, end) = (text.find("step 3/3"), text.find(r#""type":"tool_end""#));
    assert!(last.is_some() && last < end, "{text}");
    assert!(
        text.contains(r#""type":"tool_progress","sequence_number""#),
        "numbered: {text}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_502_naming_its_address() {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let dead = closed.local_addr().expect("addr");
    drop(closed);
    let (front, _) = start_front(config(dead, None), RecordingHub::new()).await;
    let client = http_client();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let response = post_rpc(&client, &format!("http://{front}/srv"), None, &[], body).await;
    assert_eq!(response.status(), 502);
    let body = json_body(response).await;
    assert_eq!(body["error"]["code"], "upstream_unreachable");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("http://{dead}/mcp")), "{message}");
    assert!(
        message.contains("onnection refused"),
        "the cause: {message}"
    );
}
