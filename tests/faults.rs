//! Broken peers, end to end on real sockets: every fault ends in a defined outcome, is counted
//! in the metrics, and releases what it held (streams, connections and, checked after each
//! fault, the process's open file descriptors). The faults run one after another in one test,
//! against one proxy and one scripted gateway, so the descriptor count is theirs alone.

// A test binary of its own, not a module of `tests/it`: the descriptor count is the whole
// process's, and tests running beside these in one process would change it. The helpers are
// `tests/it`'s.
#[path = "it/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::gateway::{Action, Gateway, Recorded, Reply};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolpulse::proxy::Proxy;

const REQUEST: &str = r#"{"model":"m","input":"hi","stream":true}"#;
const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked";
/// For replies that end normally: the proxy does not pool the connection, so its descriptor
/// goes when the reply does.
const SSE_HEAD_CLOSE: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
     transfer-encoding: chunked\r\nconnection: close";
/// What the flooding gateway writes at most: far more than every socket buffer on the way.
const FLOOD_BYTES: usize = 256 << 20;
/// An event of this size goes through whole (it is over `max_event_bytes`, so forwarded raw).
const HUGE_EVENT_BYTES: usize = 100 << 20;
/// A line that never ends (no line break until the upstream closes), twice `max_event_bytes`.
const ENDLESS_LINE_BYTES: usize = 32 << 20;

/// One 64 KiB piece of the `/endless-line` body: `data: `, NULs and invalid UTF-8, no line
/// break.
fn endless_piece() -> Vec<u8> {
    b"data: \x00\xff\xfe{\"type\":"
        .iter()
        .copied()
        .cycle()
        .take(64 << 10)
        .collect()
}

/// The `/endless-line` upstream body: a tool round's opening, then `data: ` and
/// [`ENDLESS_LINE_BYTES`] of bytes with NULs and invalid UTF-8 in them, and no line break.
fn endless_line_input() -> Vec<u8> {
    let web_search = blocks(&fixture("web_search.sse"));
    let output_at = web_search
        .iter()
        .position(|b| String::from_utf8_lossy(b).contains("function_call_output"))
        .expect("an output");
    let mut input = web_search[..output_at].concat();
    for _ in 0..ENDLESS_LINE_BYTES >> 16 {
        input.extend_from_slice(&endless_piece());
    }
    input
}

/// [`endless_line_input`] as the gateway sends it. The long part is written as one piece over and over ([`Action::Flood`]), so the gateway
/// builds nothing large before its response head: a loaded machine cannot push the head past
/// the proxy's header timeout.
fn endless_line_actions() -> Vec<Action> {
    let web_search = blocks(&fixture("web_search.sse"));
    let output_at = web_search
        .iter()
        .position(|b| String::from_utf8_lossy(b).contains("function_call_output"))
        .expect("an output");
    let mut actions: Vec<Action> = web_search[..output_at]
        .iter()
        .cloned()
        .map(Action::Chunk)
        .collect();
    actions.push(Action::Flood {
        chunk: chunked(&endless_piece()),
        times: ENDLESS_LINE_BYTES >> 16,
        written: Arc::default(),
    });
    actions
}

/// The bench proxy's header timeout: longer than any answering gateway takes to send its head,
/// even one that writes a 100 MiB event behind it on a loaded machine.
const HEADER_TIMEOUT: Duration = Duration::from_secs(120);

fn fixture(name: &str) -> Vec<u8> {
    read(&fixtures_dir().join(name))
}

/// A text delta event of about `size` bytes.
fn text_event(size: usize) -> Vec<u8> {
    let (head, filler, tail) = text_event_parts(size);
    let mut event = head;
    event.resize(event.len() + filler, b'x');
    event.extend_from_slice(&tail);
    event
}

/// [`text_event`] as its start, the count of `x`s of its delta, and its end.
fn text_event_parts(size: usize) -> (Vec<u8>, usize, Vec<u8>) {
    let head = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\
                \"sequence_number\":3,\"item_id\":\"msg_1\",\"delta\":\"";
    (head.into(), size.saturating_sub(120), b"\"}\n\n".to_vec())
}

/// The actions that send [`text_event`] as chunks of at most 64 KiB, its delta's `x`s as one
/// piece written over and over, so nothing of its size is built before it is sent.
fn text_event_actions(size: usize) -> Vec<Action> {
    const PIECE: usize = 64 << 10;
    let (head, filler, mut tail) = text_event_parts(size);
    tail.splice(0..0, std::iter::repeat_n(b'x', filler % PIECE));
    vec![
        Action::Chunk(head),
        Action::Flood {
            chunk: chunked(&[b'x'; PIECE]),
            times: filler / PIECE,
            written: Arc::default(),
        },
        Action::Chunk(tail),
    ]
}

