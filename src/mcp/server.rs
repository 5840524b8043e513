//! The MCP listener: accepts up to `[mcp] max_connections` connections (HTTP/1.1 and HTTP/2;
//! more are answered 503 and closed), hands each request to
//! [`Front::handle`]; on shutdown it stops accepting, ends the GET streams at once (they only
//! wait for server messages, and the gateway resumes them) and gives answers to calls the drain
//! time before ending them too.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::Front;
use crate::proxy::server::{accept, reject};

/// A client gets this long to send its request head (slowloris protection).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// After the drain time ended the answers, how long their last bytes may take to go out.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The connections still open when the listener stopped accepting.
pub struct Connections(GracefulShutdown);

impl Connections {
    /// Waits up to `timeout` for the open answers to finish, then ends them. Returns whether
    /// all finished in time.
    pub async fn drain(self, timeout: Duration, front: &Front) -> bool {
        front.stop_streams.cancel();
        let all_closed = self.0.shutdown();
        tokio::pin!(all_closed);
        if tokio::time::timeout(timeout, &mut all_closed).await.is_ok() {
            return true;
        }
        tracing::warn!(?timeout, "drain timeout: ending the MCP answers still open");
        front.end_streams.cancel();
        tokio::time::timeout(FLUSH_TIMEOUT, all_closed)
            .await
            .is_ok()
    }
}

/// Serves until `shutdown` completes, then stops accepting and returns the open connections.
pub async fn serve(
    listener: TcpListener,
    front: Arc<Front>,
    shutdown: impl Future<Output = ()>,
) -> Connections {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let limit = Arc::new(Semaphore::new(front.config.max_connections));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener, "mcp") => accepted,
            () = &mut shutdown => return Connections(graceful),
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            front.metrics.mcp_connections_rejected.inc();
            tokio::spawn(reject(stream));
            continue;
        };
        let service_front = front.clone();
        let service = service_fn(move |request| {
            let front = service_front.clone();
            async move { Ok::<_, Infallible>(front.handle(request, peer).await) }
        });
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "MCP connection ended with an error");
            }
            drop(permit);
        });
    }
}
