//! The next turn: bounded mapped bodies, pairs bound to their caller, ids that cannot be mapped.
//!
//! - a body whose `item_reference`s would map to more than `[hosted] max_mapped_body_bytes`
//!   gets a 400 naming the limit, and the gateway nothing; the mapped body is charged to the
//!   body budget;
//! - a pair maps only for the credentials that made it; a reference to another caller's, an
//!   evicted or a forged id is a 400 naming the item and why, never a shorter history; one
//!   caller's large outputs do not evict another's pairs;
//! - two replicas on one Redis without a key share one, so a next turn maps on either; after a
//!   restart under another key a full `mcp_call` keeps its call id;
//! - every spelling of the responses path and any `Content-Type` is mapped; ambiguous JSON is
//!   refused; an escaped id in a body over the read limit is found.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};
use toolpulse::Config;
use toolpulse::metrics::{HostedRefusal, labels};
use toolpulse::proxy::Proxy;

use crate::common::gateway::{Gateway, Recorded, Reply};
use crate::common::redis_server::RedisServer;
use crate::common::{http_client, read_all, serve_proxy};

const WAIT: Duration = Duration::from_secs(60);
const KEY: &str = "a deployment key of some length";

/// The first turn (a string `input`): one `srv_lookup` call per `metadata.calls` (1 by
/// default), named `metadata.call_id` (`_<n>` appended past the first), each with an output of
/// `metadata.output_bytes` bytes. Later turns: a message.
fn gateway_reply(request: &Recorded) -> Reply {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
    let meta = &body["metadata"];
    let call_id = meta["call_id"].as_str().unwrap_or("call_1");
    let output = "x".repeat(meta["output_bytes"].as_u64().unwrap_or(10) as usize);
    let calls = if body["input"].is_string() {
        meta["calls"].as_u64().unwrap_or(1)
    } else {
        0
    };
    let ev = |json: Value| format!("data: {json}\n\n").into_bytes();
    let mut events = vec![ev(json!({"type": "response.created", "sequence_number": 0,
        "response": {"id": "r", "output": []}}))];
    let mut listed = Vec::new();
    for n in 0..calls {
        let call_id = match n {
            0 => call_id.to_string(),
            n => format!("{call_id}_{n}"),
        };
        let call = json!({"id": format!("fc_{call_id}"), "type": "function_call",
            "status": "completed", "name": "srv_lookup", "call_id": call_id,
            "arguments": "{\"user\":\"ada\"}"});
        let out = json!({"id": format!("fco_{call_id}"), "type": "function_call_output",
            "call_id": call_id, "output": output, "status": "completed"});
        for (item, index) in [(&call, 2 * n), (&out, 2 * n + 1)] {
            let seq = events.len();
            events.push(ev(json!({"type": "response.output_item.added",
                "sequence_number": seq, "output_index": index, "item": item})));
            let seq = events.len();
            events.push(ev(json!({"type": "response.output_item.done",
                "sequence_number": seq, "output_index": index, "item": item})));
        }
        listed.extend([call, out]);
    }
    let message = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "status": "completed", "content": [{"type": "output_text", "text": "Done."}]});
    let index = listed.len();
    let seq = events.len();
    events.push(ev(
        json!({"type": "response.output_item.done", "sequence_number": seq,
        "output_index": index, "item": message}),
    ));
    listed.push(message);
    let seq = events.len();
    events.push(ev(
        json!({"type": "response.completed", "sequence_number": seq,
        "response": {"id": "r", "output": listed}}),
    ));
    Reply::sse(events)
}

fn config(upstream: &str, extra: &str) -> Config {
    let text = format!(
        "[[tools]]\nmatch = [\"srv_*\"]\nkind = \"mcp\"\nserver_label = \"srv\"\n\n\
         [hosted]\nkey = \"{KEY}\"\n{extra}"
    );
    let mut config = Config::from_toml_str(&text).expect("config");
    config.proxy.upstream = Some(upstream.parse().expect("upstream URL"));
    config
}

async fn proxy(config: Config) -> (SocketAddr, Arc<Proxy>) {
    let proxy = Arc::new(Proxy::new(Arc::new(config)).expect("proxy"));
    (serve_proxy(proxy.clone()).await, proxy)
}