fn chunked(bytes: &[u8]) -> Vec<u8> {
    let mut framed = format!("{:x}\r\n", bytes.len()).into_bytes();
    framed.extend_from_slice(bytes);
    framed.extend_from_slice(b"\r\n");
    framed
}

/// The gateway's script, by request path.
fn reply(request: &Recorded, flood_written: &Arc<AtomicU64>) -> Reply {
    let path = request.target.split('?').next().unwrap_or_default();
    let open_at_eof = blocks(&fixture("open_at_eof.sse"));
    let web_search = blocks(&fixture("web_search.sse"));
    let head = |head: &str, actions: Vec<Action>| Reply {
        head: head.into(),
        actions,
    };
    match path {
        "/reset-mid-chunk" => {
            let mut actions: Vec<Action> = open_at_eof.into_iter().map(Action::Chunk).collect();
            actions.push(Action::Sleep(Duration::from_millis(100)));
            actions.push(Action::Raw(b"40\r\ndata: {\"type\":".to_vec()));
            actions.push(Action::Sleep(Duration::from_millis(100)));
            actions.push(Action::Reset);
            head(SSE_HEAD, actions)
        }
        "/close-before-headers" => head("", vec![Action::Close]),
        "/garbage" => head(
            "",
            vec![
                Action::Raw(b"SSH-2.0-OpenSSH_9.2p1\r\n\0\x01\x02 not http\r\n\r\n".to_vec()),
                Action::Sleep(Duration::from_millis(100)),
                Action::Close,
            ],
        ),
        "/stall-before-headers" => head("", vec![Action::WaitForClose(Duration::from_secs(120))]),
        "/drip" => {
            let bytes = fixture("web_search.sse");
            let mut actions = Vec::new();
            for b in bytes {
                actions.push(Action::Chunk(vec![b]));
                actions.push(Action::Sleep(Duration::from_millis(1)));
            }
            actions.push(Action::End);
            head(SSE_HEAD_CLOSE, actions)
        }
        "/hold-while-tool-runs" => {
            let running = web_search
                .iter()
                .position(|b| String::from_utf8_lossy(b).contains("function_call_output"))
                .expect("an output");
            let mut actions: Vec<Action> = web_search[..running]
                .iter()
                .cloned()
                .map(Action::Chunk)
                .collect();
            actions.push(Action::WaitForClose(Duration::from_secs(120)));
            head(SSE_HEAD, actions)
        }
        "/flood" => {
            let event = text_event(16 << 10);
            let chunk = chunked(&event);
            let times = FLOOD_BYTES / chunk.len();
            let written = flood_written.clone();
            head(
                SSE_HEAD,
                vec![Action::Flood {
                    chunk,
                    times,
                    written,
                }],
            )
        }
        "/huge-event" => {
            // A tool round, a 100 MiB event in 64 KiB chunks, then the tool's output.
            let output_at = web_search
                .iter()
                .position(|b| String::from_utf8_lossy(b).contains("function_call_output"))
                .expect("an output");
            let mut actions: Vec<Action> = web_search[..output_at]
                .iter()
                .cloned()
                .map(Action::Chunk)
                .collect();
            actions.extend(text_event_actions(HUGE_EVENT_BYTES));
            actions.extend(web_search[output_at..].iter().cloned().map(Action::Chunk));
            actions.push(Action::End);
            head(SSE_HEAD_CLOSE, actions)
        }
        "/endless-line" => {
            let mut actions = endless_line_actions();
            actions.push(Action::End);
            head(SSE_HEAD_CLOSE, actions)
        }
        "/echo" => head(
            SSE_HEAD_CLOSE,
            vec![Action::Chunk(fixture("no_tools.sse")), Action::End],
        ),
        other => panic!("no script for {other}"),
    }
}

struct Bench {
    proxy: SocketAddr,
    handle: Arc<Proxy>,
    /// A proxy of its own for the header timeout, which is short there: its one case is a
    /// gateway that never answers, so the timeout fires however slow the machine is. The
    /// bench's proxy waits [`HEADER_TIMEOUT`], which no answering gateway meets even on a
    /// loaded machine.
    stalled: (SocketAddr, Arc<Proxy>),
    gateway: Gateway,
    flood_written: Arc<AtomicU64>,
    /// Open descriptors with the gateway and proxy listening and no connection open.
    baseline_fds: usize,
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

impl Bench {
    async fn start() -> Bench {
        let flood_written = Arc::new(AtomicU64::new(0));
        let written = flood_written.clone();
        let gateway = Gateway::start(move |request| reply(request, &written)).await;
        let mut config = config_for("open_at_eof.sse");
        config.proxy.header_timeout = HEADER_TIMEOUT;
        config.heartbeat = Duration::from_millis(100);
        let mut stalled = config.clone();
        stalled.proxy.header_timeout = Duration::from_millis(1000);
        let (proxy, handle) = start_proxy_with_handle(config, &gateway.url()).await;
        let stalled = start_proxy_with_handle(stalled, &gateway.url()).await;
        Bench {
            proxy,
            handle,
            stalled,
            gateway,
            flood_written,
            baseline_fds: open_fds(),
        }
    }

