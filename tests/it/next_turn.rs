//! Profile `hosted` across turns, through real sockets: the hosted items a client replays (full,
//! or as `item_reference`s) reach the gateway as its own `function_call` and
//! `function_call_output` again, exactly as it streamed them:
//!
//! - on the replica that streamed them (its memory);
//! - on another replica sharing a real `redis-server` through `[progress] bus`, sent the moment
//!   the first turn completed;
//! - after a restart with the same `[hosted] key` and no Redis: a full `mcp_call` maps from its
//!   own content, losing nothing the gateway needs;
//! - a body over the read limit holding a hosted id is refused with a 400, whether the id is in
//!   the part read first or past it, and the gateway gets nothing whole.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::gateway::{Gateway, Recorded, Reply};
use common::redis_server::RedisServer;
use common::{http_client, read_all, serve_proxy};
use http_body_util::Full;
use serde_json::{Value, json};
use toolpulse::Config;
use toolpulse::config::BusConfig;
use toolpulse::features::progress::bus::BusHub;
use toolpulse::proxy::Proxy;

const WAIT: Duration = Duration::from_secs(60);
const KEY: &str = "a deployment key of some length";

const CALL_ITEM: &str = r#"{"id":"fc_1","type":"function_call","status":"completed","name":"srv_lookup","call_id":"call_1","arguments":"{\"user\":\"ada\"}"}"#;
const OUTPUT_ITEM: &str = r#"{"id":"fco_1","type":"function_call_output","call_id":"call_1","output":"{\"name\": \"Ada\",  \"id\": 7}","status":"completed"}"#;

/// The first turn: one MCP call, its output, a message. Later turns: just a message.
fn gateway_reply(request: &Recorded) -> Reply {
    reply(request, "r")
}

