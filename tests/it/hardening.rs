//! Attacks on real sockets: unauthenticated clients that would hold connections or
//! memory (a connection that sends nothing, an HTTP/2 connection idle after its preface, a body
//! trickled byte by byte, many large bodies stalled at once, an admin listener flooded with
//! idle connections), requests with two `Host` headers or none, invalid `traceparent`s, each
//! against the proxy, the MCP front and the admin listener where it applies. Every limit is set small in the config so the tests run in a second or two; each
//! test waits with a deadline, never a bare sleep.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolpulse::Config;
use toolpulse::app::admin::{self, Admin};
use toolpulse::features::mcp::{Front, server as mcp_server};
use toolpulse::features::progress::local::LocalHub;
use toolpulse::metrics::Metrics;
use toolpulse::net::budget::BodyBudget;
use toolpulse::proxy::Proxy;

use common::gateway::{Action, Gateway, Reply};

/// Far above every timeout below: a connection still open after this was not closed.
const PATIENCE: Duration = Duration::from_secs(60);

fn config(gateway: &Gateway, extra: &str) -> Config {
    let text = format!(
        "[proxy]\nupstream = \"{url}\"\n\
         [clients]\nhead_timeout_ms = 300\nbody_timeout_ms = 600\nidle_timeout_ms = 400\n\
         max_streams_per_connection = 4\nbody_buffer_bytes = 8388608\n\
         [[mcp.servers]]\nname = \"srv\"\nupstream = \"{url}/mcp\"\n{extra}",
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
    admin: SocketAddr,
    metrics: Arc<Metrics>,
    budget: BodyBudget,
}

async fn start(config: Config) -> Listeners {
    let config = Arc::new(config);
    let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let hub = LocalHub::new(config.progress.bind_window);
    let proxy = Proxy::new(config.clone())
        .expect("proxy")
        .with_progress(hub.clone());
    let front = Front::new(&config, hub, proxy.metrics().clone())
        .expect("front")
        .expect("configured")
        .with_body_budget(proxy.body_budget().clone());
    let metrics = proxy.metrics().clone();
    let budget = proxy.body_budget().clone();
    let (p, m, a) = (bind().await, bind().await, bind().await);
    let (p, m, a) = (p.expect("bind"), m.expect("bind"), a.expect("bind"));
    let addrs = (p.local_addr(), m.local_addr(), a.local_addr());
    let admin = Arc::new(Admin::new(metrics.clone()));
    let (clients, admin_cap) = (config.clients.clone(), config.admin.max_connections);
    tokio::spawn(admin::serve(
        a,
        admin,
        clients,
        admin_cap,
        std::future::pending(),
    ));
    tokio::spawn(mcp_server::serve(
        m,
        Arc::new(front),
        std::future::pending(),
    ));
    let proxy = Arc::new(proxy);
    tokio::spawn(toolpulse::net::server::serve(
        p,
        proxy,
        std::future::pending(),
    ));
    Listeners {
        proxy: addrs.0.expect("addr"),
        mcp: addrs.1.expect("addr"),
        admin: addrs.2.expect("addr"),
        metrics,
        budget,
    }
}

/// Reads until the peer closes; returns what it sent and how long it took to close.
async fn until_closed(stream: &mut TcpStream) -> (Vec<u8>, Duration) {
    let start = Instant::now();
    let mut seen = Vec::new();
    let read = stream.read_to_end(&mut seen);
    match tokio::time::timeout(PATIENCE, read).await {
        Ok(_) => (seen, start.elapsed()),
        Err(_) => panic!(
            "still open after {PATIENCE:?}: {}",
            String::from_utf8_lossy(&seen)
        ),
    }
}

/// Waits (bounded) until the metrics hold `line`.
async fn metric(metrics: &Metrics, line: &str) {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if metrics.encode().contains(line) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no {line} in {}", metrics.encode());
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame: length 0, type 4, flags 0, stream 0.
const H2_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_sends_nothing_is_closed_at_the_head_timeout_on_every_listener() {
    let gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw, "")).await;
    for (addr, listener) in [(l.proxy, "proxy"), (l.mcp, "mcp"), (l.admin, "admin")] {
        let mut silent = TcpStream::connect(addr).await.expect("connect");
        // Sending a head in time is served: the timeout is for silence only.
        let mut served = TcpStream::connect(addr).await.expect("connect");
        served
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        let (answer, _) = until_closed(&mut served).await;
        assert!(answer.starts_with(b"HTTP/1.1 "), "{listener}: {answer:?}");

        let (bytes, after) = until_closed(&mut silent).await;
        assert!(bytes.is_empty(), "{listener}: closed without a word");
        assert!(
            after >= Duration::from_millis(200),
            "{listener}: not before the timeout"
        );
        let line = format!(
            "toolpulse_client_connections_closed_total{{listener=\"{listener}\",reason=\"no_request\"}}"
        );
        metric(&l.metrics, &line).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_http1_connection_without_a_next_request_is_counted_when_closed() {
    let gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw, "")).await;
    for (addr, listener) in [(l.proxy, "proxy"), (l.mcp, "mcp"), (l.admin, "admin")] {
        let mut kept = TcpStream::connect(addr).await.expect("connect");
        kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .expect("head");
        let mut answer = [0u8; 12];
        kept.read_exact(&mut answer).await.expect("answered");
        // No next request: closed at the head timeout (300 ms), not before, and counted.
        let (_, took) = until_closed(&mut kept).await;
        assert!(took >= Duration::from_millis(200), "{listener}: {took:?}");
        let line = format!(
            "toolpulse_client_connections_closed_total{{listener=\"{listener}\",reason=\"no_request\"}} 1"
        );
        metric(&l.metrics, &line).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_connection_idle_after_its_preface_gets_goaway_and_is_closed() {
    let gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw, "")).await;
    for addr in [l.proxy, l.mcp, l.admin] {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(H2_PREFACE).await.expect("preface");
        stream.write_all(H2_SETTINGS).await.expect("settings");
        let (bytes, _) = until_closed(&mut stream).await;
        let frames = h2_frames(&bytes);
        assert!(
            frames.iter().any(|(kind, _)| *kind == 7),
            "a GOAWAY: {frames:?}"
        );
    }
}

