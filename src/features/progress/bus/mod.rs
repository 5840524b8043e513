//! The progress bus: the registry of open calls and the delivery of progress shared by several
//! replicas through Redis (or Valkey), for `[progress] bus` (issue 17).
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
pub mod subscriber;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::local::LocalHub;
use super::{BindingId, Delivery, McpToolCall, PostFuture, Progress, ProgressHub, Target};
use crate::config::BusConfig;
use crate::metrics::{BusOp, Metrics, ProgressSource};
use bindings::{Bindings, Decision, Route, State};
use keys::{MAX_MESSAGE_BYTES, Message, Owner, args_digest, replica_channel, trace_hex};
use link::Link;
use outbox::Outbox;
use registrar::{Changes, Registrar};
use scripts::Lookup;

/// Bind lookups running at once; an MCP call beyond it is decided locally (exact matches only)
/// and counted, rather than queued behind a slow Redis.
pub const MAX_LOOKUPS_IN_FLIGHT: usize = 256;

/// The hub of a replica that shares its registry through Redis.
pub struct BusHub {
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    local: Arc<LocalHub>,
    link: Arc<Link>,
    bindings: Bindings,
    outbox: Arc<Outbox>,
    bind_window: Duration,
    next_id: AtomicU64,
    lookups: Arc<Semaphore>,
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
}

impl Shared {
    /// Binds `id` in the in-process registry, by trace id only.
    fn bind_locally(&self, id: u64, call: McpToolCall) {
        let local = self.local.bind_exact(call);
        if !self.bindings.insert(id, State::Local(local)) {
            self.local.release(local);
        }
    }

    async fn look_up(&self, id: u64, call: McpToolCall) {
        let link = &self.link;
        let window_ms = self.bind_window.as_millis() as u64;
        let mut invocation = link.scripts.bind.prepare_invoke();
        invocation
            .arg(&link.prefix)
            .arg(&link.replica)
            .arg(id)
            .arg(&call.function_name)
            .arg(args_digest(&link.prefix, &call.arguments))
            .arg(trace_hex(call.trace_id))
            .arg(window_ms);
        let mut conn = link.conn();
        let reply: Option<Vec<String>> = link
            .run(BusOp::Bind, invocation.invoke_async(&mut conn))
            .await;
        let decision = match reply.as_deref().and_then(Lookup::read) {
            Some(Lookup::One(owner)) => Decision::One(owner),
            Some(Lookup::Ambiguous) => Decision::Ambiguous,
            Some(Lookup::Wait | Lookup::None) => Decision::Wait(self.bind_window),
            None => Decision::Fallback,
        };
        self.decide(id, decision);
    }

    /// Records a decision for binding `id` and delivers the report it kept meanwhile.
    fn decide(&self, id: u64, decision: Decision) {
        let decided = self.bindings.decide(id, decision, &self.link.replica);
        if let Some(call) = decided.fallback {
            let local = self.local.bind_exact(call);
            if !self.bindings.set_local(id, local) {
                self.local.release(local);
                return;
            }
        }
        if let Some(report) = decided.newest {
            self.send(id, report);
        }
    }

    fn send(&self, id: u64, report: Progress) -> Delivery {
        let (route, report) = self.bindings.route(id, report);
        let Some(report) = report else {
            return match route {
                Route::Done(delivery) => delivery,
                _ => Delivery::Waiting,
            };
        };
        match route {
            Route::Here(stream, call_id) => self.local.deliver(stream, &call_id, report),
            Route::There(owner) => {
                if self.outbox.put(id, &owner, report) {
                    return Delivery::Delivered;
                }
                self.link.count_error(BusOp::Publish, 1);
                Delivery::Unmatched
            }
            Route::Local(local) => self.local.progress(local, report),
            Route::Kept => Delivery::Waiting,
            Route::Done(delivery) => delivery,
        }
    }

    async fn post(&self, target: Target, report: Progress) -> Delivery {
        let link = &self.link;
        if !link.is_up() {
            return self.local.post_exact(target, report);
        }
        let mut invocation = link.scripts.find.prepare_invoke();
        invocation.arg(&link.prefix);
        match &target {
            Target::CallId(call_id) => invocation.arg("call").arg(call_id),
            Target::Tool { name, arguments } => {
                let digest = arguments.as_ref().map(|a| args_digest(&link.prefix, a));
                invocation
                    .arg("tool")
                    .arg(name)
                    .arg(digest.unwrap_or_default())
            }
        };
        let mut conn = link.conn();
        let reply: Option<Vec<String>> = link
            .run(BusOp::Find, invocation.invoke_async(&mut conn))
            .await;
        match reply.as_deref().and_then(Lookup::read) {
            Some(Lookup::One(owner)) if owner.replica == link.replica => {
                self.local.deliver(owner.stream, &owner.call_id, report)
            }
            Some(Lookup::One(owner)) => self.publish(&owner, report).await,
            Some(Lookup::Ambiguous) => Delivery::Ambiguous,
            // Not registered (yet: this replica's registrar may not have sent it) or the bus
            // failed: what this replica can tell exactly.
            _ => self.local.post_exact(target, report),
        }
    }

    /// One report to another replica now; delivered when that replica is listening.
    async fn publish(&self, owner: &Owner, report: Progress) -> Delivery {
        let link = &self.link;
        let payload = Message::progress(owner, report).encode();
        if payload.len() > MAX_MESSAGE_BYTES {
            // The owner's subscriber would drop it: not sent, and counted as not delivered.
            link.count_error(BusOp::PublishOversize, 1);
            return Delivery::Unmatched;
        }
        let mut command = redis::cmd("PUBLISH");
        command
            .arg(replica_channel(&link.prefix, &owner.replica))
            .arg(payload);
        let mut conn = link.conn();
        match link
            .run(BusOp::Publish, command.query_async::<u64>(&mut conn))
            .await
        {
            Some(listeners) if listeners > 0 => Delivery::Delivered,
            _ => Delivery::Unmatched,
        }
    }

    /// A message on this replica's channel.
    fn received(&self, payload: &[u8]) {
        let id = |text: &str| text.parse::<u64>().ok();
        match Message::decode(payload) {
            Some(Message::Progress {
                stream,
                call,
                progress,
                total,
                message,
            }) => {
                let Some(stream) = id(&stream) else { return };
                let report = Progress {
                    progress,
                    total,
                    message,
                };
                let delivery = self.local.deliver(stream, &call, report);
                self.link
                    .metrics
                    .progress(ProgressSource::Bus, delivery.into(), 1);
            }
            Some(Message::One { binding, to }) => {
                if let (Some(binding), Some(owner)) = (id(&binding), Owner::parse(&to)) {
                    self.decide(binding, Decision::One(owner));
                }
            }
            Some(Message::Ambiguous { binding }) => {
                if let Some(binding) = id(&binding) {
                    self.decide(binding, Decision::Ambiguous);
                }
            }
            None => tracing::debug!("unreadable message on the progress bus ignored"),
        }
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
