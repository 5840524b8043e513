//! The proxy listener: accepts connections (TCP_NODELAY), serves HTTP/1.1 and HTTP/2 (`listen`)
//! and hands each request to its [`Service`], the proxy. It bounds what one process takes on:
//! at most `max_connections` connections (past them, the oldest connection without a request
//! in flight is closed to admit a new one, `listen::slots`; when every one has a request in
//! flight, the new one is answered 503 and closed), request heads up to `max_header_bytes`, and
//! what every listener bounds (`listen`: timeouts for heads, idle connections and HTTP/2 peers,
//! concurrent HTTP/2 streams). On shutdown it stops accepting and returns the open
//! [`Connections`], which the caller drains. The MCP front's listener accepts, admits and
//! rejects with the same functions.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};

use super::budget::{BodyBudget, Listener};
use crate::config::Config;
use crate::metrics::{ConnectionClose, Listener as Served, Metrics};
use crate::net::listen::activity::Activity;
use crate::net::listen::slots::{Admit, Slot, Slots};
use crate::net::listen::{self, ClientBody, Shutdown};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// After a failed accept (e.g. out of file descriptors), wait this long before the next one.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);
/// A connection turned away for overload gets this long to read its 503.
const REJECT_TIMEOUT: Duration = Duration::from_secs(5);
/// After the drain timeout ended the streams, how long their last bytes may take to go out.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// What the proxy listener serves: the proxy implements it, so that the listener need not
/// name it.
pub trait Service: Send + Sync + 'static {
    type Body: Body<Data = Bytes, Error: Into<BoxError>> + Send + Unpin + 'static;

    /// The config new connections are served under.
    fn config(&self) -> Arc<Config>;

    fn metrics(&self) -> &Arc<Metrics>;

    /// The budget of request bodies read whole, which each connection draws on.
    fn body_budget(&self) -> &BodyBudget;

    /// Answers a request from `peer`, whose connection's bodies are held within `budget`.
    fn handle(
        &self,
        request: Request<ClientBody>,
        peer: SocketAddr,
        budget: &BodyBudget,
    ) -> impl Future<Output = Response<Self::Body>> + Send;

    /// Ends the streams still running: their open calls get terminal events.
    fn end_streams(&self);
}

/// The connections still open when the server stopped accepting.
pub struct Connections<S> {
    open: Shutdown,
    service: Arc<S>,
}

impl<S: Service> Connections<S> {
    /// Asks every connection to finish (HTTP/1 closes after its response, HTTP/2 sends GOAWAY)
    /// and waits up to `timeout`; then ends the streams still running (their open calls get
    /// terminal events) and waits briefly for those last bytes. Returns whether all finished.
    pub async fn drain(self, timeout: Duration) -> bool {
        let all_closed = self.open.drain();
        tokio::pin!(all_closed);
        if tokio::time::timeout(timeout, &mut all_closed).await.is_ok() {
            return true;
        }
        tracing::warn!(?timeout, "drain timeout: ending the streams still running");
        self.service.end_streams();
        tokio::time::timeout(FLUSH_TIMEOUT, all_closed)
            .await
            .is_ok()
    }
}

/// Serves until `shutdown` completes, then stops accepting and returns the open connections.
pub async fn serve<S: Service>(
    listener: TcpListener,
    service: Arc<S>,
    shutdown: impl Future<Output = ()>,
) -> Connections<S> {
    let config = service.config();
    let limits = Arc::new(config.clients.clone());
    let builder = listen::builder(&limits, Some(config.proxy.max_header_bytes));
    let slots = Arc::new(Slots::new(config.proxy.max_connections));
    let connections = Shutdown::default();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener, "proxy") => accepted,
            () = &mut shutdown => return Connections { open: connections, service },
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
        let activity = Activity::new(Instant::now());
        let Some(slot) = admit(&slots, &activity, service.metrics(), Served::Proxy) else {
            service.metrics().connections_rejected.inc();
            tokio::spawn(reject(stream));
            continue;
        };
        let (service, builder, limits) = (service.clone(), builder.clone(), limits.clone());
        let watch = connections.clone();
        connections.spawn(async move {
            let metrics = service.metrics().clone();
            metrics.connections_active.inc();
            let budget = service.body_budget().connection(Listener::Proxy, peer.ip());
            let handle = move |request| {
                let (service, budget) = (service.clone(), budget.clone());
                async move { service.handle(request, peer, &budget).await }
            };
            // Pinned in place: moved into `slot.serve` it would be stored twice in this task.
            let served = std::pin::pin!(listen::serve(
                &builder, stream, &watch, &limits, activity, handle
            ));
            // Evicted (`None`): dropping the connection closed it, wherever it stood.
            if let Some((closed, result)) = slot.serve(served).await {
                if let Err(error) = result {
                    tracing::debug!(%error, %peer, "client connection ended with an error");
                }
                if let Some(closed) = closed {
                    let reason = closed.reason();
                    tracing::debug!(%peer, reason = reason.as_str(), "client connection closed");
                    metrics.connection_closed(Served::Proxy, reason);
                }
            }
            metrics.connections_active.dec();
        });
    }
}

/// A place among `slots` for a new connection, counting the one it evicted; `None` when every
/// connection has a request in flight.
pub(crate) fn admit(
    slots: &Arc<Slots>,
    activity: &Arc<Activity>,
    metrics: &Metrics,
    listener: Served,
) -> Option<Slot> {
    match slots.admit(activity) {
        Admit::Refused => None,
        Admit::Taken(slot) => Some(slot),
        Admit::Evicted(slot) => {
            metrics.connection_closed(listener, ConnectionClose::Evicted);
            Some(slot)
        }
    }
}

/// The next connection on `listener`. A failed accept (e.g. out of file descriptors) is logged
/// and retried after a pause, never in a busy loop.
pub async fn accept(listener: &TcpListener, what: &str) -> (TcpStream, std::net::SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(error) => {
                tracing::warn!(%error, listener = what, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
            }
        }
    }
}

/// What a connection over `max_connections` is answered, OpenAI-style like the proxy's own
/// errors, so SDKs surface a readable `APIError`.
const OVERLOADED: &str = concat!(
    r#"{"error":{"message":"too many connections; retry later","#,
    r#""type":"proxy_error","code":"overloaded"}}"#,
);

/// Answers every request on an over-limit connection with 503, then closes it.
pub(crate) async fn reject(stream: TcpStream) {
    let service = service_fn(|_request| async {
        let mut response = Response::new(Full::new(Bytes::from_static(OVERLOADED.as_bytes())));
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        let json = HeaderValue::from_static("application/json");
        response.headers_mut().insert(header::CONTENT_TYPE, json);
        Ok::<_, Infallible>(response)
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().keep_alive(false);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    let _ = tokio::time::timeout(REJECT_TIMEOUT, connection).await;
}

#[cfg(test)]
mod tests {
    use super::OVERLOADED;

    #[test]
    fn the_overload_answer_is_an_openai_style_error() {
        let answer: serde_json::Value = serde_json::from_str(OVERLOADED).expect("JSON");
        let error = &answer["error"];
        assert_eq!(error["message"], "too many connections; retry later");
        assert_eq!(error["type"], "proxy_error");
        assert_eq!(error["code"], "overloaded");
    }
}