/// Sends the client's SETTINGS after its preface; the head of the server's first frame, which
/// must be its SETTINGS.
async fn settings_exchanged(stream: &mut TcpStream) -> [u8; 9] {
    stream.write_all(H2_SETTINGS).await.expect("settings");
    let mut head = [0u8; 9];
    tokio::time::timeout(PATIENCE, stream.read_exact(&mut head))
        .await
        .expect("in time")
        .expect("the server's SETTINGS");
    assert_eq!(head[3], 4, "SETTINGS first");
    head
}

/// The version is told from the first bytes however they arrive: an HTTP/2 preface in pieces
/// (peeked at again until it is whole) gets the server's SETTINGS, an HTTP/1 head in pieces its
/// answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preface_or_a_head_sent_in_pieces_is_served() {
    let gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw, "")).await;
    let mut stream = TcpStream::connect(l.proxy).await.expect("connect");
    for piece in [&H2_PREFACE[..1], &H2_PREFACE[1..10], &H2_PREFACE[10..]] {
        stream.write_all(piece).await.expect("preface");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    settings_exchanged(&mut stream).await;

    let mut stream = TcpStream::connect(l.proxy).await.expect("connect");
    let request = b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    for piece in [&request[..1], &request[1..]] {
        stream.write_all(piece).await.expect("write");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (answer, _) = until_closed(&mut stream).await;
    assert!(answer.starts_with(b"HTTP/1.1 "), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_streams_per_connection_are_bounded() {
    let gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw, "")).await;
    let mut stream = TcpStream::connect(l.proxy).await.expect("connect");
    stream.write_all(H2_PREFACE).await.expect("preface");
    let head = settings_exchanged(&mut stream).await;
    let len = usize::from(head[2]) | usize::from(head[1]) << 8;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.expect("payload");
    let max_streams = payload
        .chunks(6)
        .find(|p| p[..2] == [0, 3])
        .map(|p| u32::from_be_bytes([p[2], p[3], p[4], p[5]]));
    assert_eq!(max_streams, Some(4), "SETTINGS_MAX_CONCURRENT_STREAMS");
}

/// (type, stream id) of each whole HTTP/2 frame in `bytes`.
fn h2_frames(mut bytes: &[u8]) -> Vec<(u8, u32)> {
    let mut frames = Vec::new();
    while bytes.len() >= 9 {
        let len =
            (usize::from(bytes[0]) << 16) | (usize::from(bytes[1]) << 8) | usize::from(bytes[2]);
        let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff;
        frames.push((bytes[3], stream));
        bytes = &bytes[(9 + len).min(bytes.len())..];
    }
    frames
}

/// A POST whose body is announced at `length` bytes, of which `sent` are written (in the
/// background: a proxy that refuses may stop reading); the connection then stalls until this
/// is dropped.
struct Stalled {
    reader: tokio::net::tcp::OwnedReadHalf,
    writer: tokio::task::JoinHandle<()>,
}

impl Drop for Stalled {
    fn drop(&mut self) {
        self.writer.abort();
    }
}

async fn stalled_post(addr: SocketAddr, path: &str, length: usize, sent: usize) -> Stalled {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (reader, mut writer) = stream.into_split();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {length}\r\n\r\n"
    );
    let writer = tokio::spawn(async move {
        let _ = writer.write_all(head.as_bytes()).await;
        let _ = writer.write_all(&vec![b' '; sent]).await;
        std::future::pending::<()>().await;
    });
    Stalled { reader, writer }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_is_refused_at_the_body_timeout_and_never_reaches_the_upstream() {
    let mut gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw, "")).await;
    for (addr, path, listener) in [(l.proxy, "/v1/responses", "proxy"), (l.mcp, "/srv", "mcp")] {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (mut reader, mut writer) = stream.into_split();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             content-length: 1000\r\n\r\n"
        );
        writer.write_all(head.as_bytes()).await.expect("head");
        // One byte every 100 ms: each comes well within the timeout, the whole body never does.
        // Returns when a write failed: the proxy closed the connection for good.
        let trickle = tokio::spawn(async move {
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if writer.write_all(b" ").await.is_err() {
                    return Some(Instant::now());
                }
            }
            None
        });
        let mut answer = [0u8; 12];
        let got = tokio::time::timeout(PATIENCE, reader.read_exact(&mut answer)).await;
        got.expect("answered in time").expect("read");
        assert_eq!(&answer, b"HTTP/1.1 408", "{listener}");
        let answered = Instant::now();
        // Closed at once, not lingered on while the client trickles on (a lingering close
        // would take the trickle until the idle timeout and its grace, 5.4 s here).
        let failed = trickle.await.expect("trickle").expect("the proxy closed");
        let took = failed - answered;
        assert!(
            took < Duration::from_secs(3),
            "{listener}: closed after {took:?}"
        );
        let line = format!(
            "toolpulse_request_bodies_refused_total{{listener=\"{listener}\",reason=\"timeout\"}} 1"
        );
        metric(&l.metrics, &line).await;
    }
    assert!(
        gw.requests.try_recv().is_err(),
        "nothing reached the upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_budget_are_refused_503_and_the_budget_comes_back() {
    let mut gw = Gateway::start(|_| json_gateway()).await;
    // Timeouts long enough for the stalled bodies to hold the budget while the test looks.
    let mut config = config(&gw, "");
    config.clients.body_timeout = Duration::from_secs(3);
    let l = start(config).await;
    // Bodies of 3 MiB sent but for their last byte, stalled (each charged 3 MiB, its buffer,
    // grown as the bytes came): two fill the three quarters of the 8 MiB budget that large
    // bodies may take, the third does not fit, whichever listener it comes to.
    let mib = 1 << 20;
    let first = stalled_post(l.proxy, "/v1/responses", 3 * mib, 3 * mib - 1).await;
    let second = stalled_post(l.mcp, "/srv", 3 * mib, 3 * mib - 1).await;
    let deadline = Instant::now() + PATIENCE;
    while l.budget.held() < 6 * mib {
        assert!(Instant::now() < deadline, "held {}", l.budget.held());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut third = stalled_post(l.proxy, "/v1/responses", 3 * mib, 2 * mib).await;
    let (answer, _) = until_closed_or_answered(&mut third.reader).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 503"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert!(
        String::from_utf8_lossy(&answer)
            .to_ascii_lowercase()
            .contains("retry-after: 1")
    );
    metric(
        &l.metrics,
        r#"toolpulse_request_bodies_refused_total{listener="proxy",reason="budget"} 1"#,
    )
    .await;
    // An ordinary request is read all the same: a quarter is kept for small bodies.
    let small = exchange(
        l.proxy,
        "POST /v1/responses HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
    )
    .await;
    assert!(small.starts_with("HTTP/1.1 200"), "{small}");
    assert_eq!(
        l.budget.held(),
        6 * mib,
        "the stalled ones still hold theirs"
    );
    gw.requests
        .recv()
        .await
        .expect("the small one reached the upstream");
    // The stalled ones time out and give their part back: a whole body goes through.
    drop((first, second));
    let client = common::http_client();
    let body = format!("{{\"input\":\"{}\"}}", "x".repeat(3 * mib));
    let deadline = Instant::now() + PATIENCE;
    loop {
        let request = http::Request::post(format!("http://{}/v1/responses", l.proxy))
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(body.clone())))
            .expect("request");
        let status = client.request(request).await.expect("response").status();
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the budget never came back: {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = gw
        .requests
        .recv()
        .await
        .expect("the whole body reached the upstream");
    assert_eq!(seen.body.len(), body.len());
}

