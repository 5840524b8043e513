//! Two toolpulse processes (the built binary) sharing one real `redis-server` through
//! `[progress] bus`, in front of one scripted gateway and one real MCP server (`rmcp`): the
//! client stream goes through one replica, the gateway's MCP calls through the other.
//!
//! - progress crosses replicas, in order;
//! - the ambiguity rule holds across replicas (no trace id: nobody; trace ids: each its own);
//! - Redis stopped mid-stream: streams complete unharmed, exact matches on the same replica
//!   still work, errors are counted, `/readyz` stays ready; Redis back: open calls are
//!   registered again and progress crosses replicas again, without restarting toolpulse;
//! - closed calls leave nothing in Redis (1,000 of them), and a replica killed with SIGKILL
//!   leaves only keys that expire.

use crate::common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::gateway::{Action, Gateway, Recorded, Reply};
use common::redis_server::RedisServer;
use common::{HttpClient, http_client, read_all, read_until};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio::sync::Notify;

const WAIT: Duration = Duration::from_secs(60);
const PROTOCOL: &str = "2025-06-18";

// ---------------------------------------------------------------------------------------------
// The gateway: each request's `metadata` names the function_call (`call_id`, `arguments`) and
// whether the stream waits, after the call, for the test to release it.

struct Calls {
    gateway: Gateway,
    releases: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

fn release_of(releases: &Mutex<HashMap<String, Arc<Notify>>>, call_id: &str) -> Arc<Notify> {
    let mut releases = releases.lock().expect("lock");
    releases.entry(call_id.to_string()).or_default().clone()
}

async fn start_gateway() -> Calls {
    let releases: Arc<Mutex<HashMap<String, Arc<Notify>>>> = Arc::default();
    let held = releases.clone();
    let gateway =
        Gateway::start(move |request: &Recorded| {
            let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
            let meta = &body["metadata"];
            let call_id = meta["call_id"].as_str().unwrap_or("call_x").to_string();
            let arguments = meta["arguments"].as_str().unwrap_or("{}").to_string();
            let ev = |json: Value| format!("data: {json}\n\n").into_bytes();
            let item = json!({"id": format!("fc_{call_id}"), "type": "function_call",
            "name": "srv_steps", "call_id": call_id, "arguments": arguments});
            let output = json!({"id": format!("o_{call_id}"), "type": "function_call_output",
            "call_id": call_id, "output": "done"});
            let mut actions = vec![
            ev(json!({"type": "response.created", "sequence_number": 0, "response": {"id": "r"}})),
            ev(json!({"type": "response.output_item.added", "sequence_number": 1,
                "output_index": 0, "item": item})),
            ev(json!({"type": "response.output_item.done", "sequence_number": 2,
                "output_index": 0, "item": item})),
        ]
        .into_iter()
        .map(Action::Chunk)
        .collect::<Vec<_>>();
            if meta["hold"].as_bool() == Some(true) {
                actions.push(Action::Wait(release_of(&held, &call_id)));
            }
            actions.push(Action::Chunk(ev(
                json!({"type": "response.output_item.added",
            "sequence_number": 3, "output_index": 1, "item": output}),
            )));
            actions.push(Action::Chunk(ev(json!({"type": "response.completed",
            "sequence_number": 4, "response": {"id": "r"}}))));
            actions.push(Action::End);
            Reply {
                head: Reply::sse(vec![]).head,
                actions,
            }
        })
        .await;
    Calls { gateway, releases }
}

impl Calls {
    fn release(&self, call_id: &str) {
        release_of(&self.releases, call_id).notify_one();
    }

