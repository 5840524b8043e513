//! The registrar: keeps the registry in Redis in step with the calls open in this replica's
//! streams, off the streams' tasks.
//!
//! Streams report opens and closes through a bounded queue ([`MAX_QUEUED_CHANGES`]; a full
//! queue drops the change and counts it, the stream never waits). The registrar gathers them
//! for [`BATCH_WINDOW`] and sends each batch as one pipeline (a call that opens and closes
//! within one window never reaches Redis), refreshes every registration before its TTL runs
//! out, and after an outage registers every call still open again and removes the ones that
//! closed meanwhile. It also probes a bus that is down, with back-off.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::{Cmd, ErrorKind, Pipeline, Script, ServerErrorKind};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::keys::{self, NO_ARGUMENTS};
use super::link::{BACKOFF_MAX, BACKOFF_MIN, Link};
use crate::features::progress::local::{Observer, OpenedCall};
use crate::metrics::BusOp;

/// How long a registration lives in Redis unless refreshed: a replica killed without a goodbye
/// leaves its calls behind for at most this long.
pub const REGISTRATION_TTL: Duration = Duration::from_secs(120);
/// How often open calls are registered again (well within the TTL, so one failed refresh does
/// not lose them).
pub const REFRESH_EVERY: Duration = Duration::from_secs(30);
/// Opens and closes waiting for the registrar; beyond it they are dropped and counted.
pub const MAX_QUEUED_CHANGES: usize = 4096;
/// Changes applied in one pipeline; a full batch is sent at once.
pub const MAX_BATCH: usize = 256;
/// How long the first change of a batch waits for others to share its pipeline. One round
/// trip to Redis costs the replica more CPU than the scripts it carries (a write, a read and
/// two task wake-ups), so gathering matters under load. A call's registration reaches Redis
/// this much later: a binding waits for it (`bind_window_ms`), a `POST /v1/progress` by tool
/// name from another replica in that time finds nothing.
pub const BATCH_WINDOW: Duration = Duration::from_millis(20);
/// Calls registered at once by one replica (its streams' open calls); beyond it, not shared.
pub const MAX_REGISTERED_CALLS: usize = 65_536;
/// Calls that closed while the bus was down, removed once it is back; beyond it, their
/// registrations just run out (TTL).
pub const MAX_PENDING_REMOVALS: usize = 4096;

/// One open call as it is registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub stream: u64,
    pub call_id: String,
    pub name: String,
    pub digest: String,
    /// Hex, or empty.
    pub trace: String,
}

#[derive(Debug)]
pub enum Change {
    Opened(Registration),
    Closed { stream: u64, call_id: String },
}

/// The streams' side: turns opens and closes into queued changes.
pub struct Changes {
    queue: mpsc::Sender<Change>,
    link: Arc<Link>,
}

impl Changes {
    pub fn new(link: Arc<Link>) -> (Changes, mpsc::Receiver<Change>) {
        let (queue, receiver) = mpsc::channel(MAX_QUEUED_CHANGES);
        (Changes { queue, link }, receiver)
    }

    fn send(&self, change: Change) {
        if self.queue.try_send(change).is_err() {
            self.link.count_error(BusOp::Queue, 1);
        }
    }
}

impl Observer for Changes {
    fn opened(&self, call: OpenedCall<'_>) {
        if !keys::registrable(call.name) || !keys::registrable(call.call_id) {
            return;
        }
        let digest = match call.arguments {
            Some(arguments) => keys::args_digest(&self.link.prefix, arguments),
            None => NO_ARGUMENTS.to_string(),
        };
        self.send(Change::Opened(Registration {
            stream: call.stream,
            call_id: call.call_id.to_string(),
            name: call.name.to_string(),
            digest,
            trace: keys::trace_hex(call.trace_id),
        }));
    }

    fn closed(&self, stream: u64, call_id: &str) {
        if keys::registrable(call_id) {
            let call_id = call_id.to_string();
            self.send(Change::Closed { stream, call_id });
        }
    }
}

type CallKey = (u64, String);

/// One command of a batch not sent yet.
enum Pending {
    Register(CallKey),
    Unregister(Registration),
}

pub struct Registrar {
    link: Arc<Link>,
    changes: mpsc::Receiver<Change>,
    open: HashMap<CallKey, Registration>,
    /// Gathered for the next pipeline, in order; at most [`MAX_BATCH`].
    batch: Vec<Pending>,
    /// Closed while the bus was down.
    removals: Vec<Registration>,
    backoff: Duration,
}

impl Registrar {
    pub fn new(link: Arc<Link>, changes: mpsc::Receiver<Change>) -> Registrar {
        Registrar {
            link,
            changes,
            open: HashMap::new(),
            batch: Vec::with_capacity(MAX_BATCH),
            removals: Vec::new(),
            backoff: BACKOFF_MIN,
        }
    }

    /// Runs until every stream's side is gone (the process ends).
    pub async fn run(mut self) {
        // Probe at once: the bus is reached for the first time.
        let mut next = Instant::now();
        let mut send_at: Option<Instant> = None;
        loop {
            tokio::select! {
                change = self.changes.recv() => match change {
                    Some(change) => {
                        self.record(change);
                        if self.batch.len() >= MAX_BATCH {
                            self.send_batch().await;
                            send_at = None;
                        } else if send_at.is_none() && !self.batch.is_empty() {
                            send_at = Some(Instant::now() + BATCH_WINDOW);
                        }
                    }
                    None => {
                        self.send_batch().await;
                        return;
                    }
                },
                () = sleep_until(send_at), if send_at.is_some() => {
                    self.send_batch().await;
                    send_at = None;
                }
                () = tokio::time::sleep_until(next) => next = Instant::now() + self.tick().await,
                () = self.link.went_down.notified() => next = Instant::now() + BACKOFF_MIN,
            }
        }
    }

