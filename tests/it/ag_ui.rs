//! The AG-UI endpoint through real sockets: a real proxy with `[ag_ui]` in front of the scripted
//! gateway. Inputs that are not a `RunAgentInput` are 400s naming the field (and reach no
//! gateway); a run is one streamed Responses request carrying the client's headers, its stream
//! translated (checked by the oracle's AG-UI checker); progress reaches a running call's
//! activity; the gateway's error status and a broken stream end the run with `RUN_ERROR`; a
//! client that goes away closes the gateway's connection.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::gateway::{Action, Gateway, HANG_GUARD, Recorded, Reply};
use common::*;
use http_body_util::Full;
use serde_json::{Value, json};
use tokio::sync::Notify;
use toolpulse::Config;
use toolpulse::features::progress::local::LocalHub;
use toolpulse::features::progress::{Delivery, Progress, Target};
use toolpulse::proxy::Proxy;

const CONFIG: &str = r#"
[[tools]]
match = ["github_*"]
kind = "mcp"

[failure]
output_patterns = ["^no executor found for tool "]

[ag_ui]
model = "gpt-default"
"#;

fn config() -> Config {
    Config::from_toml_str(CONFIG).expect("config")
}

fn ag_ui_blocks(name: &str) -> Vec<Vec<u8>> {
    blocks(&read(&fixtures_dir().join("ag_ui").join(name)))
}

async fn run(proxy: std::net::SocketAddr, input: &Value) -> http::Response<hyper::body::Incoming> {
    let request = http::Request::post(format!("http://{proxy}/ag-ui"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-client-key")
        .header("x-custom", "kept")
        .body(Full::new(Bytes::from(input.to_string())))
        .expect("request");
    http_client().request(request).await.expect("response")
}

fn checked(output: &[u8]) -> Vec<serde_json::Map<String, Value>> {
    invariants::ag_ui::check(output)
        .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(output)));
    invariants::ag_ui::events(output).expect("events")
}