/// `POST path` with `body`, the credentials `auth` (if any) and `content-type`.
async fn post(
    proxy: SocketAddr,
    path: &str,
    auth: Option<&str>,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Vec<u8>) {
    let mut request =
        http::Request::post(format!("http://{proxy}{path}")).header("content-type", content_type);
    if let Some(auth) = auth {
        request = request.header("authorization", auth);
    }
    let request = request.body(Full::new(Bytes::from(body))).expect("request");
    let response = tokio::time::timeout(WAIT, http_client().request(request))
        .await
        .expect("answered in time")
        .expect("response");
    let status = response.status().as_u16();
    (status, read_all(&mut response.into_body()).await)
}

async fn post_json(proxy: SocketAddr, auth: Option<&str>, body: Value) -> (u16, Vec<u8>) {
    let body = body.to_string().into_bytes();
    post(proxy, "/v1/responses", auth, "application/json", body).await
}

/// A first turn through `proxy` as `auth`: the hosted items `response.completed` lists.
async fn first_turn(proxy: SocketAddr, auth: Option<&str>, metadata: Value) -> Vec<Value> {
    let body = json!({"model": "m", "stream": true, "input": "who is ada?", "metadata": metadata});
    let (status, stream) = post_json(proxy, auth, body).await;
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&stream);
    let completed = text
        .split("\n\n")
        .find(|e| e.contains("\"response.completed\""))
        .expect("completed");
    let data: Value = serde_json::from_str(completed.trim_start_matches("data: ")).expect("json");
    let output = data["response"]["output"].as_array().expect("output");
    let items: Vec<Value> = output
        .iter()
        .filter(|i| i["type"] == "mcp_call")
        .cloned()
        .collect();
    assert!(!items.is_empty(), "{text}");
    items
}

fn reference(item: &Value) -> Value {
    json!({"type": "item_reference", "id": item["id"]})
}

fn next_turn(items: Vec<Value>) -> Value {
    json!({"model": "m", "stream": true, "input": items})
}

/// The next request the gateway got, as JSON.
async fn received(gateway: &mut Gateway) -> Value {
    let request = tokio::time::timeout(WAIT, gateway.requests.recv())
        .await
        .expect("a request in time")
        .expect("recorded");
    serde_json::from_slice(&request.body).expect("JSON body")
}

/// An OpenAI-style error: its `code` and `message`.
fn error_of(answer: &[u8]) -> (String, String) {
    let v: Value = serde_json::from_slice(answer).expect("a JSON error");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert!(v["error"].get("param").is_some_and(Value::is_null), "{v}");
    let text = |v: &Value| v.as_str().expect("a string").to_string();
    (text(&v["error"]["code"]), text(&v["error"]["message"]))
}

fn refusals(proxy: &Proxy, reason: HostedRefusal) -> u64 {
    let label = labels::HostedRefusals { reason };
    proxy.metrics().hosted_refusals.get_or_create(&label).get()
}

// ---------------------------------------------------------------------------------------------
// The mapped body's bound and budget.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_that_would_map_past_the_bound_are_refused_before_the_gateway() {
    let mut gateway = Gateway::start(gateway_reply).await;
    let extra = "max_mapped_body_bytes = 65536\n";
    let (proxy, handle) = proxy(config(&gateway.url(), extra)).await;
    let items = first_turn(proxy, None, json!({"output_bytes": 10_000})).await;
    received(&mut gateway).await;
    // 5 references map within the bound, exactly.
    let (status, _) = post_json(proxy, None, next_turn(vec![reference(&items[0]); 5])).await;
    assert_eq!(status, 200);
    let input = received(&mut gateway).await["input"].clone();
    assert_eq!(input.as_array().map(Vec::len), Some(10), "5 pairs");
    // 4,000 references to the one pair (40 MB once mapped) are refused by size.
    let body = next_turn(vec![reference(&items[0]); 4000]);
    let (status, answer) = post_json(proxy, None, body).await;
    assert_eq!(status, 400);
    let (code, message) = error_of(&answer);
    assert_eq!(code, "mapped_body_too_large");
    assert!(
        message.contains("65536 bytes") && message.contains("max_mapped_body_bytes"),
        "{message}"
    );
    assert!(
        gateway.requests_before_marker(proxy).await.is_empty(),
        "the gateway got nothing"
    );
    assert_eq!(refusals(&handle, HostedRefusal::TooLarge), 1);
    assert_eq!(handle.body_budget().held(), 0, "nothing held after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mapped_body_is_charged_to_the_body_budget() {
    let mut gateway = Gateway::start(gateway_reply).await;
    let mut config = config(&gateway.url(), "max_mapped_body_bytes = 4194304\n");
    config.clients.body_buffer_bytes = 256 * 1024;
    let (proxy, handle) = proxy(config).await;
    let items = first_turn(proxy, None, json!({"output_bytes": 10_000})).await;
    received(&mut gateway).await;
    // 50 references: a 2 KB body that maps to 500 KB, more than the whole budget.
    let (status, answer) = post_json(proxy, None, next_turn(vec![reference(&items[0]); 50])).await;
    assert_eq!(status, 503);
    assert_eq!(error_of(&answer).0, "request_bodies_over_budget");
    assert!(gateway.requests_before_marker(proxy).await.is_empty());
    assert_eq!(handle.body_budget().held(), 0);
}