    /// The `traceparent` the proxy sent with the request for `call_id`.
    async fn traceparent(&mut self, call_id: &str) -> String {
        loop {
            let request = tokio::time::timeout(WAIT, self.gateway.requests.recv())
                .await
                .expect("a request in time")
                .expect("recorded");
            let body: Value = serde_json::from_slice(&request.body).expect("json");
            if body["metadata"]["call_id"] == call_id {
                return request.header("traceparent").expect("traceparent").into();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A toolpulse process.

struct Toolpulse {
    child: Child,
    listen: SocketAddr,
    admin: SocketAddr,
    mcp: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    _dir: TempDir,
}

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Toolpulse {
    fn start(redis: &RedisServer, prefix: &str, upstream: &str, mcp_server: SocketAddr) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "toolpulse-replicas-{}-{}",
            std::process::id(),
            toolpulse::features::progress::TraceId::new_traceparent().1
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let config = format!(
            "[[tools]]\nmatch = [\"srv_*\"]\nkind = \"mcp\"\n\n[mcp]\nlisten = \"127.0.0.1:0\"\n\n\
             [[mcp.servers]]\nname = \"srv\"\nupstream = \"http://{mcp_server}/mcp\"\n\
             call_name = \"srv_{{tool}}\"\n\n[progress]\nbus = \"{}\"\nbus_prefix = \"{prefix}\"\n\
             min_interval_ms = 0\n",
            redis.url()
        );
        let path = dir.join("toolpulse.toml");
        std::fs::write(&path, config).expect("write the config");
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
            .arg("--config")
            .arg(&path)
            .args(["--upstream", upstream])
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .env("RUST_LOG", "info")
            .env_remove(toolpulse::config::REDIS_URL_ENV)
            .env_remove(toolpulse::config::PROGRESS_TOKEN_ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn toolpulse");
        let stderr = child.stderr.take().expect("stderr");
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                lines.lock().expect("lock").push(line);
            }
        });
        let deadline = Instant::now() + WAIT;
        let (listen, admin, mcp) = loop {
            let found = log.lock().expect("lock").iter().find_map(|l| listening(l));
            if let Some(found) = found {
                break found;
            }
            assert!(Instant::now() < deadline, "not listening: {:?}", log.lock());
            std::thread::sleep(Duration::from_millis(10));
        };
        Toolpulse {
            child,
            listen,
            admin,
            mcp,
            log,
            _dir: TempDir(dir),
        }
    }

    fn lines_with(&self, needle: &str) -> usize {
        let log = self.log.lock().expect("lock");
        log.iter().filter(|l| l.contains(needle)).count()
    }

    async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.admin);
        let response = http_client()
            .get(url.parse().expect("url"))
            .await
            .expect("metrics");
        let body = response.into_body().collect().await.expect("body");
        String::from_utf8_lossy(&body.to_bytes()).into_owned()
    }

    async fn status(&self, path: &str) -> u16 {
        let url = format!("http://{}{path}", self.admin);
        let response = http_client().get(url.parse().expect("url")).await;
        response.expect("admin answers").status().as_u16()
    }

    /// Waits until a line of its `/metrics` starts with `line` (a sample, not its HELP).
    async fn metric(&self, line: &str) {
        let deadline = Instant::now() + WAIT;
        let has = |text: String| text.lines().any(|l| l.starts_with(line));
        while !has(self.metrics().await) {
            assert!(
                Instant::now() < deadline,
                "no {line}: {}",
                self.metrics().await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Opens a client stream whose function_call is `call_id` with `arguments`, held open (or
    /// not) after the call; returns its body once the call runs (`tool_start`).
    async fn stream(&self, call_id: &str, arguments: Value, hold: bool) -> (Incoming, Vec<u8>) {
        open_stream(self.listen, call_id, arguments, hold).await
    }

    /// `POST /v1/progress` on its MCP listener; the status.
    async fn post_progress(&self, report: Value) -> u16 {
        let request = http::Request::post(format!("http://{}/v1/progress", self.mcp))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(report.to_string())))
            .expect("request");
        let response = http_client().request(request).await.expect("response");
        response.status().as_u16()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Toolpulse {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            let log = self.log.lock().expect("lock");
            eprintln!("toolpulse at {}:\n{}", self.listen, log.join("\n"));
        }
    }
}

/// A client stream through `proxy` whose function_call is `call_id` with `arguments`, held
/// open (or not) after the call; its body once the call runs (`tool_start`).
async fn open_stream(
    proxy: SocketAddr,
    call_id: &str,
    arguments: Value,
    hold: bool,
) -> (Incoming, Vec<u8>) {
    let body = json!({"model": "m", "stream": true, "metadata": {
        "call_id": call_id, "arguments": arguments.to_string(), "hold": hold}});
    let request = http::Request::post(format!("http://{proxy}/v1/responses"))
        .header("x-toolpulse-profiles", "tool")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    let response = http_client().request(request).await.expect("response");
    let mut body = response.into_body();
    let seen = read_until(&mut body, "tool_start").await;
    (body, seen)
}

/// The addresses of the `toolpulse listening` line (text log format).
fn listening(line: &str) -> Option<(SocketAddr, SocketAddr, SocketAddr)> {
    if !line.contains("toolpulse listening") {
        return None;
    }
    let field = |name: &str| -> Option<SocketAddr> {
        let prefix = format!("{name}=");
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&prefix)?.trim_matches('"').parse().ok())
    };
    Some((field("listen")?, field("admin")?, field("mcp")?))
}