    fn stalled_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.stalled.0)
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.proxy)
    }

    /// The value of one series of the proxy's metrics (0 when absent).
    fn metric(&self, series: &str) -> u64 {
        metric(&self.handle, series)
    }

    /// Runs one fault and checks that it counted `series` once and released everything.
    async fn fault<F: Future<Output = ()>>(&self, name: &str, series: &str, fault: F) {
        let before = self.metric(series);
        tokio::time::timeout(Duration::from_secs(60), fault)
            .await
            .unwrap_or_else(|_| panic!("{name}: did not end"));
        self.settle(name).await;
        assert_eq!(
            self.metric(series),
            before + 1,
            "{name}: {series} counted once"
        );
    }

    /// Waits until no stream or connection is open and the descriptors are back to baseline.
    async fn settle(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let streams = self.metric("toolpulse_streams_active");
            let connections = self.metric("toolpulse_connections_active");
            let fds = open_fds();
            if streams == 0 && connections == 0 && fds == self.baseline_fds {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{name}: {streams} streams, {connections} connections and {fds} descriptors \
                 (baseline {}) still open",
                self.baseline_fds
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The value of one series of `proxy`'s metrics (0 when absent).
fn metric(proxy: &Proxy, series: &str) -> u64 {
    let text = proxy.metrics().encode();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0, |v| v.parse().expect("a number"))
}

async fn post_status(url: String) -> (u16, Vec<u8>) {
    let client = http_client();
    let response = post(&client, url, REQUEST).await;
    let status = response.status().as_u16();
    let body = read_all(&mut response.into_body()).await;
    (status, body)
}

async fn proxy_error(url: String, status: u16, code: &str) {
    let (got, body) = post_status(url).await;
    assert_eq!(got, status);
    let json: serde_json::Value = serde_json::from_slice(&body).expect("a JSON error");
    assert_eq!(json["error"]["code"], code);
}

/// A raw HTTP/1.1 request; the caller decides how (and whether) to read the answer.
async fn raw_request(addr: SocketAddr, head: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write");
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_peers_end_cleanly_are_counted_and_release_everything() {
    let mut bench = Bench::start().await;

    // Upstream resets the connection in the middle of a chunk, with a call open: the client
    // gets every event, then the call's terminal event, then the end of the body.
    let series = "toolpulse_upstream_errors_total{cause=\"broken_stream\"}";
    bench
        .fault("upstream reset", series, async {
            let (status, out) = post_status(bench.url("/reset-mid-chunk")).await;
            assert_eq!(status, 200);
            let text = String::from_utf8_lossy(&out);
            assert!(text.contains("response.mcp_call.failed"), "{text}");
            // hyper may hand on the start of the broken chunk before its error: then it is the
            // stream's unterminated tail, after the closing event.
            let tail_at = text.rfind("\n\n").expect("events") + 2;
            let sent = [&fixture("open_at_eof.sse")[..], &out[tail_at..]].concat();
            invariants::check(&sent, &out, usize::MAX).expect("invariants");
        })
        .await;
    let ended = "toolpulse_streams_total{outcome=\"upstream_error\"}";
    assert_eq!(bench.metric(ended), 1);

    let series = "toolpulse_upstream_errors_total{cause=\"error\"}";
    bench
        .fault("upstream closes before headers", series, async {
            proxy_error(bench.url("/close-before-headers"), 502, "upstream_error").await;
        })
        .await;
    bench
        .fault("upstream speaks garbage", series, async {
            proxy_error(bench.url("/garbage"), 502, "upstream_error").await;
        })
        .await;

    let series = "toolpulse_upstream_errors_total{cause=\"header_timeout\"}";
    let before = metric(&bench.stalled.1, series);
    let url = bench.stalled_url("/stall-before-headers");
    proxy_error(url, 504, "upstream_timeout").await;
    bench.settle("upstream stalls before headers").await;
    assert_eq!(metric(&bench.stalled.1, series), before + 1, "{series}");
    let closed = tokio::time::timeout(Duration::from_secs(60), bench.gateway.closed.recv()).await;
    assert!(
        matches!(closed, Ok(Some(()))),
        "the stalled upstream connection was closed by the proxy"
    );

    // Upstream drips one byte per chunk: same events, heartbeats only between them.
    let series = "toolpulse_streams_total{outcome=\"completed\"}";
    bench
        .fault("upstream drips", series, async {
            let (status, out) = post_status(bench.url("/drip")).await;
            assert_eq!(status, 200);
            let input = fixture("web_search.sse");
            let report = invariants::check(&input, &out, usize::MAX).expect("invariants");
            assert!(report.injected_events >= 3, "{report:?}");
        })
        .await;

    // The client vanishes while a tool runs: the upstream connection is closed too.
    let series = "toolpulse_streams_total{outcome=\"client_gone\"}";
    bench
        .fault("client vanishes mid-stream", series, async {
            let client = http_client();
            let response = post(&client, bench.url("/hold-while-tool-runs"), REQUEST).await;
            let mut body = response.into_body();
            read_until(&mut body, "web_search_call.searching").await;
        })
        .await;
    let closed = tokio::time::timeout(Duration::from_secs(60), bench.gateway.closed.recv()).await;
    assert!(
        matches!(closed, Ok(Some(()))),
        "upstream closed after client left"
    );

    // The client never reads while the upstream floods: TCP backpressure stops the upstream
    // after the socket buffers on the way are full, not after the proxy buffered the flood.
    bench
        .fault("client never reads", series, async {
            let head = format!(
                "POST /flood HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\n\r\n{REQUEST}",
                REQUEST.len()
            );
            let client = raw_request(bench.proxy, &head).await;
            let stalled = stalled_at(&bench.flood_written).await;
            assert!(
                stalled < 64 << 20,
                "the upstream wrote {stalled} bytes to a client that reads nothing"
            );
            drop(client);
        })
        .await;

    // A 100 MiB event in the middle of a tool round goes through whole, and the round still
    // gets its events.
    let series = "toolpulse_streams_total{outcome=\"completed\"}";
    bench
        .fault("a 100 MiB event", series, async {
            let (status, out) = post_status(bench.url("/huge-event")).await;
            assert_eq!(status, 200);
            let huge = text_event(HUGE_EVENT_BYTES);
            let at = memchr::memmem::find(&out, &huge[..64]).expect("the huge event");
            assert_eq!(
                &out[at..at + huge.len()],
                &huge[..],
                "the huge event is intact"
            );
            let tail = String::from_utf8_lossy(&out[at + huge.len()..]);
            assert!(
                tail.contains("response.web_search_call.completed"),
                "{tail}"
            );
        })
        .await;

    // A line that never ends, full of NULs and invalid UTF-8, mid tool round: forwarded byte
    // for byte (as an oversize event, never buffered whole), and the stream still ends cleanly.
    bench
        .fault("a never-ending line", series, async {
            let (status, out) = post_status(bench.url("/endless-line")).await;
            assert_eq!(status, 200);
            let input = endless_line_input();
            let max = toolpulse::Config::default().limits.max_event_bytes;
            invariants::check(&input, &out, max).expect("the invariants hold");
            assert!(
                out.ends_with(&input[input.len() - 4096..]),
                "the line's end is forwarded"
            );
        })
        .await;

    // The client sends its request body in slow pieces: the upstream gets all of it.
    let (_, idle) = tokio::sync::mpsc::unbounded_channel();
    let mut requests = std::mem::replace(&mut bench.gateway.requests, idle);
    while requests.try_recv().is_ok() {}
    bench
        .fault("client sends its body slowly", series, async {
            let head = "POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
                        transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
            let mut client = raw_request(bench.proxy, head).await;
            let mut sent = Vec::new();
            for i in 0..10 {
                let piece = format!("{{\"piece\":{i}}}");
                sent.extend_from_slice(piece.as_bytes());
                client
                    .write_all(&chunked(piece.as_bytes()))
                    .await
                    .expect("write");
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            client.write_all(b"0\r\n\r\n").await.expect("write");
            let mut answer = Vec::new();
            client.read_to_end(&mut answer).await.expect("read");
            let answer = String::from_utf8_lossy(&answer);
            assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
            assert!(answer.contains("response.completed"), "{answer}");
            let seen = requests.recv().await.expect("the request");
            assert_eq!(seen.target, "/echo");
            assert_eq!(seen.body, sent, "the upstream got the whole body");
        })
        .await;
}

/// Waits until the flooding gateway has written nothing for half a second; returns how much
/// it wrote.
async fn stalled_at(written: &AtomicU64) -> u64 {
    let mut last = u64::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = written.load(Ordering::Relaxed);
        assert!(now < FLOOD_BYTES as u64, "the whole flood went through");
        if now == last {
            return now;
        }
        last = now;
    }
}