// ---------------------------------------------------------------------------------------------
// Pairs bound to their caller; nothing lost silently.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_maps_only_for_the_caller_that_made_it() {
    let mut gateway = Gateway::start(gateway_reply).await;
    let (proxy, handle) = proxy(config(&gateway.url(), "")).await;
    let (alice, mallory) = (Some("Bearer alice"), Some("Bearer mallory"));
    let items = first_turn(proxy, alice, json!({"output_bytes": 12})).await;
    received(&mut gateway).await;
    let id = items[0]["id"].as_str().expect("id").to_string();
    for who in [mallory, None] {
        let (status, answer) = post_json(proxy, who, next_turn(vec![reference(&items[0])])).await;
        assert_eq!(status, 400, "{who:?}");
        let (code, message) = error_of(&answer);
        assert_eq!(code, "hosted_item_unavailable");
        assert!(
            message.contains(&id) && message.contains("other credentials"),
            "{message}"
        );
    }
    assert!(gateway.requests_before_marker(proxy).await.is_empty());
    assert_eq!(refusals(&handle, HostedRefusal::AnotherCaller), 2);
    // The full item maps from its own content for anyone: it holds nothing they did not send.
    let mut forged = items[0].clone();
    forged["output"] = "what mallory says".into();
    let (status, _) = post_json(proxy, mallory, next_turn(vec![forged])).await;
    assert_eq!(status, 200);
    let input = received(&mut gateway).await["input"].clone();
    assert_eq!(
        input[1]["output"], "what mallory says",
        "not alice's output"
    );
    // Its maker's reference maps to the gateway's pair, exactly.
    let (status, _) = post_json(proxy, alice, next_turn(vec![reference(&items[0])])).await;
    assert_eq!(status, 200);
    let input = received(&mut gateway).await["input"].clone();
    assert_eq!(input[1]["output"], "x".repeat(12));
    assert_eq!(input[0]["call_id"], "call_1");
    // An id this deployment did not sign is refused too, not left out.
    let forged_id = format!("{}AAAA", &id[..id.len() - 4]);
    let body = next_turn(vec![json!({"type": "item_reference", "id": forged_id})]);
    let (status, answer) = post_json(proxy, alice, body).await;
    assert_eq!(
        (status, error_of(&answer).0.as_str()),
        (400, "hosted_item_unavailable")
    );
    assert_eq!(refusals(&handle, HostedRefusal::Unverified), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_callers_large_outputs_do_not_evict_anothers_pairs() {
    let mut gateway = Gateway::start(gateway_reply).await;
    // A 400 KB store: a caller may hold 100 KB of it.
    let (proxy, handle) = proxy(config(&gateway.url(), "max_bytes = 409600\n")).await;
    let alice = Some("Bearer alice");
    let hers = first_turn(proxy, alice, json!({"output_bytes": 100})).await;
    received(&mut gateway).await;
    // 18 outputs of 30 KB from one caller, over three responses: more than the whole store.
    let mallory = Some("Bearer mallory");
    let mut his = Vec::new();
    for n in 0..3 {
        let metadata = json!({"output_bytes": 30_000, "calls": 6, "call_id": format!("m{n}")});
        his.extend(first_turn(proxy, mallory, metadata).await);
        received(&mut gateway).await;
    }
    let (status, _) = post_json(proxy, alice, next_turn(vec![reference(&hers[0])])).await;
    assert_eq!(status, 200, "alice's pair is still there");
    let input = received(&mut gateway).await["input"].clone();
    assert_eq!(input[1]["output"], "x".repeat(100));
    // Mallory's own oldest went, and he is told so.
    let (status, answer) = post_json(proxy, mallory, next_turn(vec![reference(&his[0])])).await;
    assert_eq!(status, 400);
    let (code, message) = error_of(&answer);
    assert_eq!(code, "hosted_item_unavailable");
    assert!(message.contains("evicted"), "{message}");
    assert_eq!(refusals(&handle, HostedRefusal::Evicted), 1);
    let (status, _) = post_json(proxy, mallory, next_turn(vec![reference(&his[17])])).await;
    assert_eq!(status, 200, "his newest is kept");
}

// ---------------------------------------------------------------------------------------------
// Replicas and restarts.

/// A toolpulse process on `redis` (prefix `prefix`) without a `[hosted] key`.
struct Replica {
    child: Child,
    listen: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Replica {
    fn start(redis: &RedisServer, prefix: &str, upstream: &str) -> Replica {
        let dir = std::env::temp_dir().join(format!(
            "toolpulse-hosted-{}-{}",
            std::process::id(),
            toolpulse::features::progress::TraceId::new_traceparent().1
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let config = format!(
            "[[tools]]\nmatch = [\"srv_*\"]\nkind = \"mcp\"\n\n[progress]\nbus = \"{}\"\n\
             bus_prefix = \"{prefix}\"\n",
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
            .env_remove(toolpulse::config::HOSTED_KEY_ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn toolpulse");
        let stderr = child.stderr.take().expect("stderr");
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let lines = log.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(listen) = listening(&line) {
                    let _ = tx.send(listen);
                }
                lines.lock().expect("lock").push(line);
            }
        });
        let listen = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("not listening: {:?}", log.lock()));
        // Its pairs reach the other replica through the bus, which connects after the listener
        // is up: a first turn served before that is stored here only (a race the test is not
        // about), so the test starts once the bus is connected.
        let deadline = std::time::Instant::now() + WAIT;
        while !log
            .lock()
            .expect("lock")
            .iter()
            .any(|line| line.contains("progress bus connected"))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the bus never connected: {:?}",
                log.lock()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Replica {
            child,
            listen,
            log,
            _dir: TempDir(dir),
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = self.log.lock().expect("lock");
            eprintln!("toolpulse at {}:\n{}", self.listen, log.join("\n"));
        }
    }
}

fn listening(line: &str) -> Option<SocketAddr> {
    if !line.contains("toolpulse listening") {
        return None;
    }
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("listen=")?.trim_matches('"').parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_without_a_key_map_each_others_next_turns() {
    let test = "two_replicas_without_a_key_map_each_others_next_turns";
    let Some(redis) = RedisServer::start(test) else {
        return;
    };
    let mut gateway = Gateway::start(gateway_reply).await;
    let a = Replica::start(&redis, "tp-key", &gateway.url());
    let b = Replica::start(&redis, "tp-key", &gateway.url());
    for (from, to) in [(&a, &b), (&b, &a)] {
        let items = first_turn(from.listen, Some("Bearer ada"), json!({"output_bytes": 20})).await;
        received(&mut gateway).await;
        let (status, answer) = post_json(
            to.listen,
            Some("Bearer ada"),
            next_turn(vec![reference(&items[0])]),
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        let input = received(&mut gateway).await["input"].clone();
        assert_eq!(input[0]["type"], "function_call", "{input}");
        assert_eq!(input[0]["call_id"], "call_1");
        assert_eq!(input[1]["output"], "x".repeat(20), "the exact pair");
    }
    let keys = redis.keys("tp-key");
    assert!(
        keys.iter()
            .any(|(k, ttl)| k == "tp-key:hosted:key" && *ttl < 0),
        "one shared key, kept without expiry: {keys:?}"
    );
    // Redis loses it (a restart without persistence): the next pair a replica writes puts it
    // back, the same, before a new replica could make another.
    let mut conn = redis.connection();
    let get = |conn: &mut redis::Connection| -> Option<String> {
        redis::cmd("GET")
            .arg("tp-key:hosted:key")
            .query(conn)
            .expect("GET")
    };
    let shared = get(&mut conn).expect("the key");
    let _: () = redis::cmd("DEL")
        .arg("tp-key:hosted:key")
        .query(&mut conn)
        .expect("DEL");
    first_turn(a.listen, None, json!({})).await;
    received(&mut gateway).await;
    let deadline = std::time::Instant::now() + WAIT;
    while get(&mut conn).is_none() {
        assert!(std::time::Instant::now() < deadline, "never put back");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(get(&mut conn), Some(shared), "the running replicas' key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_under_another_key_a_full_mcp_call_keeps_its_call_id() {
    let mut gateway = Gateway::start(gateway_reply).await;
    let (before, _) = proxy(config(&gateway.url(), "")).await;
    let items = first_turn(before, None, json!({"output_bytes": 5})).await;
    received(&mut gateway).await;
    let mut restarted = config(&gateway.url(), "");
    restarted.hosted.key =
        toolpulse::features::hosted::id::Key::new(b"another key, after a restart");
    let (after, _) = proxy(restarted).await;
    let (status, _) = post_json(after, None, next_turn(items.clone())).await;
    assert_eq!(status, 200);
    let input = received(&mut gateway).await["input"].clone();
    assert_eq!(input[0]["call_id"], "call_1", "{input}");
    assert_eq!(input[1]["call_id"], "call_1");
    assert_eq!(input[1]["output"], "xxxxx");
    // A reference has no content to map from: refused, not left out.
    let (status, answer) = post_json(after, None, next_turn(vec![reference(&items[0])])).await;
    assert_eq!(
        (status, error_of(&answer).0.as_str()),
        (400, "hosted_item_unavailable")
    );
}

// ---------------------------------------------------------------------------------------------
// Mapping scope.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_the_path_and_any_content_type_is_mapped() {
    let mut gateway = Gateway::start(gateway_reply).await;
    let (proxy, _) = proxy(config(&gateway.url(), "")).await;
    let items = first_turn(proxy, None, json!({})).await;
    received(&mut gateway).await;
    let body = next_turn(vec![reference(&items[0])])
        .to_string()
        .into_bytes();
    for (path, content_type) in [
        ("/v1/responses/", "application/json"),
        ("/v1/Responses", "application/json"),
        ("/v1/responses;x", "application/json"),
        ("/v1/%72esponses", "application/json"),
        ("/v1/responses", "text/plain"),
        ("/v1/responses", "multipart/form-data; boundary=x"),
    ] {
        let (status, _) = post(proxy, path, None, content_type, body.clone()).await;
        assert_eq!(status, 200, "{path} {content_type}");
        let input = received(&mut gateway).await["input"].clone();
        assert_eq!(input[0]["type"], "function_call", "{path} {content_type}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_or_unreadable_bodies_holding_hosted_ids_are_refused() {
    let mut gateway = Gateway::start(gateway_reply).await;
    let (proxy, handle) = proxy(config(&gateway.url(), "")).await;
    let items = first_turn(proxy, None, json!({})).await;
    received(&mut gateway).await;
    let id = items[0]["id"].as_str().expect("id");
    let twice = format!(
        r#"{{"model":"m","input":[{{"type":"item_reference","id":"{id}"}}],"input":"hi"}}"#
    );
    let item = format!(r#"{{"input":[{{"type":"item_reference","id":"{id}","id":"msg_1"}}]}}"#);
    let lenient =
        format!("\u{feff}{{\"input\":[{{\"type\":\"item_reference\",\"id\":\"{id}\"}}]}}");
    for (body, code) in [
        (twice, "ambiguous_request_body"),
        (item, "ambiguous_request_body"),
        (lenient, "hosted_items_unmappable"),
    ] {
        let (status, answer) = post(
            proxy,
            "/v1/responses",
            None,
            "application/json",
            body.into(),
        )
        .await;
        assert_eq!((status, error_of(&answer).0.as_str()), (400, code));
    }
    assert!(gateway.requests_before_marker(proxy).await.is_empty());
    assert_eq!(refusals(&handle, HostedRefusal::Ambiguous), 2);
    // An id written with escapes in a body over the read limit is found all the same.
    let escaped = format!("\\u0074{}", &id[1..]);
    let filler = "x".repeat(5 << 20);
    let body = format!(
        r#"{{"model":"m","input":[{{"role":"user","content":"{filler}"}},{{"type":"item_reference","id":"{escaped}"}}]}}"#
    );
    let (status, answer) = post(
        proxy,
        "/v1/responses",
        None,
        "application/json",
        body.into(),
    )
    .await;
    assert_eq!(
        (status, error_of(&answer).0.as_str()),
        (400, "hosted_items_past_read_limit")
    );
}
