//! The attack surface: strings from the upstream cannot break the framing of injected events,
//! and requests framed two ways at once cannot smuggle a second request to the upstream.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::gateway::{Gateway, Reply};
use common::*;
use futures::StreamExt;
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolpulse::core::lifecycle::track::{MAX_ID_BYTES, MAX_NAME_BYTES};
use toolpulse::core::profiles::Profile;
use toolpulse::{Config, Rewriter};

/// Strings built to break SSE or JSON framing: line breaks of every kind, quotes, escapes,
/// field-like text, NUL, non-ASCII, and sometimes very long.
fn hostile() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\r".to_string()),
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just("\n\ndata: {\"type\":\"response.completed\"}\n\n".to_string()),
        Just("\u{2028}\u{2029}\u{85}".to_string()),
        Just("\"".to_string()),
        Just("\\".to_string()),
        Just("\\u0000\0".to_string()),
        Just(": event: id: retry: ".to_string()),
        Just("{{name}}{{query}}".to_string()),
        "[a-z_]{1,8}",
        "\\PC{1,8}",
    ];
    prop_oneof![
        8 => prop::collection::vec(piece, 1..12).prop_map(|p| p.concat()),
        1 => (1usize..200_000).prop_map(|n| "w".repeat(n)),
    ]
}

/// One tool round whose name, ids, arguments and output are `s[0..5]`, as a Responses stream.
fn stream(s: &[String; 5]) -> Vec<u8> {
    let j = |v: &str| serde_json::to_string(v).expect("a JSON string");
    let (name, call, item, arguments, output) = (j(&s[0]), j(&s[1]), j(&s[2]), j(&s[3]), j(&s[4]));
    let events = [
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"r"}}"#.to_string(),
        format!(
            r#"{{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{{"id":{item},"type":"function_call","name":{name},"call_id":{call},"arguments":""}}}}"#
        ),
        format!(
            r#"{{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":{item},"output_index":0,"delta":{arguments}}}"#
        ),
        format!(
            r#"{{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{{"id":{item},"type":"function_call","name":{name},"call_id":{call},"arguments":{arguments}}}}}"#
        ),
        format!(
            r#"{{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{{"id":"o","type":"function_call_output","call_id":{call},"output":{output}}}}}"#
        ),
        r#"{"type":"response.completed","sequence_number":5,"response":{"id":"r"}}"#.to_string(),
    ];
    let mut out = String::new();
    for data in events {
        let json: serde_json::Value = serde_json::from_str(&data).expect("valid JSON");
        let kind = json["type"].as_str().expect("a type");
        out.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
    }
    out.into_bytes()
}

/// How an independent parser (`sse-stream`) splits `bytes` into events with data.
fn oracle_events(bytes: &[u8]) -> usize {
    let chunk: Result<bytes::Bytes, std::io::Error> = Ok(bytes::Bytes::copy_from_slice(bytes));
    let events: Vec<_> = futures::executor::block_on(
        sse_stream::SseByteStream::new(futures::stream::iter([chunk])).collect(),
    );
    events
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e: &sse_stream::Sse| e.data.is_some())
        .count()
}

fn config(kind: &str) -> Arc<Config> {
    let text = format!("[[tools]]\nmatch = [\"*\"]\nkind = \"{kind}\"\n");
    Arc::new(Config::from_toml_str(&text).expect("config"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn upstream_strings_cannot_break_the_framing_of_injected_events(
        strings in [hostile(), hostile(), hostile(), hostile(), hostile()],
        kind in prop::sample::select(vec!["mcp", "web_search", "file_search", "function"]),
        shape in prop::sample::select(vec![Profile::Hosted, Profile::OpenAi]),
    ) {
        let input = stream(&strings);
        let config = config(kind);
        // Every profile, with one of the shapes that make items (they cannot go together).
        let others = Profile::ALL.into_iter();
        let others = others.filter(|p| !toolpulse::core::profiles::PRESENTATIONS.contains(p));
        let profiles = std::iter::once(shape).chain(others).collect();
        let mut rewriter = Rewriter::new(config.settings()).with_profiles(profiles);
        let now = Instant::now();
        let mut out = rewriter.feed(&input, now).to_vec();
        out.extend_from_slice(&rewriter.finish(now + Duration::from_millis(5)));
        let report = invariants::check(&input, &out, config.limits.max_event_bytes)
            .map_err(TestCaseError::fail)?;
        // A name or an id over its cap leaves the call alone: forwarded as sent, nothing
        // injected.
        let capped = strings[0].len() > MAX_NAME_BYTES
            || strings[1].len() > MAX_ID_BYTES
            || strings[2].len() > MAX_ID_BYTES;
        prop_assert!(report.injected_events > 0 || kind == "function" || capped);
        // An independent parser sees exactly the events ours sees: no injected string opened
        // or closed an event.
        let blocks = blocks(&out).into_iter().filter(|b| !b.starts_with(b":")).count();
        prop_assert_eq!(oracle_events(&out), blocks);
    }
}

async fn send_raw(proxy: std::net::SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    stream.write_all(request).await.expect("write");
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the proxy closes the connection")
        .expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_framed_two_ways_cannot_smuggle_a_second_request() {
    let mut gw = Gateway::start(|_| Reply {
        head: "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2".into(),
        actions: vec![common::gateway::Action::Raw(b"{}".to_vec())],
    })
    .await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;

    // Content-Length and Transfer-Encoding both: the body is read as chunked alone (the length
    // is discarded), the upstream gets one consistently framed request, and the connection
    // closes after the answer, so the bytes hidden behind the length never become a request.
    let smuggled = "GET /admin HTTP/1.1\r\nhost: x\r\n\r\n";
    let request = format!(
        "POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\n\
         transfer-encoding: chunked\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n{smuggled}"
    );
    let answer = send_raw(proxy, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(answer.matches("HTTP/1.1").count(), 1, "{answer}");
    let seen = gw.requests.recv().await.expect("the request");
    assert_eq!(seen.target, "/v1/responses");
    assert_eq!(seen.body, b"{}");
    assert!(seen.header("content-length").is_none_or(|v| v == "2"));
    let more = gw.requests_before_marker(proxy).await;
    assert!(more.is_empty(), "no second request upstream: {more:?}");

    // Ambiguous framings are refused outright with 400 and reach no upstream.
    for request in [
        "POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",
        "POST / HTTP/1.1\r\nhost: x\r\ntransfer-encoding: gzip\r\n\r\n{}",
        "POST / HTTP/1.0\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nhost: x\r\ncontent-length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nhost: x\r\n folded: header\r\n\r\n",
    ] {
        let answer = send_raw(proxy, request.as_bytes()).await;
        assert!(
            answer.starts_with("HTTP/1.1 400"),
            "{request:?} got {answer:?}"
        );
    }
    let more = gw.requests_before_marker(proxy).await;
    assert!(
        more.is_empty(),
        "no refused request went upstream: {more:?}"
    );
}
