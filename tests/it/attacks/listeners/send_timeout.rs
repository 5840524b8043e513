//! A client that stops reading its response: closed at the send timeout, its upstream
//! connection closed with it, and counted; over HTTP/1 and over HTTP/2 (a stream whose
//! flow-control window the client never opens again).

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::mpsc;

use super::{PATIENCE, config, metric, start};

/// A gateway that answers every request with a chunked body it writes as fast as it can, for
/// ever; it reports each connection it finds closed (its write failed).
async fn flooding_gateway() -> (SocketAddr, mpsc::UnboundedReceiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (closed_tx, closed) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(flood(stream, closed_tx.clone()));
        }
    });
    (addr, closed)
}

async fn flood(mut stream: TcpStream, closed: mpsc::UnboundedSender<()>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(n @ 1..) => head.extend_from_slice(&buf[..n]),
            _ => return,
        }
    }
    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\
transfer-encoding: chunked\r\n\r\n";
    let mut chunk = format!("{:x}\r\n", 64 * 1024).into_bytes();
    chunk.extend(std::iter::repeat_n(b'x', 64 * 1024));
    chunk.extend_from_slice(b"\r\n");
    if stream.write_all(answer).await.is_err() {
        return;
    }
    while stream.write_all(&chunk).await.is_ok() {}
    let _ = closed.send(());
}

fn with_send_timeout(gateway: SocketAddr) -> toolpulse::Config {
    let url = format!("http://{gateway}");
    config(&url, "send_timeout_ms = 300\nidle_timeout_ms = 60000", "")
}

/// The metric line of connections closed for the send timeout on the proxy listener.
const COUNTED: &str =
    "toolpulse_client_connections_closed_total{listener=\"proxy\",reason=\"send_timeout\"} 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_client_that_stops_reading_is_closed_at_the_send_timeout() {
    let (gateway, mut closed) = flooding_gateway().await;
    let l = start(with_send_timeout(gateway)).await;
    // A small receive buffer: the client's side fills sooner.
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("rcvbuf");
    let mut client = socket.connect(l.proxy).await.expect("connect");
    let request = "GET /v1/files/f/content HTTP/1.1\r\nhost: x\r\n\r\n";
    client.write_all(request.as_bytes()).await.expect("write");
    // It reads nothing: the gateway's connection is closed once the send timeout passed.
    let gone = tokio::time::timeout(PATIENCE, closed.recv()).await;
    assert!(matches!(gone, Ok(Some(()))), "the upstream was released");
    metric(&l.metrics, COUNTED).await;
    // And the client's own connection is gone (reset: it was not reading).
    let mut buf = vec![0u8; 64 * 1024];
    let end = async { while let Ok(1..) = client.read(&mut buf).await {} };
    tokio::time::timeout(PATIENCE, end)
        .await
        .expect("the client's connection closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_stream_whose_window_stays_shut_closes_at_the_send_timeout() {
    let (gateway, mut closed) = flooding_gateway().await;
    let l = start(with_send_timeout(gateway)).await;
    let stream = TcpStream::connect(l.proxy).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(1024)
        .initial_connection_window_size(64 * 1024)
        .handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
        .await
        .expect("h2 handshake");
    let (ended_tx, mut ended) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let _ = connection.await;
        let _ = ended_tx.send(());
    });
    let request = http::Request::get(format!("http://{}/v1/files/f/content", l.proxy))
        .body(Empty::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("a response head");
    assert_eq!(response.status(), 200);
    // Its body is never read, so the stream's window is never opened again.
    let gone = tokio::time::timeout(PATIENCE, closed.recv()).await;
    assert!(matches!(gone, Ok(Some(()))), "the upstream was released");
    metric(&l.metrics, COUNTED).await;
    let end = tokio::time::timeout(PATIENCE, ended.recv()).await;
    assert!(
        matches!(end, Ok(Some(()))),
        "the client's connection closed"
    );
    drop(response);
}
