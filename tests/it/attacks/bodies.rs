//! Request bodies: what a client can hold of the shared body budget, and whose error a broken
//! streamed body is. The attacking sockets all come from 127.0.0.1; the legitimate client that
//! must still be served comes from 127.0.0.2 (Linux routes all of 127/8 to the loopback), and
//! the gateway's MCP calls come to the MCP front. Each attacking body is sent alone and waited
//! for (the budget grows, or it is answered) before the next, so the test sees every body
//! charged, on a loaded machine as on an idle one.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use toolpulse::Config;
use toolpulse::features::mcp::{Front, server as mcp_server};
use toolpulse::features::progress::local::LocalHub;
use toolpulse::metrics::Metrics;
use toolpulse::net::budget::{BodyBudget, Listener};
use toolpulse::proxy::Proxy;

use crate::common::gateway::{Action, Gateway, Reply};

/// Far above anything the tests wait for: an event that has not come by then never will.
const PATIENCE: Duration = Duration::from_secs(60);
const MIB: usize = 1 << 20;
const ATTACKER: [u8; 4] = [127, 0, 0, 1];
const LEGITIMATE: [u8; 4] = [127, 0, 0, 2];

/// The default budget (64 MiB, the issue's figures are for it; one peer may hold 8 MiB and
/// 128 KiB of it); the body timeout long enough for the stalled bodies to hold their part
/// while the test looks.
fn config(gateway: &Gateway) -> Config {
    let text = format!(
        "[proxy]\nupstream = \"{url}\"\n\
         [clients]\nbody_timeout_ms = 30000\n\
         [[mcp.servers]]\nname = \"srv\"\nupstream = \"{url}/mcp\"\n",
        url = gateway.url()
    );
    Config::from_toml_str(&text).expect("valid config")
}

fn json_gateway() -> Reply {
    Reply {
        head: "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2".into(),
        actions: vec![Action::Raw(b"{}".to_vec())],
    }
}

struct Listeners {
    proxy: SocketAddr,
    mcp: SocketAddr,
    metrics: Arc<Metrics>,
    budget: BodyBudget,
}

async fn start(config: Config) -> Listeners {
    let config = Arc::new(config);
    let hub = LocalHub::new(config.progress.bind_window);
    let proxy = Proxy::new(config.clone())
        .expect("proxy")
        .with_progress(hub.clone());
    let front = Front::new(&config, hub, proxy.metrics().clone())
        .expect("front")
        .expect("configured")
        .with_body_budget(proxy.body_budget().clone());
    let (metrics, budget) = (proxy.metrics().clone(), proxy.body_budget().clone());
    let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let (p, m) = (bind().await.expect("bind"), bind().await.expect("bind"));
    let (proxy_addr, mcp) = (p.local_addr().expect("addr"), m.local_addr().expect("addr"));
    let front = Arc::new(front);
    tokio::spawn(mcp_server::serve(m, front, std::future::pending()));
    let proxy = Arc::new(proxy);
    tokio::spawn(toolpulse::net::server::serve(
        p,
        proxy,
        std::future::pending(),
    ));
    Listeners {
        proxy: proxy_addr,
        mcp,
        metrics,
        budget,
    }
}

/// A connection from `source` (a loopback address) to `to`.
async fn connect_from(source: [u8; 4], to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    let source = SocketAddr::new(IpAddr::from(source), 0);
    socket.bind(source).expect("bind the source address");
    socket.connect(to).await.expect("connect")
}

