//! The admin listener, on its own address so no gateway path is shadowed: `/healthz` (the
//! process is alive), `/readyz` (503 while starting or draining), `/metrics` (Prometheus text).
//! At most `[admin] max_connections` connections ([`crate::net::listen::slots`]), under what every listener bounds
//! ([`crate::net::listen`]): a health probe gets through connections that hold the listener without
//! asking anything, and one turned away costs nothing lasting.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::net::listen::ClientBody;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use tokio::net::{TcpListener, TcpStream};

use crate::config::ClientLimits;
use crate::metrics::{ConnectionClose, Listener, Metrics};
use crate::net::listen::activity::Activity;
use crate::net::listen::slots::{Admit, Slots};
use crate::net::listen::{self, Shutdown};
use crate::net::server::accept;

/// At most this many reads (4 KiB each) drop what a refused client sent before the close.
const MAX_REFUSAL_READS: usize = 16;

/// What a connection turned away is sent, before it is closed at once.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: text/plain; charset=utf-8\r\ncontent-length: 38\r\nretry-after: 1\r\n\
connection: close\r\n\r\ntoo many admin requests; retry later\r\n";

/// What the admin endpoints report.
pub struct Admin {
    ready: AtomicBool,
    pub metrics: Arc<Metrics>,
}

impl Admin {
    /// Not ready until [`Admin::set_ready`].
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Admin {
            ready: AtomicBool::new(false),
            metrics,
        }
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    fn answer(&self, request: &Request<ClientBody>) -> Response<Full<Bytes>> {
        let text = |status: StatusCode, body: String, content_type: &'static str| {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            *response.status_mut() = status;
            let value = header::HeaderValue::from_static(content_type);
            response.headers_mut().insert(header::CONTENT_TYPE, value);
            response
        };
        let plain = "text/plain; charset=utf-8";
        if let Some(problem) = listen::host_problem(request.version(), request.headers()) {
            return text(StatusCode::BAD_REQUEST, format!("{problem}\n"), plain);
        }
        if !matches!(*request.method(), Method::GET | Method::HEAD) {
            return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into(), plain);
        }
        match request.uri().path() {
            "/healthz" => text(StatusCode::OK, "ok\n".into(), plain),
            "/readyz" if self.is_ready() => text(StatusCode::OK, "ready\n".into(), plain),
            "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n".into(), plain),
            "/metrics" => text(
                StatusCode::OK,
                self.metrics.encode(),
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            ),
            _ => text(
                StatusCode::NOT_FOUND,
                "try /healthz, /readyz or /metrics\n".into(),
                plain,
            ),
        }
    }
}

/// Serves the admin endpoints until `shutdown` completes, at most `max_connections` at once:
/// past them, the oldest connection without a request in flight is closed to admit the new
/// one; when every one has a request in flight, the new one is answered 503 and closed.
pub async fn serve(
    listener: TcpListener,
    admin: Arc<Admin>,
    limits: ClientLimits,
    max_connections: usize,
    shutdown: impl Future<Output = ()>,
) {
    let limits = Arc::new(limits);
    let builder = listen::builder(&limits, None);
    let slots = Arc::new(Slots::new(max_connections));
    let connections = Shutdown::default();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = accept(&listener, "admin") => accepted,
            () = &mut shutdown => return,
        };
        let activity = Activity::new(Instant::now());
        let (slot, evicted) = match slots.admit(&activity) {
            Admit::Refused => {
                admin.metrics.admin_connections_rejected.inc();
                refuse(stream);
                continue;
            }
            Admit::Taken(slot) => (slot, false),
            Admit::Evicted(slot) => (slot, true),
        };
        if evicted {
            admin
                .metrics
                .connection_closed(Listener::Admin, ConnectionClose::Evicted);
        }
        let (admin, builder, limits) = (admin.clone(), builder.clone(), limits.clone());
        let watch = connections.clone();
        tokio::spawn(async move {
            let metrics = admin.metrics.clone();
            let handle =
                move |request: Request<ClientBody>| std::future::ready(admin.answer(&request));
            // Pinned in place: moved into `slot.serve` it would be stored twice in this task.
            let served = std::pin::pin!(listen::serve(
                &builder, stream, &watch, &limits, activity, handle
            ));
            // Evicted: dropping the connection closes it, wherever it stands.
            let Some((closed, _)) = slot.serve(served).await else {
                return;
            };
            if let Some(closed) = closed {
                metrics.connection_closed(Listener::Admin, closed.reason());
            }
        });
    }
}

/// Answers 503 and closes at once, not waiting for the request: nothing of it is kept. What
/// the client already sent is read and dropped first, so the close is an end, not a reset
/// that could destroy the 503 before the client reads it.
fn refuse(stream: TcpStream) {
    // Best effort on a new socket, whose send buffer takes it whole.
    let _ = stream.try_write(REFUSAL);
    let mut discard = [0u8; 4096];
    for _ in 0..MAX_REFUSAL_READS {
        if !matches!(stream.try_read(&mut discard), Ok(n) if n > 0) {
            break;
        }
    }
}

/// `toolpulse health`: asks a running toolpulse's `/healthz` (for container health checks,
/// where images have no curl). Plain HTTP/1.0 over std's TcpStream: no runtime needed.
pub fn probe(addr: std::net::SocketAddr, timeout: std::time::Duration) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(b"GET /healthz HTTP/1.0\r\nHost: toolpulse\r\n\r\n")?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    anyhow::ensure!(
        head.starts_with(b"HTTP/1.") && &head[9..12] == b"200",
        "unhealthy: {}",
        String::from_utf8_lossy(&head)
    );
    Ok(())
}