// ---------------------------------------------------------------------------------------------
// Raw MCP over HTTP (for calls carrying a `traceparent` header, or none).

async fn rpc(
    client: &HttpClient,
    url: &str,
    session: Option<&str>,
    trace: Option<&str>,
    body: Value,
) -> http::Response<Incoming> {
    let mut request = http::Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    if let Some(trace) = trace {
        request = request.header("traceparent", trace);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    tokio::time::timeout(WAIT, client.request(request))
        .await
        .expect("answered in time")
        .expect("response")
}

/// A `tools/call` of `steps` through `front` as a gateway without a progress token of its own
/// sends it; returns the answer's body.
async fn call_steps(front: SocketAddr, arguments: Value, trace: Option<&str>) -> String {
    let client = http_client();
    let url = format!("http://{front}/srv");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "gw", "version": "1"}}});
    let mut response = rpc(&client, &url, None, None, init).await;
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .expect("ascii")
        .to_string();
    read_all(response.body_mut()).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    rpc(&client, &url, Some(&session), None, initialized).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "steps", "arguments": arguments}});
    let mut response = rpc(&client, &url, Some(&session), trace, call).await;
    String::from_utf8_lossy(&read_all(response.body_mut()).await).into_owned()
}

/// The `progress` values of the stream's `tool_progress` events, in order.
fn progress_events(stream: &[u8]) -> Vec<(f64, String)> {
    let text = String::from_utf8_lossy(stream);
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|e| e["type"] == "tool_progress")
        .map(|e| {
            let message = e["message"].as_str().unwrap_or_default().to_string();
            (e["progress"].as_f64().expect("progress"), message)
        })
        .collect()
}

