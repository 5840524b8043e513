//! A scripted upstream gateway for the end-to-end tests, on raw TCP so a test controls every
//! byte and every pause: it records each request, then plays the reply the test's handler
//! returns — chunks, pauses, waits for a signal from the test, an abrupt close.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};

/// What the gateway saw of one request.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query, as on the request line.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Which connection it came on: 1 for the first the gateway accepted, and so on.
    pub connection: u64,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub enum Action {
    /// One chunk of a chunked body.
    Chunk(Vec<u8>),
    /// Bytes written as they are (for non-chunked bodies and broken peers).
    Raw(Vec<u8>),
    Sleep(Duration),
    /// Waits until the test signals.
    Wait(Arc<Notify>),
    /// Waits (at most the given time) until the proxy closes the connection; reports it.
    WaitForClose(Duration),
    /// The last chunk; the connection stays open for the next request.
    End,
    /// Drops the connection at once, mid-body.
    Close,
    /// Shuts the connection's write side (FIN) and goes on reading: a request the peer still
    /// sends on it is recorded (then its reply cannot be written, and the connection drops).
    HalfClose,
    /// Resets the connection (RST, not FIN), mid-body.
    Reset,
    /// Notes the wall-clock time now (before the next action), for tests that compare it with
    /// timestamps the proxy reports.
    Stamp(Arc<std::sync::Mutex<Vec<std::time::SystemTime>>>),
    /// Writes `chunk` (raw) `times` times, adding each write's size to `written`; stops when
    /// the peer goes away.
    Flood {
        chunk: Vec<u8>,
        times: usize,
        written: Arc<AtomicU64>,
    },
}

pub struct Reply {
    /// Status line and headers, without the blank line; empty for none at all.
    pub head: String,
    pub actions: Vec<Action>,
}

impl Reply {
    /// A chunked `text/event-stream` reply sending `chunks` and ending normally.
    pub fn sse(chunks: Vec<Vec<u8>>) -> Self {
        let mut actions: Vec<Action> = chunks.into_iter().map(Action::Chunk).collect();
        actions.push(Action::End);
        Reply {
            head:
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked"
                    .into(),
            actions,
        }
    }
}

/// Blocks of `name` up to the tool's output, then a wait for `release`, then the rest.
pub fn held_reply(
    name: &str,
    release: Arc<Notify>,
) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    let (before, after) = blocks_around_output(name);
    move |_| held(&before, &release, &after)
}

/// The SSE blocks of fixture `name`: those before its tool's output, and the rest.
pub fn blocks_around_output(name: &str) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut blocks = super::blocks(&super::read(&super::fixtures_dir().join(name)));
    let at = blocks
        .iter()
        .position(|b| String::from_utf8_lossy(b).contains("\"type\":\"function_call_output\""))
        .expect("an output");
    let after = blocks.split_off(at);
    (blocks, after)
}

/// An SSE reply of `before`, then a wait for `release`, then `after`.
pub fn held(before: &[Vec<u8>], release: &Arc<Notify>, after: &[Vec<u8>]) -> Reply {
    let mut actions: Vec<Action> = before.iter().cloned().map(Action::Chunk).collect();
    actions.push(Action::Wait(release.clone()));
    actions.extend(after.iter().cloned().map(Action::Chunk));
    actions.push(Action::End);
    Reply {
        head: Reply::sse(vec![]).head,
        actions,
    }
}

/// How long a wait for an event may last before the test calls it lost (a hang guard, not a
/// deadline: the events waited for come in milliseconds).
pub const HANG_GUARD: Duration = Duration::from_secs(120);

pub struct Gateway {
    pub addr: SocketAddr,
    pub requests: mpsc::UnboundedReceiver<Recorded>,
    /// One message per connection the proxy closed during `WaitForClose`.
    pub closed: mpsc::UnboundedReceiver<()>,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicU64>,
}

