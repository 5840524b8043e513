//! The progress bus: the registry of open calls and the delivery of progress shared by several
//! replicas through Redis (or Valkey), for `[progress] bus`.
//!
//! Each replica keeps its streams in its own in-process registry ([`LocalHub`]), which tells
//! the [`registrar`] of every call that opens or closes; the registrar mirrors them into Redis
//! (trace id, name, a digest of the arguments, replica, stream, call id; a TTL refreshed while
//! the call is open). A replica that receives progress (the MCP front, `POST /v1/progress`)
//! looks the call up across all replicas with one atomic script ([`scripts`]), applying the
//! ambiguity rule globally, and sends the report to the owning replica's channel ([`outbox`]);
//! each replica's [`subscriber`] hands what arrives on its channel to the stream's inbox. An MCP
//! call that arrives before its stream shows the call waits in Redis, and the replica whose
//! stream opens the call claims it in the same script that registers the call.
//!
//! Redis is touched when a call opens or closes and when progress arrives, never per forwarded
//! event; nothing a stream's task does waits for it. When Redis is down or slow ([`link`]),
//! reports are matched on this replica only, and only exactly (a `call_id`, or a trace id).

pub mod bindings;
pub mod keys;
pub mod link;
pub mod outbox;
pub mod registrar;
pub mod scripts;
mod shared;
pub mod subscriber;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::local::LocalHub;
use super::{BindingId, Delivery, McpToolCall, PostFuture, Progress, ProgressHub, Target};
use crate::config::BusConfig;
use crate::metrics::{BusOp, Metrics};
use bindings::{Bindings, State};
use link::Link;
use outbox::Outbox;
use registrar::{Changes, Registrar};
use shared::Shared;

/// Bind lookups running at once; an MCP call beyond it is decided locally (exact matches only)
/// and counted, rather than queued behind a slow Redis.
pub const MAX_LOOKUPS_IN_FLIGHT: usize = 256;

/// The hub of a replica that shares its registry through Redis.
pub struct BusHub {
    shared: Arc<Shared>,
}

impl BusHub {
    /// Starts the bus's tasks (registrar, publisher, subscriber) on the current runtime. Redis
    /// need not be reachable: the hub works locally until it is.
    pub fn start(
        bus: &BusConfig,
        bind_window: Duration,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Arc<BusHub>> {
        let link = Link::new(bus.url.expose(), &bus.prefix, metrics)
            .map_err(|e| anyhow::anyhow!("[progress] bus: {e}"))?;
        let link = Arc::new(link);
        let (changes, receiver) = Changes::new(link.clone());
        let local = LocalHub::observed(bind_window, Arc::new(changes));
        let outbox = Arc::new(Outbox::default());
        let shared = Arc::new(Shared {
            local,
            link: link.clone(),
            bindings: Bindings::default(),
            outbox: outbox.clone(),
            bind_window,
            next_id: AtomicU64::new(1),
            lookups: Arc::new(Semaphore::new(MAX_LOOKUPS_IN_FLIGHT)),
        });
        tokio::spawn(Registrar::new(link.clone(), receiver).run());
        tokio::spawn(outbox.publish(link));
        tokio::spawn(subscriber::run(shared.clone()));
        tracing::info!(
            bus = %bus.url,
            prefix = %bus.prefix,
            replica = %shared.link.replica,
            "progress bus configured"
        );
        Ok(Arc::new(BusHub { shared }))
    }

    /// The in-process registry the proxy registers this replica's streams in.
    pub fn streams(&self) -> Arc<LocalHub> {
        self.shared.local.clone()
    }

    /// The connection to Redis, shared with the store of hosted pairs.
    pub fn link(&self) -> Arc<Link> {
        self.shared.link.clone()
    }

    /// This replica's id in the registry.
    pub fn replica(&self) -> &str {
        &self.shared.link.replica
    }

    /// Whether Redis answers now.
    pub fn is_up(&self) -> bool {
        self.shared.link.is_up()
    }

    /// Waits for the first answer from Redis, up or down, for at most `limit`: a replica that
    /// served a first turn before its link was up would store that turn's hosted pairs on
    /// itself only, and a next turn reaching another replica would be refused. Whether the
    /// bus is up once the wait ends.
    pub async fn settled(&self, limit: Duration) -> bool {
        let _ = tokio::time::timeout(limit, self.shared.link.settled()).await;
        self.is_up()
    }
}

impl ProgressHub for BusHub {
    fn bind(&self, call: McpToolCall) -> BindingId {
        let shared = &self.shared;
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        if !shared.link.is_up() {
            shared.bind_locally(id, call);
            return BindingId(id);
        }
        let Ok(permit) = shared.lookups.clone().try_acquire_owned() else {
            shared.link.count_error(BusOp::Bind, 1);
            shared.bind_locally(id, call);
            return BindingId(id);
        };
        let looking = State::Looking {
            call: call.clone(),
            newest: None,
        };
        if shared.bindings.insert(id, looking) {
            let shared = shared.clone();
            tokio::spawn(async move {
                shared.look_up(id, call).await;
                drop(permit);
            });
        }
        BindingId(id)
    }

    fn progress(&self, binding: BindingId, report: Progress) -> Delivery {
        self.shared.send(binding.0, report)
    }

    fn release(&self, binding: BindingId) {
        if let Some(State::Local(local)) = self.shared.bindings.remove(binding.0) {
            self.shared.local.release(local);
        }
    }

    fn post(&self, target: Target, report: Progress) -> PostFuture<'_> {
        Box::pin(self.shared.post(target, report))
    }
}