/// Waits until `n` replicas listen on their channels and have reached the bus.
async fn listening_replicas(redis: &RedisServer, prefix: &str, replicas: &[&Toolpulse]) {
    for replica in replicas {
        replica.metric("toolpulse_progress_bus_up 1").await;
    }
    let deadline = Instant::now() + WAIT;
    while redis.channels(prefix) < replicas.len() {
        assert!(Instant::now() < deadline, "replicas not subscribed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn registered(redis: &RedisServer, prefix: &str, call_id: &str) {
    let key = format!("{prefix}:c:{call_id}");
    let deadline = Instant::now() + WAIT;
    while !redis.keys(prefix).iter().any(|(k, _)| *k == key) {
        assert!(Instant::now() < deadline, "{call_id} never registered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---------------------------------------------------------------------------------------------

/// A replica listens only once its progress bus has answered: a first turn served before would
/// have its hosted pairs stored on that replica alone, and its next turn, reaching another,
/// refused. The order of its log lines says it, whatever the machine's speed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_listens_once_its_bus_has_answered() {
    let test = "a_replica_listens_once_its_bus_has_answered";
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let (calls, mcp) = (
        start_gateway().await,
        common::steps::start_mcp_server().await,
    );
    let replica = Toolpulse::start(&redis, "t0", &calls.gateway.url(), mcp);
    let log = replica.log.lock().expect("lock").clone();
    let connected = log
        .iter()
        .position(|l| l.contains("progress bus connected"));
    let listening = log.iter().position(|l| listening(l).is_some());
    assert!(
        connected.is_some() && connected < listening,
        "connected, then listening: {log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_stream_through_the_other_replica_in_order() {
    let test = "progress_reaches_the_stream_through_the_other_replica_in_order";
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let (calls, mcp) = (
        start_gateway().await,
        common::steps::start_mcp_server().await,
    );
    let a = Toolpulse::start(&redis, "t1", &calls.gateway.url(), mcp);
    let b = Toolpulse::start(&redis, "t1", &calls.gateway.url(), mcp);
    listening_replicas(&redis, "t1", &[&a, &b]).await;

    let arguments = json!({"n": 4, "delay_ms": 30});
    let (mut stream, mut seen) = a.stream("call_1", arguments.clone(), true).await;
    // The gateway's MCP client (rmcp) reaches replica B.
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{}/srv", b.mcp));
    let client = ().serve(transport).await.expect("initialized");
    let call = CallToolRequestParams::new("steps")
        .with_arguments(arguments.as_object().cloned().expect("object"));
    let result = client.call_tool(call).await.expect("result");
    assert_eq!(
        result.content[0].as_text().map(|t| t.text.as_str()),
        Some("did 4 steps")
    );
    seen.extend(read_until(&mut stream, "step 4/4").await);
    calls.release("call_1");
    seen.extend(read_all(&mut stream).await);

    let text = String::from_utf8_lossy(&seen);
    let progress = progress_events(&seen);
    assert!(!progress.is_empty(), "{text}");
    assert!(
        progress.windows(2).all(|w| w[0].0 < w[1].0),
        "in order: {progress:?}"
    );
    assert_eq!(progress.last().map(|p| p.1.as_str()), Some("step 4/4"));
    let (last, end) = (text.find("step 4/4"), text.find(r#""type":"tool_end""#));
    assert!(last.is_some() && last < end, "{text}");
    b.metric(r#"toolpulse_progress_total{source="mcp",outcome="delivered"}"#)
        .await;
    a.metric(r#"toolpulse_progress_total{source="bus",outcome="delivered"}"#)
        .await;
    let _ = client.cancel().await;
}

/// An MCP server's progress message far over the bus's message limit reaches
/// the stream on the other replica, cut (as the same replica would cut it), not dropped while
/// counted delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_message_over_the_bus_limit_is_cut_not_lost() {
    let test = "a_progress_message_over_the_bus_limit_is_cut_not_lost";
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let (calls, mcp) = (
        start_gateway().await,
        common::steps::start_mcp_server().await,
    );
    let a = Toolpulse::start(&redis, "t5", &calls.gateway.url(), mcp);
    let b = Toolpulse::start(&redis, "t5", &calls.gateway.url(), mcp);
    listening_replicas(&redis, "t5", &[&a, &b]).await;
    // The steps server puts the label before "step 1/1": a 40 KB message.
    let arguments = json!({"n": 1, "label": "x".repeat(40_000)});
    let (mut stream, mut seen) = a.stream("call_big", arguments.clone(), true).await;
    registered(&redis, "t5", "call_big").await;
    let answer = call_steps(b.mcp, arguments, None).await;
    assert!(
        answer.contains("did 1 steps"),
        "{}",
        &answer[answer.len().saturating_sub(200)..]
    );
    seen.extend(read_until(&mut stream, "tool_progress").await);
    calls.release("call_big");
    seen.extend(read_all(&mut stream).await);
    let progress = progress_events(&seen);
    assert_eq!(progress.len(), 1, "{progress:?}");
    let message = &progress[0].1;
    assert!(
        message.starts_with("xxx") && message.ends_with('…'),
        "{message}"
    );
    assert!(message.len() < 8192, "cut: {} bytes", message.len());
    a.metric(r#"toolpulse_progress_total{source="bus",outcome="delivered"} 1"#)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_calls_on_two_replicas_get_progress_only_by_trace_id() {
    let test = "identical_calls_on_two_replicas_get_progress_only_by_trace_id";
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let (mut calls, mcp) = (
        start_gateway().await,
        common::steps::start_mcp_server().await,
    );
    let a = Toolpulse::start(&redis, "t2", &calls.gateway.url(), mcp);
    let b = Toolpulse::start(&redis, "t2", &calls.gateway.url(), mcp);
    listening_replicas(&redis, "t2", &[&a, &b]).await;
    let same = json!({"n": 2, "delay_ms": 100});
    let (mut on_a, mut seen_a) = a.stream("call_a", same.clone(), true).await;
    let (mut on_b, mut seen_b) = b.stream("call_b", same.clone(), true).await;
    let (trace_a, trace_b) = (
        calls.traceparent("call_a").await,
        calls.traceparent("call_b").await,
    );
    registered(&redis, "t2", "call_a").await;
    registered(&redis, "t2", "call_b").await;

    // No trace id: the call matches both streams; neither gets its progress.
    for front in [a.mcp, b.mcp] {
        let answer = call_steps(front, same.clone(), None).await;
        assert!(answer.contains("did 2 steps"), "{answer}");
    }
    a.metric(r#"toolpulse_progress_total{source="mcp",outcome="ambiguous"}"#)
        .await;
    b.metric(r#"toolpulse_progress_total{source="mcp",outcome="ambiguous"}"#)
        .await;
    // With trace ids each gets its own, across replicas (other arguments tell them apart).
    call_steps(b.mcp, json!({"n": 3, "delay_ms": 20}), Some(&trace_a)).await;
    call_steps(a.mcp, json!({"n": 5, "delay_ms": 20}), Some(&trace_b)).await;
    seen_a.extend(read_until(&mut on_a, "step 3/3").await);
    seen_b.extend(read_until(&mut on_b, "step 5/5").await);
    calls.release("call_a");
    calls.release("call_b");
    seen_a.extend(read_all(&mut on_a).await);
    seen_b.extend(read_all(&mut on_b).await);
    let (got_a, got_b) = (progress_events(&seen_a), progress_events(&seen_b));
    assert!(got_a.iter().all(|p| p.1.ends_with("/3")), "{got_a:?}");
    assert!(got_b.iter().all(|p| p.1.ends_with("/5")), "{got_b:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_never_harms_streams_and_the_bus_comes_back() {
    let test = "a_redis_outage_never_harms_streams_and_the_bus_comes_back";
    let Some(mut redis) = RedisServer::start(test) else {
        return;
    };
    let (mut calls, mcp) = (
        start_gateway().await,
        common::steps::start_mcp_server().await,
    );
    let a = Toolpulse::start(&redis, "t3", &calls.gateway.url(), mcp);
    let b = Toolpulse::start(&redis, "t3", &calls.gateway.url(), mcp);
    listening_replicas(&redis, "t3", &[&a, &b]).await;
    // Open across the whole outage.
    let across_args = json!({"n": 2, "delay_ms": 50, "across": true});
    let (mut across, mut seen_across) = a.stream("call_0", across_args.clone(), true).await;
    let (mut during, mut seen_during) = a.stream("call_1", json!({"n": 1}), true).await;
    let trace = calls.traceparent("call_1").await;
    registered(&redis, "t3", "call_1").await;

    redis.stop();
    // The same replica still matches exactly: by call_id, and an MCP call by trace id.
    let report = json!({"call_id": "call_1", "progress": 1, "total": 2, "message": "half"});
    assert_eq!(a.post_progress(report.clone()).await, 202);
    seen_during.extend(read_until(&mut during, "half").await);
    let answer = call_steps(a.mcp, json!({"n": 3, "delay_ms": 20}), Some(&trace)).await;
    assert!(answer.contains("did 3 steps"));
    seen_during.extend(read_until(&mut during, "step 3/3").await);
    // Another replica cannot see it, and nothing is matched by name and arguments alone.
    assert_eq!(b.post_progress(report).await, 404);
    let by_name = json!({"tool": "srv_steps", "arguments": {"n": 1}, "progress": 1});
    assert_eq!(a.post_progress(by_name).await, 404);
    // The stream ends unharmed.
    calls.release("call_1");
    seen_during.extend(read_all(&mut during).await);
    let text = String::from_utf8_lossy(&seen_during);
    assert!(
        text.contains(r#""type":"tool_end""#) && text.contains("response.completed"),
        "{text}"
    );
    assert_eq!(a.status("/readyz").await, 200);
    a.metric("toolpulse_progress_bus_errors_total{op=").await;
    a.metric("toolpulse_progress_bus_up 0").await;
    assert_eq!(a.lines_with("progress bus down"), 1, "one line per outage");

    redis.restart();
    listening_replicas(&redis, "t3", &[&a, &b]).await;
    registered(&redis, "t3", "call_0").await;
    assert_eq!(a.lines_with("progress bus back"), 1);
    // Across replicas again: the call open all along, reached through B by name and arguments.
    let answer = call_steps(b.mcp, across_args, None).await;
    assert!(answer.contains("did 2 steps"));
    seen_across.extend(read_until(&mut across, "step 2/2").await);
    calls.release("call_0");
    seen_across.extend(read_all(&mut across).await);
    assert!(String::from_utf8_lossy(&seen_across).contains("response.completed"));
}

/// The keys under `prefix` but the hosted id key the replicas share (made once, kept without
/// expiry: it must outlive the pairs signed with it).
fn call_keys(redis: &RedisServer, prefix: &str) -> Vec<(String, i64)> {
    let shared = toolpulse::features::hosted::shared_key::redis_key(prefix);
    let mut keys = redis.keys(prefix);
    keys.retain(|(k, _)| *k != shared);
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_calls_leave_no_keys_and_a_killed_replicas_keys_expire() {
    let test = "closed_calls_leave_no_keys_and_a_killed_replicas_keys_expire";
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let (calls, mcp) = (
        start_gateway().await,
        common::steps::start_mcp_server().await,
    );
    let mut a = Toolpulse::start(&redis, "t4", &calls.gateway.url(), mcp);
    listening_replicas(&redis, "t4", &[&a]).await;

    // 1,000 streams, each running one call that opens and closes.
    const CALLS: usize = 1000;
    const AT_ONCE: usize = 8;
    let proxy = a.listen;
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..AT_ONCE {
        workers.spawn(async move {
            for i in (worker..CALLS).step_by(AT_ONCE) {
                let (mut body, _) =
                    open_stream(proxy, &format!("call_{i}"), json!({"i": i}), false).await;
                read_all(&mut body).await;
            }
        });
    }
    while let Some(done) = workers.join_next().await {
        done.expect("a worker");
    }
    a.metric(&format!(
        r#"toolpulse_tool_calls_total{{kind="mcp",outcome="completed"}} {CALLS}"#
    ))
    .await;
    let deadline = Instant::now() + WAIT;
    while !call_keys(&redis, "t4").is_empty() {
        assert!(
            Instant::now() < deadline,
            "left behind: {:?}",
            call_keys(&redis, "t4")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!a.metrics().await.contains("progress_bus_errors_total{"));

    // A replica killed while a call is open leaves keys that expire on their own.
    let (_held, _) = a.stream("call_held", json!({}), true).await;
    registered(&redis, "t4", "call_held").await;
    a.kill();
    let keys = call_keys(&redis, "t4");
    let ttl = toolpulse::features::progress::bus::registrar::REGISTRATION_TTL.as_millis() as i64;
    assert!(keys.len() >= 3, "{keys:?}");
    assert!(keys.iter().all(|(_, t)| *t > 0 && *t <= ttl), "{keys:?}");
}