    /// A refresh when the bus is up, a probe when it is not; returns the time to the next.
    async fn tick(&mut self) -> Duration {
        if self.link.is_up() {
            self.register_all(BusOp::Refresh).await;
            return REFRESH_EVERY;
        }
        if !self.link.probe().await {
            self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            return self.backoff;
        }
        self.backoff = BACKOFF_MIN;
        self.link.reached();
        let removals = std::mem::take(&mut self.removals);
        let mut pipe = redis::pipe();
        for registration in &removals {
            pipe.add_command(self.unregister(registration));
        }
        self.query(pipe, BusOp::Unregister).await;
        self.register_all(BusOp::Register).await;
        REFRESH_EVERY
    }

    /// Notes a change, and gathers the command that applies it when the bus is up.
    fn record(&mut self, change: Change) {
        match change {
            Change::Opened(registration) => {
                let key = (registration.stream, registration.call_id.clone());
                if self.open.len() >= MAX_REGISTERED_CALLS && !self.open.contains_key(&key) {
                    self.link.count_error(BusOp::Register, 1);
                    return;
                }
                self.open.insert(key.clone(), registration);
                if self.link.is_up() {
                    self.batch.push(Pending::Register(key));
                }
            }
            Change::Closed { stream, call_id } => {
                let key = (stream, call_id);
                let Some(registration) = self.open.remove(&key) else {
                    return;
                };
                let unsent = self
                    .batch
                    .iter()
                    .position(|p| matches!(p, Pending::Register(k) if *k == key));
                if let Some(unsent) = unsent {
                    self.batch.remove(unsent);
                } else if self.link.is_up() {
                    self.batch.push(Pending::Unregister(registration));
                } else if self.removals.len() < MAX_PENDING_REMOVALS {
                    self.removals.push(registration);
                }
            }
        }
    }

    /// Sends the gathered commands in one pipeline. When the bus went down meanwhile, or the
    /// pipeline got no answer, the opens are registered again once it is back (they are in
    /// `open`), the closes removed then: a removal that did reach Redis is harmless to send
    /// again, one that did not would otherwise stay until its TTL.
    async fn send_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        let mut closes = Vec::new();
        for pending in std::mem::take(&mut self.batch) {
            match pending {
                Pending::Register(key) => {
                    if let Some(registration) = self.open.get(&key) {
                        pipe.add_command(self.register(registration));
                    }
                }
                Pending::Unregister(registration) => {
                    pipe.add_command(self.unregister(&registration));
                    closes.push(registration);
                }
            }
        }
        if self.link.is_up() && self.query(pipe, BusOp::Register).await {
            return;
        }
        let room = MAX_PENDING_REMOVALS.saturating_sub(self.removals.len());
        self.removals.extend(closes.into_iter().take(room));
    }

    async fn register_all(&mut self, op: BusOp) {
        let registrations: Vec<Cmd> = self.open.values().map(|r| self.register(r)).collect();
        for chunk in registrations.chunks(MAX_BATCH) {
            let mut pipe = redis::pipe();
            for command in chunk {
                pipe.add_command(command.clone());
            }
            if !self.query(pipe, op).await {
                return;
            }
        }
    }

    fn register(&self, r: &Registration) -> Cmd {
        let ttl = REGISTRATION_TTL.as_millis() as u64;
        let mut command = evalsha(&self.link.scripts.register, &self.link);
        command
            .arg(r.stream)
            .arg(&r.call_id)
            .arg(&r.name)
            .arg(&r.digest)
            .arg(&r.trace)
            .arg(ttl);
        command
    }

    fn unregister(&self, r: &Registration) -> Cmd {
        let mut command = evalsha(&self.link.scripts.unregister, &self.link);
        command
            .arg(r.stream)
            .arg(&r.call_id)
            .arg(&r.name)
            .arg(&r.digest)
            .arg(&r.trace);
        command
    }

    /// Runs a pipeline of script calls; when the server lost the scripts (it restarted), loads
    /// them and runs it again. Returns whether it succeeded.
    async fn query(&self, pipe: Pipeline, op: BusOp) -> bool {
        if pipe.is_empty() {
            return true;
        }
        let mut conn = self.link.conn();
        let first = tokio::time::timeout(
            super::link::OP_TIMEOUT,
            pipe.query_async::<redis::Value>(&mut conn),
        )
        .await;
        match first {
            Ok(Err(error)) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let scripts = &self.link.scripts;
                let load = async {
                    for script in [&scripts.register, &scripts.unregister] {
                        script.load_async(&mut conn).await?;
                    }
                    pipe.query_async::<redis::Value>(&mut conn).await
                };
                self.link.run(op, load).await.is_some()
            }
            Ok(Err(error)) => {
                self.link.failed(op, &error);
                false
            }
            Ok(Ok(_)) => true,
            Err(_) => {
                self.link.failed(op, &"no answer in time");
                false
            }
        }
    }
}

/// Sleeps until `at`; never wakes without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `EVALSHA <script> 0 <prefix> <replica>`: the arguments every registry script starts with.
fn evalsha(script: &Script, link: &Link) -> Cmd {
    let mut command = redis::cmd("EVALSHA");
    command
        .arg(script.get_hash())
        .arg(0)
        .arg(&link.prefix)
        .arg(&link.replica);
    command
}
