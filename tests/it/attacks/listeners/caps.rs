//! The proxy and MCP listeners at their connection cap: connections that hold a place without
//! asking anything (silent, a byte of the HTTP/2 preface, a head begun) make room for a client
//! with a request; only when every connection has a request in flight is a new one refused.

use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::{config, exchange, metric, start, status};
use crate::common::gateway::{Action, Gateway, Reply};

const CAP: usize = 8;

/// Held connections on `addr`: silent, `P`, or a head begun, in turn.
async fn hold(addr: std::net::SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for i in 0..n {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let first: &[u8] = match i % 3 {
            0 => b"",
            1 => b"P",
            _ => b"POST /v1/responses HTTP/1.1\r\nho",
        };
        stream.write_all(first).await.expect("write");
        held.push(stream);
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_ask_nothing_make_room_for_a_request_on_the_proxy_and_mcp_listeners() {
    let gw = Gateway::start(|_| Reply {
        head: "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2".into(),
        actions: vec![Action::Raw(b"{}".to_vec())],
    })
    .await;
    // The head timeout far away: what makes room is not the timeout.
    let mut config = config(&gw.url(), "head_timeout_ms = 60000", "");
    config.proxy.max_connections = CAP;
    config.mcp.as_mut().expect("an MCP front").max_connections = CAP;
    let l = start(config).await;
    let held_proxy = hold(l.proxy, 5 * CAP).await;
    let held_mcp = hold(l.mcp, 5 * CAP).await;
    let request = "POST /v1/responses HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
                   content-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
    let answer = exchange(l.proxy, request).await;
    assert_eq!(status(&answer), Some("200"), "{answer}");
    let rpc = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let mcp = format!(
        "POST /srv HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{rpc}",
        rpc.len()
    );
    let answer = exchange(l.mcp, &mcp).await;
    assert_eq!(status(&answer), Some("200"), "{answer}");
    for listener in ["proxy", "mcp"] {
        // 5 x CAP held and one request: all but CAP of them made room for a later one.
        let line = format!(
            "toolpulse_client_connections_closed_total{{listener=\"{listener}\",reason=\"evicted\"}} {}",
            4 * CAP + 1
        );
        metric(&l.metrics, &line).await;
    }
    drop((held_proxy, held_mcp));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_connection_has_a_request_in_flight_a_new_one_is_refused() {
    // One release per request, notified with a stored permit: a gateway task that reaches its
    // wait only after the release (a loaded machine) still answers.
    let releases: Arc<std::sync::Mutex<Vec<Arc<Notify>>>> = Arc::default();
    let held = releases.clone();
    let gw = Gateway::start(move |_| {
        let wait = Arc::new(Notify::new());
        held.lock().expect("releases").push(wait.clone());
        Reply {
            head: "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2".into(),
            actions: vec![Action::Wait(wait), Action::Raw(b"{}".to_vec())],
        }
    })
    .await;
    let mut config = config(&gw.url(), "", "");
    config.proxy.max_connections = 2;
    let l = start(config).await;
    let request = "POST /v1/responses HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
                   content-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
    let busy: Vec<_> = (0..2)
        .map(|_| tokio::spawn(exchange(l.proxy, request)))
        .collect();
    let mut gateway = gw;
    for _ in 0..2 {
        gateway
            .requests
            .recv()
            .await
            .expect("a request at the gateway");
    }
    let answer = exchange(l.proxy, request).await;
    assert_eq!(status(&answer), Some("503"), "{answer}");
    assert!(answer.contains("overloaded"), "{answer}");
    for release in releases.lock().expect("releases").iter() {
        release.notify_one();
    }
    for answer in busy {
        let answer = answer.await.expect("joined");
        assert_eq!(status(&answer), Some("200"), "{answer}");
    }
}