/// Reads a response head (up to its blank line) or until the peer closes.
async fn until_closed_or_answered(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
) -> (Vec<u8>, Duration) {
    let start = Instant::now();
    let mut seen = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
            if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                return;
            }
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("answered in time");
    (seen, start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_caps_its_connections_and_closes_idle_ones() {
    let gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw, "[admin]\nmax_connections = 3\n")).await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(l.admin).await.expect("connect"));
    }
    // The cap is taken by connections that ask nothing: the next one takes the place of the
    // oldest, which is closed, and is served.
    let mut probe = TcpStream::connect(l.admin).await.expect("connect");
    probe
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .expect("write");
    let (answer, _) = until_closed(&mut probe).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    metric(
        &l.metrics,
        "toolpulse_client_connections_closed_total{listener=\"admin\",reason=\"evicted\"} 1",
    )
    .await;
    // The evicted one first, then the others at the head timeout.
    for mut stream in idle {
        until_closed(&mut stream).await;
    }
    let mut served = TcpStream::connect(l.admin).await.expect("connect");
    served
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .expect("write");
    let (answer, _) = until_closed(&mut served).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

/// Sends `request` raw and reads the answer until the peer closes (every request here says
/// `connection: close` or is refused).
async fn exchange(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let (answer, _) = until_closed(&mut stream).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_requests_with_two_host_headers_or_none_are_refused_on_every_listener() {
    let mut gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw, "")).await;
    for (addr, path) in [
        (l.proxy, "/v1/models"),
        (l.mcp, "/srv"),
        (l.admin, "/healthz"),
    ] {
        for (request, status) in [
            (
                "GET {path} HTTP/1.1\r\nhost: a\r\nhost: b\r\nconnection: close\r\n\r\n",
                "400",
            ),
            ("GET {path} HTTP/1.1\r\nconnection: close\r\n\r\n", "400"),
            ("GET {path} HTTP/1.0\r\nhost: a\r\nhost: b\r\n\r\n", "400"),
        ] {
            let answer = exchange(addr, &request.replace("{path}", path)).await;
            let code = answer.split_whitespace().nth(1);
            assert_eq!(code, Some(status), "{path}: {answer}");
        }
    }
    assert!(
        gw.requests.try_recv().is_err(),
        "nothing reached the upstream"
    );
    // HTTP/1.0 may leave Host out: served.
    let answer = exchange(l.proxy, "GET /v1/models HTTP/1.0\r\n\r\n").await;
    assert_eq!(answer.split_whitespace().nth(1), Some("200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_traceparent_restarts_the_trace_and_a_valid_one_is_continued() {
    let mut gw = Gateway::start(|_| json_gateway()).await;
    let l = start(config(&gw, "")).await;
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
        let request = format!(
            "POST /v1/responses HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
             content-type: application/json\r\ncontent-length: 2\r\ntraceparent: {sent}\r\n\r\n{{}}"
        );
        let answer = exchange(l.proxy, &request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let seen = gw.requests.recv().await.expect("forwarded");
        let forwarded = seen
            .header("traceparent")
            .expect("a traceparent")
            .to_string();
        match continued {
            true => assert_eq!(forwarded, sent),
            false => {
                assert_ne!(forwarded, sent, "restarted");
                let id = toolpulse::features::progress::TraceId::from_traceparent(&forwarded);
                assert!(id.is_some(), "a valid new one: {forwarded}");
            }
        }
    }
}

/// A batch of `n` `tools/call`s numbered from `first`.
fn batch(first: usize, n: usize) -> String {
    let calls: Vec<String> = (first..first + n)
        .map(|id| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"steps","arguments":{{"n":{id}}}}}}}"#
            )
        })
        .collect();
    format!("[{}]", calls.join(","))
}

