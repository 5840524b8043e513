//! The proxy's upstream client, built so that one stream is one task.
//!
//! An HTTP/1.1 upstream connection has no task of its own: the request future drives it until
//! the response head arrives, then the response body ([`UpstreamBody`]) drives it from its
//! `poll_frame`. Reading from the gateway, rewriting and writing to the client then happen in
//! the client connection's task, on one wake-up, with no channel hop between two tasks (which is
//! what hyper-util's pooled client costs: a spawned task per connection, joined to the request
//! by hyper's body channel). A finished response hands its connection back to the [`pool`]
//! (bounded, with an idle timeout, checked for closure before reuse).
//!
//! An upstream that picks HTTP/2 in TLS's ALPN keeps today's shape: one connection shared by
//! all streams needs a task of its own to drive it. Its sender is kept and shared until the
//! connection closes.

mod body;
pub mod h1;
mod pool;

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use http::{Request, Response, Uri};
use hyper::client::conn::{http1, http2};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::{Connection as _, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tower_service::Service;

use super::request_body::RequestBody;
use crate::config::ProxyConfig;
pub use body::UpstreamBody;
use pool::{Idle, Pool};

type Io = MaybeHttpsStream<TokioIo<TcpStream>>;
/// Boxed: with TLS state it is ~1.8 KiB, and it moves between the pool and the bodies.
type Conn = Box<http1::Connection<Io, RequestBody>>;

/// Why a request got no response head.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection could be made (TCP, TLS).
    #[error("{0}")]
    Connect(String),
    /// The connection failed before the response head (closed, reset, not HTTP).
    #[error(transparent)]
    Request(#[from] hyper::Error),
    /// The connection closed before the request could be sent.
    #[error("the upstream connection closed")]
    Closed,
}

/// Connections to the one upstream of a proxy.
pub struct Upstream {
    connector: HttpsConnector<HttpConnector>,
    http1: http1::Builder,
    pool: Arc<Pool>,
    /// The shared connection, when the upstream chose HTTP/2.
    http2: Mutex<Option<http2::SendRequest<RequestBody>>>,
}

impl Upstream {
    pub fn new(config: &ProxyConfig) -> anyhow::Result<Upstream> {
        let mut http1 = http1::Builder::new();
        http1.max_buf_size(super::client::READ_BUF_MAX);
        Ok(Upstream {
            connector: super::client::connector(config)?,
            http1,
            pool: Arc::new(Pool::default()),
            http2: Mutex::new(None),
        })
    }

    /// Sends `request` (its URI absolute) and waits for the response head. Callers bound the
    /// wait (`header_timeout_ms`). A request that a pooled connection could not take (it had
    /// closed meanwhile) goes on another.
    pub async fn request(
        &self,
        mut request: Request<RequestBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        if let Some(sender) = self.shared_http2() {
            return send_http2(sender, request).await;
        }
        let uri = request.uri().clone();
        loop {
            let (idle, pooled) = match self.pool.take() {
                Some(idle) => (idle, true),
                None => match self.connect(&uri).await? {
                    Fresh::Http1(idle) => (idle, false),
                    Fresh::Http2(sender) => return send_http2(sender, request).await,
                },
            };
            match send_http1(idle, request, &self.pool).await {
                Ok(response) => return Ok(response),
                Err(NotSent {
                    request: Some(mut unsent),
                    ..
                }) if pooled => {
                    *unsent.uri_mut() = uri.clone();
                    request = unsent;
                }
                Err(NotSent { error, .. }) => return Err(error),
            }
        }
    }

    /// Idle HTTP/1 connections kept for reuse now.
    pub fn idle_connections(&self) -> usize {
        self.pool.len()
    }

    fn shared_http2(&self) -> Option<http2::SendRequest<RequestBody>> {
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
        let failed = |e: Box<dyn std::error::Error + Send + Sync>| {
            let mut text = error_chain(e.as_ref());
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
        let (sender, conn) = self.http1.handshake(io).await?;
        Ok(Fresh::Http1(Idle::new(sender, Box::new(conn))))
    }
}

enum Fresh {
    Http1(Idle),
    Http2(http2::SendRequest<RequestBody>),
}

/// A request that got no response head; `request` is back when it was never sent.
struct NotSent {
    error: UpstreamError,
    request: Option<Request<RequestBody>>,
}

async fn send_http2(
    mut sender: http2::SendRequest<RequestBody>,
    request: Request<RequestBody>,
) -> Result<Response<UpstreamBody>, UpstreamError> {
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    Ok(response.map(UpstreamBody::shared))
}

/// Sends `request` on an HTTP/1 connection, driving the connection until the response head is
/// in; the connection then goes with the response body.
async fn send_http1(
    idle: Idle,
    mut request: Request<RequestBody>,
    pool: &Arc<Pool>,
) -> Result<Response<UpstreamBody>, NotSent> {
    http1_form(&mut request);
    let Idle {
        mut sender,
        mut conn,
        ..
    } = idle;
    // A fresh connection, or one from the pool, becomes ready once driven.
    let ready = poll_fn(|cx| {
        if let Poll::Ready(ready) = sender.poll_ready(cx) {
            return Poll::Ready(ready.map_err(UpstreamError::from));
        }
        if drive(&mut conn, cx).is_ready() {
            return Poll::Ready(Err(UpstreamError::Closed));
        }
        sender.poll_ready(cx).map_err(UpstreamError::from)
    })
    .await;
    if let Err(error) = ready {
        return Err(NotSent {
            error,
            request: Some(request),
        });
    }
    let mut sending = std::pin::pin!(sender.try_send_request(request));
    let mut closed = false;
    let response = poll_fn(|cx| {
        if let Poll::Ready(response) = sending.as_mut().poll(cx) {
            return Poll::Ready(response);
        }
        if !closed && drive(&mut conn, cx).is_ready() {
            // The connection ended: the request's answer is an error now.
            closed = true;
            return sending.as_mut().poll(cx);
        }
        Poll::Pending
    })
    .await;
    let response = response.map_err(|mut e| NotSent {
        request: e.take_message(),
        error: e.into_error().into(),
    })?;
    let conn = (!closed).then_some(conn);
    let owned = body::Owned::new(sender, conn, pool.clone());
    Ok(response.map(|incoming| UpstreamBody::owned(incoming, owned)))
}

/// An HTTP/1 request names its target by path (origin form); `Host` is already set
/// ([`super::headers::prepare_request`]).
fn http1_form(request: &mut Request<RequestBody>) {
    let path = request.uri().path_and_query().cloned();
    *request.uri_mut() = path.map_or(Uri::from_static("/"), Uri::from);
}

/// Polls `conn`; ready when the connection has ended (its error is logged: the request or the
/// body it serves gets its own).
fn drive(conn: &mut Conn, cx: &mut std::task::Context<'_>) -> Poll<()> {
    Pin::new(conn).poll(cx).map(|ended| {
        if let Err(error) = ended {
            tracing::debug!(%error, "upstream connection ended with an error");
        }
    })
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