/// [`gateway_reply`] from a gateway that names the response `final_id` at its end, where
/// `response.created` named it `r` (LiteLLM does); the request's `user`, if any, comes first
/// in both.
fn reply(request: &Recorded, final_id: &str) -> Reply {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
    let user = body["user"].as_str().unwrap_or_default();
    let ev = |json: String| format!("data: {json}\n\n").into_bytes();
    let first_turn = body["input"].as_str().is_some();
    let mut events = vec![format!(
        r#"{{"type":"response.created","sequence_number":0,"response":{{"id":"{user}r","output":[]}}}}"#
    )];
    let mut n = 1;
    let mut listed = Vec::new();
    if first_turn {
        let call_added = CALL_ITEM
            .replace("\"completed\"", "\"in_progress\"")
            .replace(r#""arguments":"{\"user\":\"ada\"}""#, r#""arguments":"""#);
        for (kind, index, item) in [
            ("added", 0, call_added.as_str()),
            ("done", 0, CALL_ITEM),
            ("added", 1, OUTPUT_ITEM),
            ("done", 1, OUTPUT_ITEM),
        ] {
            events.push(format!(
                r#"{{"type":"response.output_item.{kind}","sequence_number":{n},"output_index":{index},"item":{item}}}"#
            ));
            n += 1;
        }
        listed = vec![CALL_ITEM, OUTPUT_ITEM];
    }
    let message = r#"{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Done."}]}"#;
    let index = listed.len();
    events.push(format!(
        r#"{{"type":"response.output_item.done","sequence_number":{n},"output_index":{index},"item":{message}}}"#
    ));
    listed.push(message);
    events.push(format!(
        r#"{{"type":"response.completed","sequence_number":{},"response":{{"id":"{user}{final_id}","output":[{}]}}}}"#,
        n + 1,
        listed.join(",")
    ));
    Reply::sse(events.into_iter().map(ev).collect())
}

fn config(upstream: &str) -> Config {
    let text = format!(
        "[[tools]]\nmatch = [\"srv_*\"]\nkind = \"mcp\"\nserver_label = \"srv\"\n\n\
         [hosted]\nkey = \"{KEY}\"\n"
    );
    let mut config = Config::from_toml_str(&text).expect("config");
    config.proxy.upstream = Some(upstream.parse().expect("upstream URL"));
    config
}

/// A replica in front of `upstream`, keeping pairs in `redis` when given one.
async fn replica(upstream: &str, redis: Option<(&RedisServer, &str)>) -> std::net::SocketAddr {
    let config = config(upstream);
    let mut proxy = Proxy::new(Arc::new(config.clone())).expect("proxy");
    if let Some((redis, prefix)) = redis {
        let bus = BusConfig {
            url: toolpulse::config::RedisUrl::parse(&redis.url()).expect("url"),
            prefix: prefix.to_string(),
        };
        let hub =
            BusHub::start(&bus, Duration::from_secs(1), proxy.metrics().clone()).expect("bus");
        let deadline = Instant::now() + WAIT;
        while !hub.is_up() {
            assert!(Instant::now() < deadline, "the bus never came up");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        proxy = proxy.with_shared_pairs(hub.link());
    }
    serve_proxy(Arc::new(proxy)).await
}

async fn post_json(proxy: std::net::SocketAddr, body: Vec<u8>) -> (u16, Vec<u8>) {
    let request = http::Request::post(format!("http://{proxy}/v1/responses"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("request");
    let response = http_client().request(request).await.expect("response");
    let status = response.status().as_u16();
    (status, read_all(&mut response.into_body()).await)
}

/// Turn 1 through `proxy`: the hosted item as `response.completed` lists it.
async fn first_turn(proxy: std::net::SocketAddr) -> Value {
    let body = json!({"model": "m", "stream": true, "input": "who is user ada?"});
    let (status, stream) = post_json(proxy, body.to_string().into_bytes()).await;
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&stream);
    assert!(!text.contains("function_call"), "nothing to run: {text}");
    let completed = text
        .split("\n\n")
        .find(|e| e.contains("\"response.completed\""))
        .expect("completed");
    let data: Value = serde_json::from_str(completed.trim_start_matches("data: ")).expect("json");
    let item = data["response"]["output"][0].clone();
    assert_eq!(item["type"], "mcp_call", "{item}");
    assert_eq!(item["output"], "{\"name\": \"Ada\",  \"id\": 7}");
    item
}

/// The next turn's body, as clients replay output: the full item, or a reference to it.
fn second_turn(item: &Value, reference: bool) -> Vec<u8> {
    let replayed = if reference {
        json!({"type": "item_reference", "id": item["id"]})
    } else {
        item.clone()
    };
    let input = json!([
        {"role": "user", "content": "who is user ada?"},
        replayed,
        {"role": "user", "content": "and her id?"},
    ]);
    json!({"model": "m", "stream": true, "input": input})
        .to_string()
        .into_bytes()
}

/// The `input` the gateway got, as JSON texts of its items.
async fn received_input(gateway: &mut Gateway) -> Vec<Value> {
    let body = received_body(gateway).await;
    body["input"].as_array().cloned().unwrap_or_default()
}

/// The body of the next request the gateway got.
async fn received_body(gateway: &mut Gateway) -> Value {
    let request = tokio::time::timeout(WAIT, gateway.requests.recv())
        .await
        .expect("a request in time")
        .expect("recorded");
    serde_json::from_slice(&request.body).expect("JSON body")
}

fn the_gateways_pair() -> Vec<Value> {
    [CALL_ITEM, OUTPUT_ITEM]
        .iter()
        .map(|t| serde_json::from_str(t).expect("json"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_replica_maps_full_items_and_references_to_the_exact_pair() {
    let mut gateway = Gateway::start(gateway_reply).await;
    let proxy = replica(&gateway.url(), None).await;
    let item = first_turn(proxy).await;
    received_input(&mut gateway).await;
    for reference in [false, true] {
        let (status, _) = post_json(proxy, second_turn(&item, reference)).await;
        assert_eq!(status, 200);
        let input = received_input(&mut gateway).await;
        assert_eq!(input.len(), 4, "{input:?}");
        assert_eq!(
            input[1..3],
            the_gateways_pair()[..],
            "reference: {reference}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_replica_maps_them_through_redis_at_once() {
    let Some(redis) = RedisServer::start("another_replica_maps_them_through_redis_at_once") else {
        return;
    };
    let mut gateway = Gateway::start(gateway_reply).await;
    let a = replica(&gateway.url(), Some((&redis, "tp-next"))).await;
    let b = replica(&gateway.url(), Some((&redis, "tp-next"))).await;
    for reference in [true, false] {
        // Sent to the other replica the moment the first turn completed.
        let item = first_turn(a).await;
        received_input(&mut gateway).await;
        let (status, _) = post_json(b, second_turn(&item, reference)).await;
        assert_eq!(status, 200);
        let input = received_input(&mut gateway).await;
        assert_eq!(
            input[1..3],
            the_gateways_pair()[..],
            "reference: {reference}"
        );
    }
    let keys = redis.keys("tp-next");
    assert!(
        keys.iter()
            .any(|(k, ttl)| k.starts_with("tp-next:hosted:tph_") && *ttl > 0),
        "pairs kept with a TTL: {keys:?}"
    );
}

/// The response id the client saw throughout (`response.created`'s; the gateway's terminal
/// event named another, which toolpulse mended) goes back to the gateway as its own, from this
/// replica's memory or, on another replica that mended one too, from Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mended_response_id_maps_back_to_the_gateways_own() {
    let redis = RedisServer::start("a_mended_response_id_maps_back_to_the_gateways_own");
    let mut gateway = Gateway::start(|request| reply(request, "r_final")).await;
    let shared = redis.as_ref().map(|r| (r, "tp-ids"));
    let (a, b) = (
        replica(&gateway.url(), shared).await,
        replica(&gateway.url(), shared).await,
    );
    let completed_id = |stream: &[u8]| {
        let text = String::from_utf8_lossy(stream).into_owned();
        let completed = text
            .split("\n\n")
            .find(|e| e.contains("\"response.completed\""));
        let data = completed.expect("completed").trim_start_matches("data: ");
        serde_json::from_str::<Value>(data).expect("json")["response"]["id"].clone()
    };
    let turn = |user: &str, previous: Option<&str>| {
        let mut body = json!({"model": "m", "stream": true, "input": "who?", "user": user});
        if let Some(previous) = previous {
            body["previous_response_id"] = previous.into();
        }
        body.to_string().into_bytes()
    };
    for (proxy, user) in [(b, "b1_"), (a, "a1_")] {
        let (status, stream) = post_json(proxy, turn(user, None)).await;
        assert_eq!(
            (status, completed_id(&stream)),
            (200, json!(format!("{user}r")))
        );
        received_input(&mut gateway).await;
    }
    // `b` mended an id of its own, so it asks Redis for `a`'s.
    let mut next_turns = vec![(a, "this replica's memory")];
    if let Some(redis) = &redis {
        // Unlike a hosted id's, a response id's lookup does not wait for a write in flight
        // (docs/stream-rules.md): this test does.
        let deadline = Instant::now() + WAIT;
        while !redis
            .keys("tp-ids")
            .iter()
            .any(|(k, _)| k.ends_with(":a1_r"))
        {
            assert!(Instant::now() < deadline, "never written to Redis");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        next_turns.push((b, "Redis"));
    }
    for (proxy, from) in next_turns {
        let (status, _) = post_json(proxy, turn("", Some("a1_r"))).await;
        assert_eq!(status, 200);
        let body = received_body(&mut gateway).await;
        assert_eq!(body["previous_response_id"], "a1_r_final", "from {from}");
    }
    // An id no response had is left as it is.
    let (status, _) = post_json(a, turn("", Some("r_other"))).await;
    assert_eq!(status, 200);
    let body = received_body(&mut gateway).await;
    assert_eq!(body["previous_response_id"], "r_other");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_a_full_mcp_item_maps_from_its_content() {
    let mut gateway = Gateway::start(gateway_reply).await;
    let item = first_turn(replica(&gateway.url(), None).await).await;
    received_input(&mut gateway).await;
    // A new process: the same key, an empty store.
    let restarted = replica(&gateway.url(), None).await;
    let (status, _) = post_json(restarted, second_turn(&item, false)).await;
    assert_eq!(status, 200);
    let input = received_input(&mut gateway).await;
    let strip = |mut item: Value| {
        let object = item.as_object_mut().expect("object");
        object.remove("id");
        object.remove("status");
        item
    };
    let want: Vec<Value> = the_gateways_pair().into_iter().map(strip).collect();
    let got: Vec<Value> = input[1..3].iter().cloned().map(strip).collect();
    assert_eq!(got, want, "call id, name, arguments and output exactly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_read_limit_holding_a_hosted_item_is_refused() {
    let mut gateway = Gateway::start(gateway_reply).await;
    let proxy = replica(&gateway.url(), None).await;
    let item = first_turn(proxy).await;
    received_input(&mut gateway).await;
    let filler = json!({"role": "user", "content": "x".repeat(5 << 20)});
    for item_first in [true, false] {
        let mut input = vec![filler.clone()];
        let at = if item_first { 0 } else { 1 };
        input.insert(at, item.clone());
        let body = json!({"model": "m", "stream": true, "input": input});
        let (status, answer) = post_json(proxy, body.to_string().into_bytes()).await;
        assert_eq!(status, 400, "item first: {item_first}");
        let answer: Value = serde_json::from_slice(&answer).expect("an OpenAI-style error");
        assert_eq!(answer["error"]["code"], "hosted_items_past_read_limit");
    }
    // A large body without hosted items still goes through, unchanged.
    let body = json!({"model": "m", "stream": true, "input": [filler]}).to_string();
    let (status, _) = post_json(proxy, body.clone().into_bytes()).await;
    assert_eq!(status, 200);
    let request = tokio::time::timeout(WAIT, gateway.requests.recv())
        .await
        .expect("in time")
        .expect("recorded");
    assert_eq!(
        request.body,
        body.as_bytes(),
        "no body with a hosted id came whole"
    );
}

/// The companions of every kind the `openai` profile emits (`mcp_call`,
/// `web_search_call`, `file_search_call`, as `to_input_list()` replays them), and references
/// to them, never reach the gateway; the client's own items of those types do, unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_companions_of_every_kind_are_removed_before_the_gateway() {
    let mut gateway = Gateway::start(gateway_reply).await;
    let proxy = replica(&gateway.url(), None).await;
    let user = json!({"role": "user", "content": "and now?"});
    let theirs =
        json!({"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"]});
    let input = json!([
        {"type": "mcp_call", "id": "tp_call_1", "status": "completed", "server_label": "srv", "name": "lookup", "arguments": "{}", "output": "x"},
        {"type": "web_search_call", "id": "tp_call_2", "status": "completed", "action": {"type": "search", "query": "q"}},
        {"type": "file_search_call", "id": "tp_call_3", "status": "completed", "queries": ["q"]},
        {"type": "item_reference", "id": "tp_call_3"},
        theirs,
        user,
    ]);
    let body = json!({"model": "m", "stream": true, "input": input});
    let (status, _) = post_json(proxy, body.to_string().into_bytes()).await;
    assert_eq!(status, 200);
    let got = received_input(&mut gateway).await;
    assert_eq!(got, [theirs, user], "only the client's own items");
}