/// One connection (HTTP/2, many streams of batched calls, answers held open)
/// cannot take the whole registry: past its share its calls go on unfollowed, and another
/// connection's call is still followed. With `[mcp] require_token`, the MCP paths want the
/// token, and it never reaches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_gets_its_share_of_followed_calls_and_no_more() {
    let release = Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let mut gw = Gateway::start(move |_| Reply {
        head: Reply::sse(vec![]).head,
        actions: vec![Action::Wait(held.clone()), Action::End],
    })
    .await;
    let mut config = config(&gw, "");
    config.clients.max_streams_per_connection = 16;
    let l = start(config).await;
    let url = format!("http://{}/srv", l.mcp);
    let post = |client: &common::HttpClient, body: String| {
        let request = http::Request::post(url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .expect("request");
        client.request(request)
    };
    let abuser = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http();
    // 6 × 64 calls on one HTTP/2 connection, every answer held open.
    let mut held_open = Vec::new();
    for i in 0..6 {
        let response = post(&abuser, batch(i * 64, 64)).await.expect("answered");
        assert_eq!(response.status(), 200);
        held_open.push(response);
    }
    let share = toolpulse::features::mcp::calls::MAX_CALLS_PER_CONNECTION;
    metric(&l.metrics, &format!("toolpulse_mcp_bound_calls {share}\n")).await;
    let unfollowed = 6 * 64 - share;
    let line =
        format!("toolpulse_mcp_calls_unfollowed_total{{cause=\"connection_share\"}} {unfollowed}");
    metric(&l.metrics, &line).await;
    // Another connection's call is followed.
    let other = common::http_client();
    let response = post(&other, batch(1000, 1)).await.expect("answered");
    held_open.push(response);
    metric(
        &l.metrics,
        &format!("toolpulse_mcp_bound_calls {}\n", share + 1),
    )
    .await;
    release.notify_waiters();
    drop(held_open);
    while let Ok(seen) = gw.requests.try_recv() {
        assert!(seen.header("x-toolpulse-token").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_paths_can_require_the_token() {
    let mut gw = Gateway::start(|_| json_gateway()).await;
    let token = "a-progress-token-0123456789";
    let extra = format!("[mcp]\nrequire_token = true\n[progress]\ntoken = \"{token}\"\n");
    let l = start(config(&gw, &extra)).await;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    for (given, status) in [
        (None, "401"),
        (Some("wrong-token-0123456789"), "401"),
        (Some(token), "200"),
    ] {
        let header = given.map_or(String::new(), |t| format!("x-toolpulse-token: {t}\r\n"));
        let request = format!(
            "POST /srv HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\n\
             {header}content-length: {}\r\n\r\n{call}",
            call.len()
        );
        let answer = exchange(l.mcp, &request).await;
        assert_eq!(
            answer.split_whitespace().nth(1),
            Some(status),
            "{given:?}: {answer}"
        );
    }
    let seen = gw
        .requests
        .recv()
        .await
        .expect("the one with the token went on");
    assert!(
        seen.header("x-toolpulse-token").is_none(),
        "never sent to the server"
    );
    assert!(gw.requests.try_recv().is_err(), "the others did not");
}

/// A client refused before it sent its whole body gets the refusal, not a reset: the
/// connection lingers, reading and dropping what the client still sends, before it closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_refused_while_still_sending_gets_the_answer_not_a_reset() {
    let gw = Gateway::start(|_| json_gateway()).await;
    let token = "a-progress-token-0123456789";
    let l = start(config(&gw, &format!("[progress]\ntoken = \"{token}\"\n"))).await;
    const BODY: usize = 4 << 20;
    let stream = TcpStream::connect(l.mcp).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST /v1/progress HTTP/1.1\r\nhost: x\r\nauthorization: Bearer wrong\r\n\
         content-type: application/json\r\ncontent-length: {BODY}\r\n\r\n"
    );
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await.expect("head");
        // Slower than the answer: the refusal is sent while this still writes.
        for _ in 0..BODY / 65536 {
            if write.write_all(&[b' '; 65536]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    let mut seen = Vec::new();
    let read = tokio::time::timeout(PATIENCE, read.read_to_end(&mut seen)).await;
    let answer = String::from_utf8_lossy(&seen);
    assert!(answer.starts_with("HTTP/1.1 401"), "{read:?}: {answer}");
    read.expect("closed in time").expect("closed, not reset");
    writer.await.expect("writer");
}