/// Sends `request` from `source` and reads the answer until the connection closes.
async fn exchange_from(source: [u8; 4], to: SocketAddr, request: &[u8]) -> String {
    let mut stream = connect_from(source, to).await;
    stream.write_all(request).await.expect("write");
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("answered in time")
        .expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Waits (bounded) until the metrics hold `line`.
async fn metric(metrics: &Metrics, line: &str) {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if metrics.encode().contains(line) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("no {line} in {}", metrics.encode());
}

/// Waits until `charged()` says the last body was charged or `answered()` that it was
/// refused: the attacking body it watches has been dealt with.
async fn dealt_with(charged: impl Fn() -> bool, mut answered: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !charged() && !answered() {
        assert!(
            Instant::now() < deadline,
            "a body neither charged nor answered"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Whether an attacking socket was answered (or closed); reads what came, never waits.
fn answered(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    match stream.try_read(&mut buf) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Ok(_) | Err(_) => true,
    }
}

/// The first bytes of a `POST /v1/responses` announcing `length` bytes of JSON.
fn announce(length: usize) -> String {
    format!(
        "POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {length}\r\n\r\n"
    )
}

/// What another peer and the gateway still get while the attack holds its bodies: answers.
async fn others_are_served(l: &Listeners) {
    let small = exchange_from(LEGITIMATE, l.proxy, &post("/v1/responses", "{}")).await;
    assert!(small.starts_with("HTTP/1.1 200"), "{small}");
    let large = format!("{{\"input\":\"{}\"}}", "x".repeat(MIB));
    let answer = exchange_from(LEGITIMATE, l.proxy, &post("/v1/responses", &large)).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "a large body too: {answer}"
    );
    // The gateway's tool calls, from the attacker's own address even (another listener).
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let answer = exchange_from(ATTACKER, l.mcp, &post("/srv", call)).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the MCP front: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_announce_megabytes_and_send_a_byte_hold_a_few_kib_and_starve_no_one() {
    let gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw)).await;
    // The issue's 272 sockets: 12 announce 4 MiB, 260 announce 64 KiB, each sends one byte.
    let mut attack = Vec::new();
    for length in [4 * MIB; 12].into_iter().chain([64 << 10; 260]) {
        let mut stream = connect_from(ATTACKER, l.proxy).await;
        let before = l.budget.held();
        let head = announce(length) + "{";
        stream.write_all(head.as_bytes()).await.expect("write");
        dealt_with(|| l.budget.held() > before, || answered(&stream)).await;
        attack.push(stream);
    }
    others_are_served(&l).await;
    // Each holds its first buffer, 16 KiB: 4.25 MiB in all, not the 64 MiB announced.
    let held = l.budget.held();
    assert!(held <= 272 * (16 << 10), "held {held}");
    drop(attack);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_peer_that_sends_real_megabytes_holds_its_share_and_no_more() {
    let gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw)).await;
    // Twelve bodies that send 4 MiB of their 4 MiB and a byte, and stall: 48 MiB really sent,
    // the large bodies' three quarters of the budget.
    let mut attack = Vec::new();
    for _ in 0..12 {
        let stream = connect_from(ATTACKER, l.proxy).await;
        let (reader, mut writer) = stream.into_split();
        let before = l.budget.held();
        let head = announce(4 * MIB + 1);
        let writing = tokio::spawn(async move {
            let _ = writer.write_all(head.as_bytes()).await;
            let _ = writer.write_all(&vec![b' '; 4 * MIB]).await;
            std::future::pending::<()>().await;
        });
        let answered = || {
            let mut buf = [0u8; 4096];
            !matches!(reader.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        };
        dealt_with(|| l.budget.held() >= before + 4 * MIB, answered).await;
        attack.push((reader, writing));
    }
    others_are_served(&l).await;
    // Two fit in its share; each of the ten others was refused (503) as it grew past it.
    let line = r#"toolpulse_request_bodies_refused_total{listener="proxy",reason="peer_share"} 10"#;
    metric(&l.metrics, line).await;
    // The attacking peer's next body that does not fit in what is left of its share: 503 at
    // once, with Retry-After.
    let large = format!("{{\"input\":\"{}\"}}", "x".repeat(MIB));
    let own = exchange_from(ATTACKER, l.proxy, &post("/v1/responses", &large)).await;
    assert!(own.starts_with("HTTP/1.1 503"), "{own}");
    assert!(own.contains("body_buffer_bytes_per_peer"), "{own}");
    assert!(own.to_ascii_lowercase().contains("retry-after: 1"), "{own}");
    for (_, writing) in attack {
        writing.abort();
    }
}

/// A request body that sends one byte, then nothing, for ever.
struct OneByteThenStall {
    length: u64,
    sent: bool,
}

impl Body for OneByteThenStall {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.sent {
            return Poll::Pending;
        }
        self.sent = true;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"{")))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.length)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http2_four_connections_of_stalled_streams_starve_no_one() {
    use hyper::client::conn::http2;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw)).await;
    let mut senders = Vec::new();
    for _ in 0..4 {
        let stream = connect_from(ATTACKER, l.proxy).await;
        let shake = http2::handshake(TokioExecutor::new(), TokioIo::new(stream));
        let (sender, connection) = shake.await.expect("HTTP/2 handshake");
        tokio::spawn(connection);
        senders.push(sender);
    }
    // 272 streams, the large bodies first, 68 on each connection.
    let mut streams = Vec::new();
    let lengths = [4 * MIB; 12].into_iter().chain([64 << 10; 260]);
    for (i, length) in lengths.enumerate() {
        let sender = &mut senders[i % 4];
        sender.ready().await.expect("a stream free");
        let request = http::Request::post(format!("http://{}/v1/responses", l.proxy))
            .header("content-type", "application/json")
            .header("content-length", length)
            .body(OneByteThenStall {
                length: length as u64,
                sent: false,
            })
            .expect("request");
        let before = l.budget.held();
        let response = tokio::spawn(sender.send_request(request));
        dealt_with(|| l.budget.held() > before, || response.is_finished()).await;
        streams.push(response);
    }
    others_are_served(&l).await;
    drop((streams, senders));
}

/// Sends `POST /v1/files` (a body streamed through, never read whole) with `framing` and a
/// body that breaks, `broken`, then shuts its sending side; the answer and the metrics.
async fn broken_upload(framing: &str, broken: &[u8]) -> (String, Arc<Metrics>) {
    broken_post(Listener::Proxy, "/v1/files", framing, broken).await
}

