//! toolpulse's own HTTP/1.1 server for clients, end to end on real sockets, byte for byte as a
//! client sees it: keep-alive and pipelining, `Expect: 100-continue`, chunked request bodies,
//! HTTP/1.0 clients, the head timeout between requests, and refused heads.

use crate::common;

use std::time::{Duration, Instant};

use common::gateway::{Gateway, Recorded, Reply};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolpulse::config::Config;

const PATIENCE: Duration = Duration::from_secs(60);

fn events(_: &Recorded) -> Reply {
    Reply::sse(vec![b"data: one\n\n".to_vec(), b"data: two\n\n".to_vec()])
}

/// Reads until what was read contains `needle`; returns all of it.
async fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    let mut seen = Vec::new();
    let read = async {
        while !String::from_utf8_lossy(&seen).contains(needle) {
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).await.expect("read");
            assert!(
                n > 0,
                "closed before {needle:?}: {}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(PATIENCE, read).await.expect("in time");
    String::from_utf8_lossy(&seen).into_owned()
}

/// Reads until the proxy closes; returns all of it and how long that took.
async fn until_closed(stream: &mut TcpStream) -> (String, Duration) {
    let start = Instant::now();
    let mut seen = Vec::new();
    let read = stream.read_to_end(&mut seen);
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("closed in time")
        .expect("read");
    (String::from_utf8_lossy(&seen).into_owned(), start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order_on_one_kept_connection() {
    let mut gw = Gateway::start(events).await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    stream
        .write_all(
            b"GET /v1/first HTTP/1.1\r\nhost: x\r\n\r\nGET /v1/second HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        .await
        .expect("write");
    let (answer, _) = until_closed(&mut stream).await;
    assert_eq!(answer.matches("HTTP/1.1 200 OK\r\n").count(), 2, "{answer}");
    assert_eq!(
        answer.matches("transfer-encoding: chunked\r\n").count(),
        2,
        "{answer}"
    );
    let chunk = "b\r\ndata: one\n\n\r\n";
    assert_eq!(answer.matches(chunk).count(), 2, "{answer}");
    assert_eq!(answer.matches("\r\n0\r\n\r\n").count(), 2, "{answer}");
    assert!(answer.ends_with("\r\n0\r\n\r\n"), "{answer}");
    let (first, second) = answer.split_at(answer.rfind("HTTP/1.1 200").expect("two"));
    assert!(
        !first.contains("connection: close"),
        "the first kept: {first}"
    );
    assert!(second.contains("connection: close\r\n"), "{second}");
    let targets = [gw.requests.recv().await, gw.requests.recv().await];
    let targets: Vec<_> = targets
        .into_iter()
        .map(|r| r.expect("seen").target)
        .collect();
    assert_eq!(targets, ["/v1/first", "/v1/second"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_expects_100_continue_gets_it_before_it_sends_its_body() {
    let mut gw = Gateway::start(events).await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    let head = "POST /v1/files HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\n\
                content-length: 5\r\nconnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await.expect("head");
    let interim = read_until(&mut stream, "\r\n\r\n").await;
    assert_eq!(interim, "HTTP/1.1 100 Continue\r\n\r\n");
    stream.write_all(b"hello").await.expect("body");
    let (answer, _) = until_closed(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    let seen = gw.requests.recv().await.expect("the request");
    assert_eq!(seen.body, b"hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_request_body_reaches_the_gateway_whole() {
    let mut gw = Gateway::start(events).await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    let request = "POST /v1/files HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\
                   connection: close\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nx-trailer: 1\r\n\r\n";
    // A byte at a time: the head and the chunks arrive in pieces.
    for byte in request.as_bytes() {
        stream.write_all(&[*byte]).await.expect("write");
    }
    let (answer, _) = until_closed(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    let seen = gw.requests.recv().await.expect("the request");
    assert_eq!(seen.body, b"abcde");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http10_client_gets_the_stream_unframed_up_to_the_close() {
    let gw = Gateway::start(events).await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    stream
        .write_all(b"GET /v1/stream HTTP/1.0\r\nhost: x\r\n\r\n")
        .await
        .expect("write");
    let (answer, _) = until_closed(&mut stream).await;
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert_eq!(body, "data: one\n\ndata: two\n\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_connection_without_a_next_request_closes_at_the_head_timeout() {
    let gw = Gateway::start(events).await;
    let mut config = Config::default();
    config.clients.head_timeout = Duration::from_millis(300);
    let proxy = start_proxy(config, &gw.url()).await;
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    stream
        .write_all(b"GET /v1/stream HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .expect("write");
    read_until(&mut stream, "\r\n0\r\n\r\n").await;
    let (rest, after) = until_closed(&mut stream).await;
    assert_eq!(rest, "", "closed without a word");
    assert!(after >= Duration::from_millis(250), "{after:?}");
    assert!(
        after < Duration::from_secs(5),
        "at the head timeout, not the idle one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_heads_are_answered_and_closed_and_never_forwarded() {
    let mut gw = Gateway::start(events).await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    for (request, status) in [
        (
            "GET / HTTP/1.1\r\nhost: x\r\nno colon here\r\n\r\n",
            "400 Bad Request",
        ),
        (
            "GET / HTTP/1.1\r\nhost: x\r\nfolded: a\r\n b\r\n\r\n",
            "400 Bad Request",
        ),
        (
            "POST / HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked, gzip\r\n\r\n",
            "400 Bad Request",
        ),
    ] {
        let mut stream = TcpStream::connect(proxy).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let (answer, _) = until_closed(&mut stream).await;
        let expected = format!("HTTP/1.1 {status}\r\n");
        assert!(answer.starts_with(&expected), "{request:?}: {answer}");
        assert!(answer.contains("connection: close\r\n"), "{answer}");
    }
    let long = format!("GET /{} HTTP/1.1\r\nhost: x\r\n\r\n", "a".repeat(70_000));
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    // The proxy may close before it read all of it.
    let _ = stream.write_all(long.as_bytes()).await;
    let (answer, _) = until_closed(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    let more = gw.requests_before_marker(proxy).await;
    assert!(more.is_empty(), "none forwarded: {more:?}");
}

/// A request refused before its body was read: when the whole body is already in, it is
/// skipped and the connection carries the next request; when it is not, the answer says
/// `connection: close`, so no client sends its next request into the close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_before_the_body_is_read_keeps_the_connection_only_when_it_can() {
    let gw = Gateway::start(events).await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let refused = "POST /v1/responses HTTP/1.1\r\nhost: x\r\nx-toolpulse-profiles: robot\r\n\
                   content-length: 11\r\n\r\n";

    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    stream
        .write_all(format!("{refused}{{\"a\":\"b\"}}  ").as_bytes())
        .await
        .expect("write");
    let answer = read_until(&mut stream, "invalid_profiles").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(!answer.contains("connection: close"), "{answer}");
    stream
        .write_all(b"GET /v1/next HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .expect("next");
    let (answer, _) = until_closed(&mut stream).await;
    assert!(answer.contains("HTTP/1.1 200 OK\r\n"), "{answer}");

    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    stream.write_all(refused.as_bytes()).await.expect("head");
    let answer = read_until(&mut stream, "invalid_profiles").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("connection: close\r\n"), "{answer}");
}