fn input() -> Value {
    json!({
        "threadId": "thread-7", "runId": "run-9", "state": {},
        "messages": [{"id": "u1", "role": "user", "content": "Find the stalls."}],
        "tools": [], "context": [], "forwardedProps": {}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_that_is_not_a_run_is_a_400_naming_the_field_and_reaches_no_gateway() {
    let mut gw = Gateway::start(|_| Reply::sse(vec![])).await;
    let proxy = start_proxy(config(), &gw.url()).await;
    let cases = [
        (json!({"runId": "r", "messages": []}), "threadId"),
        (
            json!({"threadId": "t", "runId": "r", "messages": [{"role": "tool", "content": "x"}]}),
            "messages[0].toolCallId",
        ),
        (
            json!({"threadId": "t", "runId": "r", "messages": [], "tools": [{"parameters": {}}]}),
            "tools[0].name",
        ),
        (json!("not an object"), "body"),
    ];
    for (input, field) in cases {
        let response = run(proxy, &input).await;
        assert_eq!(response.status(), 400, "{input}");
        let json = json_body(response).await;
        assert_eq!(json["error"]["type"], "invalid_request_error");
        assert_eq!(json["error"]["code"], "invalid_run_agent_input");
        assert_eq!(json["error"]["param"], field);
        let message = json["error"]["message"].as_str().expect("a message");
        assert!(message.contains(field), "{message}");
    }
    let get = http::Request::get(format!("http://{proxy}/ag-ui")).body(Full::new(Bytes::new()));
    let response = http_client()
        .request(get.expect("request"))
        .await
        .expect("response");
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers()["allow"], "POST");
    assert!(
        gw.requests_before_marker(proxy).await.is_empty(),
        "nothing was forwarded"
    );

    // Without a default model, a run must name one.
    let mut config = config();
    config.ag_ui.as_mut().expect("[ag_ui]").model = None;
    let proxy = start_proxy(config, &gw.url()).await;
    let json = json_body(run(proxy, &input()).await).await;
    assert_eq!(json["error"]["param"], "forwardedProps.model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_section_the_path_is_proxied_like_any_other() {
    let mut gw = Gateway::start(|_| Reply::sse(vec![])).await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let response = run(proxy, &input()).await;
    assert_eq!(response.status(), 200);
    let forwarded = gw.requests.recv().await.expect("forwarded");
    assert_eq!(forwarded.target, "/ag-ui");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_one_streamed_responses_request_and_its_stream_as_ag_ui_events() {
    let chunks = ag_ui_blocks("agentic.sse");
    let mut gw = Gateway::start(move |_| Reply::sse(chunks.clone())).await;
    let proxy = start_proxy(config(), &gw.url()).await;
    let mut input = input();
    input["forwardedProps"] = json!({"model": "gpt-picked"});
    input["tools"] =
        json!([{"name": "confirm", "description": "Ask", "parameters": {"type": "object"}}]);
    let response = run(proxy, &input).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let output = read_all(&mut body).await;
    let events = checked(&output);
    assert_eq!(events[0]["threadId"], "thread-7");
    assert_eq!(events[0]["runId"], "run-9");
    assert_eq!(events.last().expect("events")["type"], "RUN_FINISHED");
    let results: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "TOOL_CALL_RESULT")
        .collect();
    assert_eq!(results.len(), 4);
    let broken = results
        .iter()
        .find(|e| e["toolCallId"] == "call_gb_1")
        .expect("its result");
    assert_eq!(
        broken["content"],
        "no executor found for tool github_broken"
    );
    let text = String::from_utf8_lossy(&output);
    assert!(
        !text.contains("sequence_number") && !text.contains("event:"),
        "{text}"
    );

    let recorded: Recorded = gw.requests.recv().await.expect("forwarded");
    assert_eq!(
        (recorded.method.as_str(), recorded.target.as_str()),
        ("POST", "/v1/responses")
    );
    assert_eq!(
        recorded.header("authorization"),
        Some("Bearer sk-client-key")
    );
    assert_eq!(recorded.header("x-custom"), Some("kept"));
    assert_eq!(recorded.header("accept"), Some("text/event-stream"));
    let body: Value = serde_json::from_slice(&recorded.body).expect("JSON");
    assert_eq!(
        body,
        json!({
            "model": "gpt-picked",
            "input": [{"type": "message", "role": "user", "content": "Find the stalls."}],
            "tools": [{"type": "function", "name": "confirm", "description": "Ask", "parameters": {"type": "object"}, "strict": false}],
            "stream": true
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_running_calls_activity_before_its_result() {
    let mut blocks = ag_ui_blocks("agentic.sse");
    let at = blocks
        .iter()
        .position(|b| String::from_utf8_lossy(b).contains(r#""call_id":"call_gb_1","output""#))
        .expect("the broken call's output");
    let after = blocks.split_off(at);
    let release = Arc::new(Notify::new());
    let held = release.clone();
    let mut gw = Gateway::start(move |_| common::gateway::held(&blocks, &held, &after)).await;
    let hub = LocalHub::new(Duration::from_secs(5));
    let mut config = config();
    config.proxy.upstream = Some(gw.url().parse().expect("URL"));
    let proxy = Proxy::new(Arc::new(config))
        .expect("proxy")
        .with_progress(hub.clone());
    let proxy = serve_proxy(Arc::new(proxy)).await;
    let mut body = run(proxy, &input()).await.into_body();
    let mut seen = read_until(&mut body, r#""TOOL_CALL_END","toolCallId":"call_gb_1""#).await;
    let recorded = gw.requests.recv().await.expect("forwarded");
    assert!(
        recorded.header("traceparent").is_some(),
        "the gateway gets a trace to match by"
    );

    let report = Progress {
        progress: 2.0,
        total: Some(4.0),
        message: Some("page 2".into()),
    };
    let delivery = hub.post_now(Target::CallId("call_gh_1".into()), report);
    assert_eq!(delivery, Delivery::Delivered);
    seen.extend(read_until(&mut body, "page 2").await);
    release.notify_one();
    seen.extend(read_all(&mut body).await);
    let events = checked(&seen);
    let progress = events
        .iter()
        .position(|e| e.get("patch").is_some_and(|p| p[0]["path"] == "/progress"))
        .expect("the progress delta");
    assert_eq!(events[progress]["messageId"], "activity-call_gh_1");
    assert_eq!(
        events[progress]["patch"],
        json!([{"op": "add", "path": "/progress", "value": 2.0},
               {"op": "add", "path": "/total", "value": 4.0},
               {"op": "add", "path": "/message", "value": "page 2"}])
    );
    let result = events
        .iter()
        .position(|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == "call_gh_1");
    assert!(Some(progress) < result, "the progress before the result");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_error_status_or_broken_stream_ends_the_run_with_its_error() {
    let gw = Gateway::start(|request: &Recorded| {
        let body = String::from_utf8_lossy(&request.body).to_string();
        if body.contains("overloaded") {
            let json = r#"{"error":{"message":"Overloaded, retry later.","type":"server_error","code":"overloaded"}}"#;
            return Reply {
                head: format!("HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}", json.len()),
                actions: vec![Action::Raw(json.as_bytes().to_vec())],
            };
        }
        let mut blocks = ag_ui_blocks("agentic.sse");
        blocks.truncate(6);
        let mut actions: Vec<Action> = blocks.into_iter().map(Action::Chunk).collect();
        actions.push(Action::Close);
        Reply { head: Reply::sse(vec![]).head, actions }
    })
    .await;
    let proxy = start_proxy(config(), &gw.url()).await;
    let mut input = input();
    input["forwardedProps"] = json!({"model": "overloaded"});
    let response = run(proxy, &input).await;
    assert_eq!(response.status(), 200);
    let events = checked(&read_all(&mut response.into_body()).await);
    let types: Vec<_> = events
        .iter()
        .map(|e| e["type"].as_str().expect("type"))
        .collect();
    assert_eq!(types, ["RUN_STARTED", "RUN_ERROR"]);
    assert_eq!(events[1]["message"], "Overloaded, retry later.");
    assert_eq!(events[1]["code"], "overloaded");

    let response = run(proxy, &self::input()).await;
    let events = checked(&read_all(&mut response.into_body()).await);
    let last = events.last().expect("events");
    assert_eq!(last["type"], "RUN_ERROR");
    assert_eq!(last["code"], "broken_stream");
    let failed = events
        .iter()
        .filter(|e| e.get("patch").is_some_and(|p| p[0]["value"] == "failed"))
        .count();
    assert_eq!(failed, 1, "the call cut off ends failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_closes_the_gateways_connection() {
    let blocks = ag_ui_blocks("agentic.sse");
    let mut gw = Gateway::start(move |_| Reply {
        head: Reply::sse(vec![]).head,
        actions: blocks[..8]
            .iter()
            .cloned()
            .map(Action::Chunk)
            .chain([Action::WaitForClose(HANG_GUARD)])
            .collect(),
    })
    .await;
    let proxy = start_proxy(config(), &gw.url()).await;
    let client = http_client();
    let request = http::Request::post(format!("http://{proxy}/ag-ui"))
        .body(Full::new(Bytes::from(input().to_string())))
        .expect("request");
    let mut body = client.request(request).await.expect("response").into_body();
    read_until(&mut body, "TOOL_CALL_START").await;
    drop(body);
    drop(client);
    gw.saw_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_run_is_counted_in_and_out_of_the_active_streams_an_error_run_too() {
    use toolpulse::metrics::{Response, labels::Requests};
    let gw = Gateway::start(|request: &Recorded| {
        if String::from_utf8_lossy(&request.body).contains("overloaded") {
            let json = r#"{"error":{"message":"Overloaded."}}"#;
            return Reply {
                head: format!("HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}", json.len()),
                actions: vec![Action::Raw(json.as_bytes().to_vec())],
            };
        }
        Reply::sse(ag_ui_blocks("agentic.sse"))
    })
    .await;
    let (proxy, handle) = start_proxy_with_handle(config(), &gw.url()).await;
    let mut failing = input();
    failing["forwardedProps"] = json!({"model": "overloaded"});
    for input in [input(), failing] {
        let response = run(proxy, &input).await;
        checked(&read_all(&mut response.into_body()).await);
    }
    // A run is counted out when its body is dropped, after the client read it: poll.
    let metrics = handle.metrics();
    let runs = || {
        let label = Requests {
            response: Response::AgUi,
        };
        metrics.requests.get_or_create(&label).get()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while runs() < 2 || metrics.streams_active.get() != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "runs {}, active {}",
            runs(),
            metrics.streams_active.get()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(metrics.streams_active.get(), 0);
}
