//! Edges: the MCP front's `traceparent` checked as the proxy listener checks it; a gateway's
//! repeated `Content-Length`; paths that would leave the upstream's prefix; a request's
//! `Content-Length` with leading zeros; `CONNECT` and `OPTIONS *`.

use super::{config, exchange, start, status};
use crate::common::gateway::{Action, Gateway, Reply};

fn json_reply(length_fields: &str) -> Reply {
    Reply {
        head: format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{length_fields}"),
        actions: vec![Action::Raw(b"{}".to_vec())],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_front_restarts_an_invalid_traceparent_and_continues_a_valid_one() {
    let mut gw = Gateway::start(|_| json_reply("content-length: 2")).await;
    let l = start(config(&gw.url(), "", "")).await;
    let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for (sent, continued) in [
        (valid, true),
        (
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
            false,
        ),
        (
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            false,
        ),
        (
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            false,
        ),
    ] {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let request = format!(
            "POST /srv HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
             content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
             content-length: {}\r\ntraceparent: {sent}\r\ntracestate: vendor=1\r\n\r\n{body}",
            body.len()
        );
        let answer = exchange(l.mcp, &request).await;
        assert_eq!(status(&answer), Some("200"), "{answer}");
        let seen = gw.requests.recv().await.expect("forwarded");
        let forwarded = seen.header("traceparent").expect("a traceparent");
        if continued {
            assert_eq!(forwarded, sent);
            continue;
        }
        assert_ne!(forwarded, sent, "restarted");
        let id = toolpulse::features::progress::TraceId::from_traceparent(forwarded);
        assert!(id.is_some(), "a valid new one: {forwarded}");
        assert_eq!(
            seen.header("tracestate"),
            None,
            "the state went with its parent"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateways_repeated_content_length_reaches_the_client_as_one() {
    for fields in [
        "content-length: 2, 2",
        "content-length: 2\r\ncontent-length: 2",
    ] {
        let gw = Gateway::start(move |_| json_reply(fields)).await;
        let l = start(config(&gw.url(), "", "")).await;
        let request = "GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
        let answer = exchange(l.proxy, request).await;
        assert_eq!(status(&answer), Some("200"), "{answer}");
        let lengths: Vec<&str> = answer
            .lines()
            .filter(|line| line.to_ascii_lowercase().starts_with("content-length:"))
            .collect();
        assert_eq!(lengths.len(), 1, "{answer}");
        assert_eq!(lengths[0].split(':').nth(1).map(str::trim), Some("2"));
        assert!(answer.ends_with("\r\n\r\n{}"), "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_path_leaves_the_upstreams_prefix() {
    let mut gw = Gateway::start(|_| json_reply("content-length: 2")).await;
    let l = start(config(&format!("{}/api", gw.url()), "", "")).await;
    for target in [
        "/../admin",
        "/v1/../../admin",
        "/%2e%2e/admin",
        "/v1/%2E./%2e%2e/admin",
        "/..%2fadmin",
        "/v1/..%5C..%5Cadmin",
    ] {
        let request = format!("GET {target} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        let answer = exchange(l.proxy, &request).await;
        assert_eq!(status(&answer), Some("400"), "{target}: {answer}");
        assert!(answer.contains("\"invalid_path\""), "{answer}");
    }
    let request = "GET /v1/../v1/./models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let answer = exchange(l.proxy, request).await;
    assert_eq!(status(&answer), Some("200"), "{answer}");
    // The first request the gateway saw: none of the refused ones reached it.
    let seen = gw.requests.recv().await.expect("forwarded");
    assert_eq!(seen.target, "/api/v1/models", "resolved, then joined");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_length_with_leading_zeros_goes_upstream_as_its_number() {
    let mut gw = Gateway::start(|_| json_reply("content-length: 2")).await;
    let l = start(config(&gw.url(), "", "")).await;
    let request = "POST /v1/files HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
                   content-type: application/octet-stream\r\ncontent-length: 0000005\r\n\r\nhello";
    let answer = exchange(l.proxy, request).await;
    assert_eq!(status(&answer), Some("200"), "{answer}");
    let seen = gw.requests.recv().await.expect("forwarded");
    assert_eq!(seen.header("content-length"), Some("5"));
    assert_eq!(seen.body, b"hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_is_refused_and_options_star_answered_with_a_path_prefix() {
    let mut gw = Gateway::start(|_| json_reply("content-length: 2")).await;
    let l = start(config(&format!("{}/api", gw.url()), "", "")).await;
    let connect = "CONNECT gw.example:443 HTTP/1.1\r\nhost: gw.example:443\r\n\r\n";
    let answer = exchange(l.proxy, connect).await;
    assert_eq!(status(&answer), Some("405"), "{answer}");
    assert!(answer.contains("\"method_not_allowed\""), "{answer}");
    let options = "OPTIONS * HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let answer = exchange(l.proxy, options).await;
    assert_eq!(status(&answer), Some("200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("allow: get"),
        "{answer}"
    );
    let marker = "GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    assert_eq!(status(&exchange(l.proxy, marker).await), Some("200"));
    let seen = gw.requests.recv().await.expect("forwarded");
    assert_eq!(seen.target, "/api/v1/models", "the first the gateway saw");
}
