//! A hostile gateway: what one stream may hold across its open calls. Many parallel calls with
//! large arguments and no outputs, a huge tool name, a huge call id: the stream holds at most
//! `[limits] max_open_call_bytes` for its calls (each call's arguments once), calls past it or
//! past the caps on names and ids pass as the gateway sent them, and the metrics count them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolpulse::Config;
use toolpulse::metrics::Metrics;
use toolpulse::proxy::Proxy;

use crate::common::gateway::{Gateway, Reply};
use crate::common::{http_client, post, read_all, serve_proxy};

/// Far above what any step takes: a metric not there by then never comes.
const PATIENCE: Duration = Duration::from_secs(60);

/// The budget the tests give a stream: four calls of [`ARGUMENT_BYTES`] do not fit.
const BUDGET: usize = 64 * 1024;
const ARGUMENT_BYTES: usize = 16 * 1024;

fn block(json: serde_json::Value) -> Vec<u8> {
    let kind = json["type"].as_str().expect("a type").to_string();
    format!("event: {kind}\ndata: {json}\n\n").into_bytes()
}

fn item(call_id: &str, name: &str, arguments: &str) -> serde_json::Value {
    json!({"id": format!("fc_{}", &call_id[..call_id.len().min(8)]), "type": "function_call",
        "status": "completed", "name": name, "call_id": call_id, "arguments": arguments})
}

fn added(index: usize, item: serde_json::Value) -> Vec<u8> {
    block(json!({"type": "response.output_item.added", "output_index": index, "item": item}))
}

fn done(index: usize, item: serde_json::Value) -> Vec<u8> {
    block(json!({"type": "response.output_item.done", "output_index": index, "item": item}))
}

/// Waits until the metrics hold `line` (the stream's counters are added when its request ends,
/// just after the client has read the body's end).
async fn metric(metrics: &Metrics, line: &str) {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if metrics.encode().contains(line) {
            return;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no {line} in {}", metrics.encode());
}

/// The gateway streams eight web searches with 16 KiB of arguments each (added, then done),
/// eight more done without being added, a call with a 1 MiB name and one with a 1 KiB call id,
/// and never an output. With a 64 KiB budget: three calls keep their arguments, the five
/// shown after them go on without theirs, the eight that come done pass as sent, and so do
/// the calls over the caps; the client gets every byte of those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_cannot_grow_one_stream_past_its_budget() {
    let arguments = format!("{{\"q\":\"{}\"}}", "a".repeat(ARGUMENT_BYTES - 8));
    let mut shown = vec![block(
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
    )];
    let mut untouched = Vec::new();
    for i in 0..8 {
        let call_id = format!("call_{i}");
        shown.push(added(i, item(&call_id, "web_search", "")));
        shown.push(done(i, item(&call_id, "web_search", &arguments)));
    }
    for i in 8..16 {
        let call_id = format!("call_{i}");
        untouched.push(done(i, item(&call_id, "web_search", &arguments)));
    }
    let name = "n".repeat(1 << 20);
    let long_id = format!("call_{}", "i".repeat(1024));
    for (i, (call_id, name)) in [("call_16", name.as_str()), (&long_id, "web_search")]
        .into_iter()
        .enumerate()
    {
        untouched.push(added(16 + i, item(call_id, name, "")));
        untouched.push(done(16 + i, item(call_id, name, &arguments)));
    }
    let end = block(
        json!({"type": "response.completed", "response": {"id": "resp_1",
        "status": "completed"}}),
    );
    let mut stream = shown.clone();
    stream.extend(untouched.iter().cloned());
    stream.push(end.clone());
    let gateway = Gateway::start(move |_| Reply::sse(stream.clone())).await;
    let config = format!(
        "[proxy]\nupstream = \"{}\"\n[heartbeat]\ninterval_ms = 0\n\
         [limits]\nmax_open_call_bytes = {BUDGET}\n",
        gateway.url()
    );
    let config = Arc::new(Config::from_toml_str(&config).expect("valid config"));
    let proxy = Arc::new(Proxy::new(config).expect("proxy"));
    let metrics = proxy.metrics().clone();
    let addr = serve_proxy(proxy).await;

    let body = r#"{"model":"m","stream":true,"input":"search"}"#;
    let mut response = post(&http_client(), format!("http://{addr}/v1/responses"), body).await;
    assert_eq!(response.status(), 200);
    let out = read_all(response.body_mut()).await;

    // Fail open: the calls past the budget or the caps reach the client as the gateway sent
    // them, in order.
    let mut from = 0;
    for block in untouched.iter().chain([&end]) {
        let at = memchr::memmem::find(&out[from..], block).unwrap_or_else(|| {
            panic!(
                "{} not forwarded as sent",
                String::from_utf8_lossy(&block[..200])
            )
        });
        from += at + block.len();
    }
    let text = String::from_utf8_lossy(&out);
    assert_eq!(
        text.matches("event: response.web_search_call.in_progress")
            .count(),
        8,
        "the eight calls added within the budget are shown"
    );
    metric(
        &metrics,
        "toolpulse_tool_calls_untracked_total{reason=\"held_bytes\"} 8\n",
    )
    .await;
    for line in [
        "toolpulse_tool_calls_untracked_total{reason=\"name_bytes\"} 1\n",
        "toolpulse_tool_calls_untracked_total{reason=\"id_bytes\"} 1\n",
        "toolpulse_tool_call_arguments_dropped_total 5\n",
    ] {
        metric(&metrics, line).await;
    }
}
