//! The MCP listener: accepts up to `[mcp] max_connections` connections (HTTP/1.1 and HTTP/2;
//! past them the oldest without a request in flight is closed to admit a new one, and when
//! every one has a request in flight the new one is answered 503 and closed) under what every listener bounds ([`crate::net::listen`]),
//! hands each request to
//! [`Front::handle`]; on shutdown it stops accepting, ends the GET streams at once (they only
//! wait for server messages, and the gateway resumes them) and gives answers to calls the drain
//! time before ending them too.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

use super::calls::Share;
use super::front::Front;
use crate::metrics::Listener;
use crate::net::listen::activity::Activity;
use crate::net::listen::slots::Slots;
use crate::net::listen::{self, Shutdown};
use crate::net::server::{accept, admit, reject};

/// After the drain time ended the answers, how long their last bytes may take to go out.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The connections still open when the listener stopped accepting.
pub struct Connections(Shutdown);

impl Connections {
    /// Waits up to `timeout` for the open answers to finish, then ends them. Returns whether
    /// all finished in time.
    pub async fn drain(self, timeout: Duration, front: &Front) -> bool {
        front.stop_streams.cancel();
        let all_closed = self.0.drain();
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
    let limits = Arc::new(front.clients.clone());
    let builder = listen::builder(&limits, None);
    let slots = Arc::new(Slots::new(front.config.max_connections));
    let connections = Shutdown::default();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener, "mcp") => accepted,
            () = &mut shutdown => return Connections(connections),
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
        let activity = Activity::new(Instant::now());
        let Some(slot) = admit(&slots, &activity, &front.metrics, Listener::Mcp) else {
            front.metrics.mcp_connections_rejected.inc();
            tokio::spawn(reject(stream));
            continue;
        };
        let (front, builder, limits) = (front.clone(), builder.clone(), limits.clone());
        let watch = connections.clone();
        connections.spawn(async move {
            let metrics = front.metrics.clone();
            let share = Arc::new(Share::default());
            let budget = front.connection_budget(peer);
            let handle = move |request| {
                let (front, share, budget) = (front.clone(), share.clone(), budget.clone());
                async move { front.handle(request, peer, &share, &budget).await }
            };
            // Pinned in place: moved into `slot.serve` it would be stored twice in this task.
            let served = std::pin::pin!(listen::serve(
                &builder, stream, &watch, &limits, activity, handle
            ));
            // Evicted (`None`): dropping the connection closed it, wherever it stood.
            let Some((closed, result)) = slot.serve(served).await else {
                return;
            };
            if let Err(error) = result {
                tracing::debug!(%error, %peer, "MCP connection ended with an error");
            }
            if let Some(closed) = closed {
                metrics.connection_closed(Listener::Mcp, closed.reason());
            }
        });
    }
}
