//! The admin listener, on its own address so no gateway path is shadowed: `/healthz` (the
//! process is alive), `/readyz` (503 while starting or draining), `/metrics` (Prometheus text).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::metrics::Metrics;
use crate::proxy::server::accept;

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

    fn answer(&self, request: &Request<Incoming>) -> Response<Full<Bytes>> {
        let text = |status: StatusCode, body: String, content_type: &'static str| {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            *response.status_mut() = status;
            let value = header::HeaderValue::from_static(content_type);
            response.headers_mut().insert(header::CONTENT_TYPE, value);
            response
        };
        let plain = "text/plain; charset=utf-8";
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

/// Serves the admin endpoints until `shutdown` completes.
pub async fn serve(listener: TcpListener, admin: Arc<Admin>, shutdown: impl Future<Output = ()>) {
    let builder = auto::Builder::new(TokioExecutor::new());
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = accept(&listener, "admin") => accepted,
            () = &mut shutdown => return,
        };
        let admin = admin.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let response = admin.answer(&request);
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
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
