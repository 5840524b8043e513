//! The listener: accepts connections (TCP_NODELAY), serves HTTP/1.1 and HTTP/2
//! ([`crate::net::listen`]) and hands each request to [`Proxy::handle`]. It bounds what one process takes
//! on: at most `max_connections` connections (past them, the oldest connection without a
//! request in flight is closed to admit a new one, [`crate::net::listen::slots`]; when every one
//! has a request in flight, the new one is answered 503 and closed), request heads
//! up to `max_header_bytes`, and what every listener bounds ([`crate::net::listen`]: timeouts for
//! heads, idle connections and HTTP/2 peers, concurrent HTTP/2 streams). On shutdown it stops
//! accepting and returns the open [`Connections`], which the caller drains.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};

use super::budget::Listener;
use crate::metrics::{ConnectionClose, Listener as Served};
use crate::net::listen::activity::Activity;
use crate::net::listen::slots::{Admit, Slots};
use crate::net::listen::{self, Shutdown};
use crate::proxy::Proxy;
use crate::proxy::error::ProxyError;

/// After a failed accept (e.g. out of file descriptors), wait this long before the next one.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);
/// A connection turned away for overload gets this long to read its 503.
const REJECT_TIMEOUT: Duration = Duration::from_secs(5);
/// After the drain timeout ended the streams, how long their last bytes may take to go out.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The connections still open when the server stopped accepting.
pub struct Connections(Shutdown);

impl Connections {
    /// Asks every connection to finish (HTTP/1 closes after its response, HTTP/2 sends GOAWAY)
    /// and waits up to `timeout`; then ends the streams still running (their open calls get
    /// terminal events) and waits briefly for those last bytes. Returns whether all finished.
    pub async fn drain(self, timeout: Duration, proxy: &Proxy) -> bool {
        let all_closed = self.0.drain();
        tokio::pin!(all_closed);
        if tokio::time::timeout(timeout, &mut all_closed).await.is_ok() {
            return true;
        }
        tracing::warn!(?timeout, "drain timeout: ending the streams still running");
        proxy.end_streams();
        tokio::time::timeout(FLUSH_TIMEOUT, all_closed)
            .await
            .is_ok()
    }
}

/// Serves until `shutdown` completes, then stops accepting and returns the open connections.
pub async fn serve(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: impl Future<Output = ()>,
) -> Connections {
    let config = proxy.config();
    let limits = Arc::new(config.clients.clone());
    let builder = listen::builder(&limits, Some(config.proxy.max_header_bytes));
    let slots = Arc::new(Slots::new(config.proxy.max_connections));
    let connections = Shutdown::default();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener, "proxy") => accepted,
            () = &mut shutdown => return Connections(connections),
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
        let activity = Activity::new(Instant::now());
        let Some(slot) = admit(&slots, &activity, proxy.metrics(), Served::Proxy) else {
            proxy.metrics().connections_rejected.inc();
            tokio::spawn(reject(stream));
            continue;
        };
        let (proxy, builder, limits) = (proxy.clone(), builder.clone(), limits.clone());
        let watch = connections.clone();
        connections.spawn(async move {
            let metrics = proxy.metrics().clone();
            metrics.connections_active.inc();
            let budget = proxy.body_budget().connection(Listener::Proxy, peer.ip());
            let handle = move |request| {
                let (proxy, budget) = (proxy.clone(), budget.clone());
                async move { proxy.handle(request, peer, &budget).await }
            };
            let served = listen::serve(&builder, stream, &watch, &limits, activity, handle);
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
    metrics: &crate::metrics::Metrics,
    listener: Served,
) -> Option<crate::net::listen::slots::Slot> {
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

/// Answers every request on an over-limit connection with 503, then closes it.
pub(crate) async fn reject(stream: TcpStream) {
    let service = service_fn(|_request| async {
        let message = "too many connections; retry later";
        Ok::<_, Infallible>(ProxyError::Overloaded.response(message))
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().keep_alive(false);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    let _ = tokio::time::timeout(REJECT_TIMEOUT, connection).await;
}
