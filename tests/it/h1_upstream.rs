//! toolpulse's own HTTP/1 reader of the gateway's responses, end to end on real sockets: how a
//! request body is framed, the heads and bodies it accepts and refuses (RFC 9112), and when a
//! connection is kept for the next request.

use crate::common;

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use common::gateway::{Action, Gateway, Reply};
use common::*;
use futures_util::stream::BoxStream;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use toolpulse::config::Config;

const REQUEST: &str = r#"{"model":"m","input":"hi","stream":true}"#;

type Chunks = StreamBody<BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// A request body of unknown length, sent as the test writes into the returned sender; it ends
/// when the sender is dropped.
fn streamed() -> (mpsc::UnboundedSender<Bytes>, Chunks) {
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    (tx, StreamBody::new(Box::pin(stream)))
}

fn streaming_client() -> Client<HttpConnector, Chunks> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// The JSON error toolpulse answers with, for a reply whose head is `head` (and `body`).
async fn error_for(head: &str, body: &[u8]) -> (u16, serde_json::Value) {
    let head = head.to_string();
    let body = body.to_vec();
    let gw = Gateway::start(move |_| Reply {
        head: head.clone(),
        actions: vec![Action::Raw(body.clone()), Action::Close],
    })
    .await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let response = post(
        &http_client(),
        format!("http://{proxy}/v1/responses"),
        REQUEST,
    )
    .await;
    let status = response.status().as_u16();
    (status, json_body(response).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_unknown_length_goes_chunked_and_whole() {
    let mut gw = Gateway::start(|_| Reply::sse(vec![b"data: {}\n\n".to_vec()])).await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let client = streaming_client();
    for round in 0..2 {
        let (tx, body) = streamed();
        // Not a `…/responses` POST: streamed through, never read whole.
        let request = http::Request::post(format!("http://{proxy}/v1/files"))
            .header("content-type", "application/octet-stream")
            .body(body)
            .expect("request");
        let pending = tokio::spawn(client.request(request));
        for piece in ["first ", "second ", "third"] {
            tx.send(Bytes::from_static(piece.as_bytes())).expect("send");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(tx);
        let response = pending.await.expect("task").expect("response");
        assert_eq!(response.status(), 200);
        read_all(&mut response.into_body()).await;
        let seen = gw.requests.recv().await.expect("a request");
        assert_eq!(
            seen.header("transfer-encoding"),
            Some("chunked"),
            "{seen:?}"
        );
        assert_eq!(seen.header("content-length"), None);
        assert_eq!(seen.body, b"first second third");
        assert_eq!(seen.connection, 1, "round {round}: the connection is kept");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informational_heads_before_the_answer_are_skipped() {
    let gw = Gateway::start(|_| Reply {
        head: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n\
               HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked"
            .into(),
        actions: vec![Action::Chunk(b"data: {}\n\n".to_vec()), Action::End],
    })
    .await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let response = post(
        &http_client(),
        format!("http://{proxy}/v1/responses"),
        REQUEST,
    )
    .await;
    assert_eq!(response.status(), 200);
    assert!(!response.headers().contains_key("link"));
    assert_eq!(read_all(&mut response.into_body()).await, b"data: {}\n\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_with_ambiguous_framing_are_refused() {
    for head in [
        "HTTP/1.1 200 OK\r\ncontent-length: 4\r\ntransfer-encoding: chunked",
        "HTTP/1.1 200 OK\r\ncontent-length: 4\r\ncontent-length: 5",
        "HTTP/1.1 200 OK\r\ncontent-length: +4",
        "HTTP/1.1 200 OK\r\nx-folded: a\r\n  b\r\ncontent-length: 4",
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket",
    ] {
        let (status, error) = error_for(head, b"0\r\n\r\n").await;
        assert_eq!(status, 502, "{head}: {error}");
        assert_eq!(error["error"]["code"], "upstream_error", "{head}: {error}");
    }
    // The same length twice is one length.
    let gw = Gateway::start(|_| Reply {
        head: "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\ncontent-length: 2".into(),
        actions: vec![Action::Raw(b"{}".to_vec()), Action::End],
    })
    .await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let response = post(&http_client(), format!("http://{proxy}/v1/models"), "").await;
    assert_eq!(response.status(), 200);
    assert_eq!(read_all(&mut response.into_body()).await, b"{}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_size_with_junk_breaks_the_body() {
    for bad in [
        &b"zz\r\nab\r\n"[..],
        b"fffffffffffffffff1\r\n",
        b"4\r\nabcdXY",
    ] {
        let gw = Gateway::start(move |_| Reply {
            head: "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ntransfer-encoding: chunked".into(),
            actions: vec![
                Action::Raw(b"2\r\nok\r\n".to_vec()),
                // The good chunk reaches the client first.
                Action::Sleep(Duration::from_millis(300)),
                Action::Raw(bad.to_vec()),
                Action::Sleep(Duration::from_secs(5)),
            ],
        })
        .await;
        let proxy = start_proxy(Config::default(), &gw.url()).await;
        let request = http::Request::get(format!("http://{proxy}/v1/files/x/content"))
            .body(http_body_util::Full::new(Bytes::new()))
            .expect("request");
        let response = http_client().request(request).await.expect("response");
        let mut body = response.into_body();
        let first = body.frame().await.expect("a frame").expect("data");
        assert_eq!(first.into_data().expect("data"), "ok");
        // The data before the break is forwarded (a chunk's data before its missing CRLF).
        let next = async {
            loop {
                match body.frame().await {
                    Some(Ok(frame)) if frame.is_data() => continue,
                    other => return other,
                }
            }
        };
        let next = tokio::time::timeout(Duration::from_secs(3), next).await;
        let broken = next.expect("broken off at once, not at the sleep's end");
        assert!(
            matches!(broken, Some(Err(_))),
            "{:?}: the client sees the body break, not end",
            String::from_utf8_lossy(bad)
        );
    }
}

/// A HEAD answer has no body, whatever its `Content-Length` says: it ends at its head (a reader
/// waiting for the 10 bytes would hang until the gateway's sleep ends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_request_reads_no_body() {
    let gw = Gateway::start(|_| Reply {
        head: "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 10".into(),
        actions: vec![Action::Sleep(Duration::from_secs(10))],
    })
    .await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let request = http::Request::head(format!("http://{proxy}/v1/models"))
        .body(http_body_util::Full::new(Bytes::new()))
        .expect("request");
    let response = tokio::time::timeout(Duration::from_secs(5), http_client().request(request))
        .await
        .expect("answered")
        .expect("response");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-length"], "10");
    let mut body = response.into_body();
    let read = tokio::time::timeout(Duration::from_secs(3), read_all(&mut body));
    assert!(read.await.expect("ends at once").is_empty());
}

/// An upstream may answer before it has read the whole request body: the answer goes to the
/// client while the body is still open, and the connection is not used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_before_the_whole_body_reaches_the_client() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (got, mut received) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        let mut accepted = 0;
        while let Ok((mut stream, _)) = listener.accept().await {
            accepted += 1;
            let got = got.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !String::from_utf8_lossy(&seen).contains("part one") {
                    let n = stream.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: 1\r\nx-connection: {accepted}\r\n\r\n!"
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                // Then whatever else comes, until the proxy closes the connection.
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    seen.extend_from_slice(&buf[..n]);
                }
                let _ = got.send(seen);
            });
        }
    });
    let proxy = start_proxy(Config::default(), &format!("http://{addr}")).await;
    let client = streaming_client();
    let mut connections = Vec::new();
    for _ in 0..2 {
        let (tx, body) = streamed();
        let request = http::Request::post(format!("http://{proxy}/v1/uploads"))
            .header("content-type", "application/octet-stream")
            .body(body)
            .expect("request");
        tx.send(Bytes::from_static(b"part one")).expect("send");
        let response = tokio::time::timeout(Duration::from_secs(5), client.request(request))
            .await
            .expect("answered before the body ended")
            .expect("response");
        connections.push(response.headers()["x-connection"].clone());
        let answer = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(answer, "!");
        drop(tx);
        let seen = tokio::time::timeout(Duration::from_secs(5), received.recv())
            .await
            .expect("the connection closed: not kept with a body half sent")
            .expect("seen");
        assert!(String::from_utf8_lossy(&seen).contains("part one"));
    }
    assert_ne!(connections[0], connections[1], "not reused");
}