impl Gateway {
    pub async fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Gateway {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (req_tx, requests) = mpsc::unbounded_channel();
        let (closed_tx, closed) = mpsc::unbounded_channel();
        let handler = Arc::new(handler);
        let accepted = Arc::new(AtomicU64::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let connection = counter.fetch_add(1, Ordering::Relaxed) + 1;
                let (handler, req_tx, closed_tx) =
                    (handler.clone(), req_tx.clone(), closed_tx.clone());
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    while let Some(mut request) = read_request(&mut stream).await {
                        request.connection = connection;
                        let reply = handler(&request);
                        let _ = req_tx.send(request);
                        if !play(stream.get_mut(), reply, &closed_tx).await {
                            return;
                        }
                    }
                });
            }
        });
        Gateway {
            addr,
            requests,
            closed,
            accepted,
        }
    }

    /// Waits until the gateway saw the proxy close a connection held by `WaitForClose`. The
    /// wait is for that event: the bound only keeps a lost close from hanging the test run,
    /// and is far beyond what a loaded machine takes (the gateway's own wait is `HANG_GUARD`
    /// as well, so it reports a close whenever it comes).
    pub async fn saw_close(&mut self) {
        let started = std::time::Instant::now();
        let closed = tokio::time::timeout(HANG_GUARD, self.closed.recv()).await;
        assert!(
            matches!(closed, Ok(Some(()))),
            "the gateway saw no close in {:?}",
            started.elapsed()
        );
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests recorded before a marker (`GET /v1/models?marker`) sent now through
    /// `proxy`: an absence check with a positive event. The gateway records a request before it
    /// replies, and the proxy answers a client only after the gateway replied, so whatever an
    /// earlier, answered client request made the proxy forward is in the list.
    pub async fn requests_before_marker(&mut self, proxy: SocketAddr) -> Vec<Recorded> {
        let target = "/v1/models?marker";
        let request = http::Request::get(format!("http://{proxy}{target}"))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .expect("request");
        let response = super::http_client().request(request);
        tokio::time::timeout(Duration::from_secs(60), response)
            .await
            .expect("the marker answered in time")
            .expect("the marker answered");
        let mut before = Vec::new();
        loop {
            let next = tokio::time::timeout(Duration::from_secs(60), self.requests.recv());
            let request = next.await.expect("the marker in time").expect("recorded");
            if request.target == target {
                return before;
            }
            before.push(request);
        }
    }
}

/// Plays a reply; returns whether the connection can serve another request.
async fn play(stream: &mut TcpStream, reply: Reply, closed: &mpsc::UnboundedSender<()>) -> bool {
    // An empty head sends nothing: for peers that break before their response.
    if !reply.head.is_empty()
        && stream
            .write_all(format!("{}\r\n\r\n", reply.head).as_bytes())
            .await
            .is_err()
    {
        return false;
    }
    for action in reply.actions {
        let written = match action {
            Action::Chunk(bytes) => {
                let mut framed = format!("{:x}\r\n", bytes.len()).into_bytes();
                framed.extend_from_slice(&bytes);
                framed.extend_from_slice(b"\r\n");
                stream.write_all(&framed).await
            }
            Action::Raw(bytes) => stream.write_all(&bytes).await,
            Action::Sleep(d) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
            Action::Wait(notify) => {
                notify.notified().await;
                Ok(())
            }
            Action::WaitForClose(limit) => {
                let mut buf = [0u8; 64];
                if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(limit, stream.read(&mut buf)).await
                {
                    let _ = closed.send(());
                }
                return false;
            }
            Action::Stamp(stamps) => {
                let now = std::time::SystemTime::now();
                stamps.lock().unwrap_or_else(|e| e.into_inner()).push(now);
                Ok(())
            }
            Action::End => return stream.write_all(b"0\r\n\r\n").await.is_ok(),
            Action::Close => return false,
            Action::HalfClose => return stream.shutdown().await.is_ok(),
            Action::Reset => {
                let _ = stream.set_zero_linger();
                return false;
            }
            Action::Flood {
                chunk,
                times,
                written,
            } => {
                for _ in 0..times {
                    if stream.write_all(&chunk).await.is_err() {
                        return false;
                    }
                    written.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
                Ok(())
            }
        };
        if written.is_err() {
            return false;
        }
    }
    false
}

async fn read_request(stream: &mut BufReader<TcpStream>) -> Option<Recorded> {
    let mut line = String::new();
    stream.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let mut request = Recorded {
        method,
        target,
        headers,
        body: Vec::new(),
        connection: 0,
    };
    if let Some(len) = request
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        request.body = vec![0; len];
        stream.read_exact(&mut request.body).await.ok()?;
    } else if request
        .header("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            stream.read_line(&mut size).await.ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            stream.read_exact(&mut chunk).await.ok()?;
            if size == 0 {
                break;
            }
            request.body.extend_from_slice(&chunk[..size]);
        }
    }
    Some(request)
}
