//! The proxy's upstream client, built so that one stream is one task.
//!
//! An HTTP/1.1 upstream connection is read and written by toolpulse itself ([`h1`]): the
//! request future writes the request (its body an [`Outgoing`]) and reads the response head,
//! then the response body ([`UpstreamBody::H1`]) reads the connection from its `poll_frame`.
//! Reading from the gateway, rewriting and writing to the client then happen in the client
//! connection's task, on one wake-up, with no channel between two tasks and no buffer but the
//! read buffer. A finished response hands its connection back to the [`pool`] (bounded, with an
//! idle timeout, checked for closure before reuse).
//!
//! An upstream that picks HTTP/2 in TLS's ALPN goes through hyper: one connection shared by all
//! streams needs a task of its own to drive it. Its sender is kept and shared until the
//! connection closes.

pub mod body;
pub mod h1;
pub mod outgoing;
mod pool;

use std::future::poll_fn;
use std::sync::{Arc, Mutex};

use http::{Request, Response, Uri};
use hyper::client::conn::http2;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connection as _, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tower_service::Service;

use crate::config::ProxyConfig;
use crate::net::tls;
pub use body::UpstreamBody;
use h1::conn::{Connection, H1Error, NotSent};
pub use outgoing::Outgoing;
use pool::Pool;

/// Why a request got no response head.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection could be made (TCP, TLS).
    #[error("{0}")]
    Connect(String),
    /// The HTTP/2 connection failed before the response head.
    #[error(transparent)]
    Request(#[from] hyper::Error),
    /// The HTTP/1 exchange failed before the response head (closed, reset, not HTTP).
    #[error(transparent)]
    Exchange(#[from] H1Error),
}

/// Connections to the one upstream of a proxy.
pub struct Upstream {
    connector: HttpsConnector<HttpConnector>,
    pool: Arc<Pool<Connection>>,
    /// The shared connection, when the upstream chose HTTP/2.
    http2: Mutex<Option<http2::SendRequest<Outgoing>>>,
}

impl Upstream {
    pub fn new(config: &ProxyConfig) -> anyhow::Result<Upstream> {
        Ok(Upstream {
            connector: tls::connector(config)?,
            pool: Arc::new(Pool::default()),
            http2: Mutex::new(None),
        })
    }

    /// Sends `request` (its URI absolute) and waits for the response head. Callers bound the
    /// wait (`header_timeout_ms`). A request that a pooled connection could not take (it had
    /// closed meanwhile) goes on another.
    pub async fn request(
        &self,
        mut request: Request<Outgoing>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        if let Some(sender) = self.shared_http2() {
            return send_http2(sender, request).await;
        }
        loop {
            let (conn, pooled) = match self.pool.take() {
                Some(idle) => (idle.conn, true),
                None => match self.connect(request.uri()).await? {
                    Fresh::Http1(conn) => (conn, false),
                    Fresh::Http2(sender) => return send_http2(sender, request).await,
                },
            };
            match h1::conn::send(conn, request, &self.pool).await {
                Ok(response) => return Ok(response.map(UpstreamBody::H1)),
                Err(NotSent {
                    request: Some(unsent),
                    ..
                }) if pooled => request = unsent,
                Err(NotSent { error, .. }) => return Err(error.into()),
            }
        }
    }

    /// Idle HTTP/1 connections kept for reuse now.
    pub fn idle_connections(&self) -> usize {
        self.pool.len()
    }

    fn shared_http2(&self) -> Option<http2::SendRequest<Outgoing>> {
        let mut shared = self
            .http2
            .lock()
            .expect("never poisoned: no panics while held");
        if shared.as_ref().is_some_and(|s| s.is_closed()) {
            *shared = None;
        }
        shared.clone()
    }

    async fn connect(&self, uri: &Uri) -> Result<Fresh, UpstreamError> {
        // The address tried, said first: "connecting to gw:9000 (http://gw:9000/…): …".
        let scheme = uri.scheme_str().unwrap_or("http");
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let target = format!("{}:{port}", uri.host().unwrap_or_default());
        let failed = |e: Box<dyn std::error::Error + Send + Sync>| {
            let mut text = format!(
                "connecting to {target} ({scheme}): {}",
                error_chain(e.as_ref())
            );
            if answered_tls_with_plain_text(e.as_ref()) {
                text.push_str(NOT_TLS_HINT);
            }
            UpstreamError::Connect(text)
        };
        let mut connector = self.connector.clone();
        poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(failed)?;
        let io = connector.call(uri.clone()).await.map_err(failed)?;
        if io.connected().is_negotiated_h2() {
            let (sender, connection) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake(io)
                .await?;
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "upstream HTTP/2 connection ended with an error");
                }
            });
            *self.http2.lock().expect("never poisoned") = Some(sender.clone());
            return Ok(Fresh::Http2(sender));
        }
        Ok(Fresh::Http1(Connection::new(io.into())))
    }
}

enum Fresh {
    Http1(Box<Connection>),
    Http2(http2::SendRequest<Outgoing>),
}

async fn send_http2(
    mut sender: http2::SendRequest<Outgoing>,
    request: Request<Outgoing>,
) -> Result<Response<UpstreamBody>, UpstreamError> {
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    Ok(response.map(UpstreamBody::Shared))
}

/// What rustls' "received corrupt message of type InvalidContentType" means for an upstream.
const NOT_TLS_HINT: &str = " (the upstream does not speak TLS on this port: it answered the TLS \
     handshake with something else, most likely plain HTTP; try http:// instead of https://)";

/// Whether a failed connection is an `https://` upstream that answered the TLS handshake with
/// bytes that are not TLS records (rustls' `InvalidContentType`), as a plain HTTP server does.
fn answered_tls_with_plain_text(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(rustls::Error::InvalidMessage(message)) = e.downcast_ref::<rustls::Error>() {
            return *message == rustls::InvalidMessage::InvalidContentType;
        }
        // An io::Error's source() skips the error it wraps (hyper-rustls wraps tokio-rustls'
        // io::Error, which wraps rustls' error, in another): look inside it instead.
        next = match e.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    false
}

/// An error with its sources, on one line.
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}
