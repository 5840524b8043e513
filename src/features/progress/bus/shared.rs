//! The state a replica's bus hub shares with its tasks, and what it does with a call or a
//! report: bind it locally or look it up across replicas, decide, route a report to this
//! replica's stream or to the owner's channel, and take what arrives on this replica's channel.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::bindings::{Bindings, Decision, Route, State};
use super::keys::{MAX_MESSAGE_BYTES, Message, Owner, args_digest, replica_channel, trace_hex};
use super::link::Link;
use super::outbox::Outbox;
use super::scripts::Lookup;
use crate::features::progress::local::LocalHub;
use crate::features::progress::{Delivery, McpToolCall, Progress, ProgressHub, Target};
use crate::metrics::{BusOp, ProgressSource};

/// What the hub and its tasks share: the local registry, the link to Redis, the bindings of
/// MCP calls and the outbox.
pub(crate) struct Shared {
    pub(super) local: Arc<LocalHub>,
    pub(super) link: Arc<Link>,
    pub(super) bindings: Bindings,
    pub(super) outbox: Arc<Outbox>,
    pub(super) bind_window: Duration,
    pub(super) next_id: AtomicU64,
    pub(super) lookups: Arc<Semaphore>,
}

impl Shared {
    /// Binds `id` in the in-process registry, by trace id only.
    pub(super) fn bind_locally(&self, id: u64, call: McpToolCall) {
        let local = self.local.bind_exact(call);
        if !self.bindings.insert(id, State::Local(local)) {
            self.local.release(local);
        }
    }

    pub(super) async fn look_up(&self, id: u64, call: McpToolCall) {
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
    pub(super) fn decide(&self, id: u64, decision: Decision) {
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

    pub(super) fn send(&self, id: u64, report: Progress) -> Delivery {
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

    pub(super) async fn post(&self, target: Target, report: Progress) -> Delivery {
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
    pub(super) async fn publish(&self, owner: &Owner, report: Progress) -> Delivery {
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
    pub(super) fn received(&self, payload: &[u8]) {
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
