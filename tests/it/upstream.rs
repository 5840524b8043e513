//! The proxy's own upstream client: a stream is one task (the upstream connection is driven by
//! the response body), finished connections are reused, and a connection the upstream closed
//! while it waited is never used for a request.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::gateway::{Action, Gateway, Reply, held_reply};
use common::*;
use tokio::sync::Notify;
use toolpulse::config::Config;
use toolpulse::{net::server, proxy::Proxy};

const REQUEST: &str = r#"{"model":"m","input":"hi","stream":true}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_streams_leave_their_connection_for_the_next() {
    let input = read(&fixtures_dir().join("web_search.sse"));
    let chunks = blocks(&input);
    let gw = Gateway::start(move |_| Reply::sse(chunks.clone())).await;
    let (proxy_addr, proxy) = start_proxy_with_handle(Config::default(), &gw.url()).await;
    let client = http_client();
    for _ in 0..5 {
        let response = post(
            &client,
            format!("http://{proxy_addr}/v1/responses"),
            REQUEST,
        )
        .await;
        assert_eq!(response.status(), 200);
        let out = read_all(&mut response.into_body()).await;
        invariants::check(&input, &out, usize::MAX).expect("invariants");
    }
    assert_eq!(
        gw.accepted.load(Ordering::Relaxed),
        1,
        "one connection, reused"
    );
    assert_eq!(proxy.upstream().idle_connections(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_upstream_closed_is_not_used_again() {
    // Each reply ends its body properly, as if to keep the connection, then shuts its side
    // (FIN) and goes on reading: the proxy pools the connection and must find it closed. A
    // request written on it anyway (reuse, then a retry elsewhere) is seen there, so no reuse
    // is told apart from reuse-then-retry: every request on a connection of its own.
    let mut gw = Gateway::start(|_| Reply {
        head: Reply::sse(vec![]).head,
        actions: vec![
            Action::Chunk(b"data: {\"type\":\"response.created\"}\n\n".to_vec()),
            Action::Raw(b"0\r\n\r\n".to_vec()),
            Action::HalfClose,
        ],
    })
    .await;
    let (proxy_addr, _proxy) = start_proxy_with_handle(Config::default(), &gw.url()).await;
    let client = http_client();
    const REQUESTS: usize = 20;
    for i in 0..REQUESTS {
        let response = post(
            &client,
            format!("http://{proxy_addr}/v1/responses"),
            REQUEST,
        )
        .await;
        assert_eq!(response.status(), 200, "request {i}");
        let out = read_all(&mut response.into_body()).await;
        assert!(String::from_utf8_lossy(&out).contains("response.created"));
        if i % 2 == 0 {
            // Half of the time the FIN has long arrived when the next request comes (the
            // assertions below hold either way: this varies the case, it syncs nothing).
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Each request was recorded before its answer: all are in. A request may have been
    // written on a pooled connection whose FIN the proxy had not yet seen (a loaded machine
    // can delay the gateway's FIN, or the proxy's wake-up on it, past the next request): the
    // gateway recorded it there, got no answer to it out, and the proxy sent it again on a
    // fresh connection. How often that happens depends on the machine's speed; what does not:
    // every request was answered on a connection of its own, no connection answered twice, and
    // a request written on a closed connection was sent again, never lost (all 200 above).
    let mut connections = Vec::new();
    while let Ok(request) = gw.requests.try_recv() {
        connections.push(request.connection);
    }
    assert!(connections.len() >= REQUESTS, "requests: {connections:?}");
    let mut answered = connections.clone();
    answered.dedup();
    assert_eq!(answered.len(), REQUESTS, "one answer each: {connections:?}");
    let mut distinct = answered.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        REQUESTS,
        "never back to an old one: {connections:?}"
    );
    // A connection carries at most the request it answered and one written after its close.
    for connection in &distinct {
        let on_it = connections.iter().filter(|c| *c == connection).count();
        assert!(
            on_it <= 2,
            "{connection:?}: {on_it} requests: {connections:?}"
        );
    }
    assert_eq!(gw.accepted.load(Ordering::Relaxed), REQUESTS as u64);
}

/// Streams held open at a tool call, counted as tasks of the proxy's own runtime: one each
/// (the client connection's), none for the upstream connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_stream_is_one_task() {
    const STREAMS: usize = 8;
    // One release per stream, notified with a stored permit: a gateway task that reaches its
    // wait only after the release (it wrote its chunks, then was not scheduled) still ends.
    let releases: Arc<std::sync::Mutex<Vec<Arc<Notify>>>> = Arc::default();
    let held = releases.clone();
    let gw = Gateway::start(move |request| {
        let release = Arc::new(Notify::new());
        held.lock().expect("releases").push(release.clone());
        held_reply("web_search.sse", release)(request)
    })
    .await;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mut config = Config::default();
    config.proxy.upstream = Some(gw.url().parse().expect("url"));
    let proxy = Arc::new(Proxy::new(Arc::new(config)).expect("proxy"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    listener.set_nonblocking(true).expect("nonblocking");
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
        server::serve(listener, proxy, std::future::pending()).await;
    });
    let idle_tasks = runtime.metrics().num_alive_tasks();

    let client = http_client();
    let mut bodies = Vec::new();
    for _ in 0..STREAMS {
        let response = post(&client, format!("http://{addr}/v1/responses"), REQUEST).await;
        assert_eq!(response.status(), 200);
        bodies.push(response.into_body());
    }
    // Every stream is at its tool call (its in_progress event is out) before counting.
    for body in &mut bodies {
        read_until(body, "web_search_call.in_progress").await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let tasks = loop {
        let tasks = runtime.metrics().num_alive_tasks() - idle_tasks;
        if tasks == STREAMS || Instant::now() > deadline {
            break tasks;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(tasks, STREAMS, "tasks of {STREAMS} open streams");
    // Every stream's request reached the gateway (its events came back): all releases exist.
    for release in releases.lock().expect("releases").iter() {
        release.notify_one();
    }
    for mut body in bodies {
        read_all(&mut body).await;
    }
    runtime.shutdown_background();
}