/// As [`broken_upload`], on `listener` and `path`.
async fn broken_post(
    listener: Listener,
    path: &str,
    framing: &str,
    broken: &[u8],
) -> (String, Arc<Metrics>) {
    let gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw)).await;
    let to = match listener {
        Listener::Proxy => l.proxy,
        Listener::Mcp => l.mcp,
    };
    let mut stream = connect_from(LEGITIMATE, to).await;
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\n\
         content-type: multipart/form-data; boundary=b\r\n{framing}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(broken).await.expect("body");
    stream.shutdown().await.expect("shutdown");
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    let _ = tokio::time::timeout(PATIENCE, read)
        .await
        .expect("answered");
    (String::from_utf8_lossy(&answer).into_owned(), l.metrics)
}

/// The client's own body broke: 400 in OpenAI's shape, counted with the refused bodies, not
/// as an upstream error.
async fn is_the_clients_error((answer, metrics): (String, Arc<Metrics>)) {
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains(r#""type":"invalid_request_error""#),
        "{answer}"
    );
    assert!(answer.contains(r#""code":"unreadable_body""#), "{answer}");
    let line = r#"toolpulse_request_bodies_refused_total{listener="proxy",reason="unreadable"} 1"#;
    metric(&metrics, line).await;
    let text = metrics.encode();
    assert!(!text.contains("toolpulse_upstream_errors_total{"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_body_with_a_bad_chunk_size_is_the_clients_400() {
    let sent = broken_upload("transfer-encoding: chunked", b"5\r\nhello\r\nzz\r\n").await;
    is_the_clients_error(sent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_body_with_a_20_kb_chunk_extension_is_the_clients_400() {
    let mut body = b"5;".to_vec();
    body.extend(std::iter::repeat_n(b'a', 20_000));
    body.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
    let sent = broken_upload("transfer-encoding: chunked", &body).await;
    is_the_clients_error(sent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_body_cut_short_is_the_clients_400() {
    let sent = broken_upload("content-length: 100", b"--b\r\nonly ten").await;
    is_the_clients_error(sent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_mcp_front_a_streamed_body_cut_short_is_the_gateways_400() {
    // Not JSON: streamed to the server, not read for calls.
    let sent = broken_post(Listener::Mcp, "/srv", "content-length: 100", b"cut").await;
    let (answer, metrics) = sent;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("unreadable_body"), "{answer}");
    let line = r#"toolpulse_request_bodies_refused_total{listener="mcp",reason="unreadable"} 1"#;
    metric(&metrics, line).await;
}

/// A request body that sends `sent` bytes, then nothing, for ever.
fn stalled_after(sent: usize) -> http_body_util::StreamBody<StalledFrames> {
    http_body_util::StreamBody::new(StalledFrames {
        first: Some(Bytes::from(vec![b' '; sent])),
    })
}

struct StalledFrames {
    first: Option<Bytes>,
}

impl futures::Stream for StalledFrames {
    type Item = Result<Frame<Bytes>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.first.take() {
            Some(bytes) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
            None => Poll::Pending,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_http2_connection_holds_at_most_its_share() {
    use hyper::client::conn::http2;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let gw = Gateway::start(|_| json_gateway()).await;
    // Behind an ingress every client has its address: the peer share is the whole budget, and
    // the connection share (8 MiB and 128 KiB) is what bounds one connection.
    let mut config = config(&gw);
    config.clients.body_buffer_bytes_per_peer = config.clients.body_buffer_bytes;
    let l = start(config).await;
    let stream = connect_from(ATTACKER, l.proxy).await;
    let shake = http2::handshake(TokioExecutor::new(), TokioIo::new(stream));
    let (mut sender, connection) = shake.await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    // Four streams that each send 4 MiB of their 4 MiB and a byte: two fit, two are refused.
    let mut streams = Vec::new();
    let mut refused = 0;
    for _ in 0..4 {
        sender.ready().await.expect("a stream free");
        let request = http::Request::post(format!("http://{}/v1/responses", l.proxy))
            .header("content-type", "application/json")
            .header("content-length", 4 * MIB + 1)
            .body(stalled_after(4 * MIB))
            .expect("request");
        let before = l.budget.held();
        let response = tokio::spawn(sender.send_request(request));
        dealt_with(
            || l.budget.held() >= before + 4 * MIB,
            || response.is_finished(),
        )
        .await;
        if response.is_finished() {
            let answer = response.await.expect("joined").expect("answered");
            assert_eq!(answer.status(), 503);
            refused += 1;
        } else {
            streams.push(response);
        }
    }
    assert_eq!((streams.len(), refused), (2, 2));
    let line =
        r#"toolpulse_request_bodies_refused_total{listener="proxy",reason="connection_share"} 2"#;
    metric(&l.metrics, line).await;
    // Another connection from the same address is read: its share is its own.
    let large = format!("{{\"input\":\"{}\"}}", "x".repeat(MIB));
    let answer = exchange_from(ATTACKER, l.proxy, &post("/v1/responses", &large)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop((streams, sender));
}
