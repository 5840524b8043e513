//! The pairs behind hosted items, for every replica: this process's [`MemoryStore`] in front of
//! the progress bus's Redis (when `[progress] bus` is set), so a next turn that lands on another
//! replica, or on this one after a restart, still maps to the gateway's exact pair.
//!
//! - A pair is put in memory at once and queued for Redis (`SET … PX ttl`); one writer task
//!   drains the queue, one pipeline per batch. The queue is bounded ([`MAX_QUEUED_PAIRS`],
//!   [`MAX_QUEUED_BYTES`]); beyond it, or while the bus is down, pairs stay in memory only
//!   (counted as `toolpulse_progress_bus_errors_total{op="hosted_put"}`).
//! - A lookup takes what memory has and asks Redis for the rest with one `MGET`. **The next turn
//!   may race the write**: a client can send it the moment it reads `response.completed`, to
//!   another replica, while the pair is still queued here. So a verified id that Redis does not
//!   have (and this replica never saw) is asked for again after [`RACE_WAITS`] (at most 175 ms
//!   in all) before it is mapped from its content or refused. Only ids this deployment signed
//!   get there, so the wait costs nothing to a forged id; it is paid once per request for a
//!   pair that really expired.
//! - Each value carries its owner's digest: a pair is handed only to its caller.
//!
//! Stream tasks never wait for Redis: only a request body that holds hosted items does.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::id::{Key, Owner};
use super::store::{Gone, MemoryStore, Pair, Tenant};
use crate::features::progress::bus::link::Link;
use crate::metrics::BusOp;

/// Pairs waiting for the writer; beyond it they are kept in memory only.
pub const MAX_QUEUED_PAIRS: usize = 4096;
/// Bytes of pairs waiting for the writer (tool outputs can be large).
pub const MAX_QUEUED_BYTES: usize = 64 << 20;
/// Pairs written per pipeline.
const BATCH: usize = 256;
/// Pauses before asking Redis again for verified ids it did not have.
pub const RACE_WAITS: [Duration; 3] = [
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
];

/// Memory, and Redis when the bus is configured.
pub struct Pairs {
    memory: MemoryStore,
    shared: Option<Arc<Shared>>,
    /// Whether this process ever mended a response id ([`Pairs::response_id`]).
    mended_ids: AtomicBool,
}

struct Shared {
    link: Arc<Link>,
    ttl: Duration,
    /// The key the replicas share through Redis, when none was configured: put again (`NX`)
    /// with each batch, so that Redis restarted without persistence gets the running
    /// replicas' key back before a new replica can make another.
    shared_key: Option<Key>,
    queue: Mutex<Queue>,
    wake: Notify,
}

#[derive(Default)]
struct Queue {
    pairs: VecDeque<(String, Pair, Owner)>,
    bytes: usize,
}

impl Pairs {
    pub fn memory(memory: MemoryStore) -> Self {
        Pairs {
            memory,
            shared: None,
            mended_ids: AtomicBool::new(false),
        }
    }

    /// Also keeps pairs in Redis, through `link`; starts the writer on the current runtime.
    pub fn shared(
        memory: MemoryStore,
        link: Arc<Link>,
        ttl: Duration,
        shared_key: Option<Key>,
    ) -> Self {
        let shared = Arc::new(Shared {
            link,
            ttl,
            shared_key,
            queue: Mutex::default(),
            wake: Notify::new(),
        });
        tokio::spawn(shared.clone().write());
        Pairs {
            memory,
            shared: Some(shared),
            mended_ids: AtomicBool::new(false),
        }
    }

    /// Keeps `pair` behind `id` for `tenant` (in memory at once, in Redis soon); `false` when
    /// memory could not keep it (larger than a response's share).
    pub fn put(&self, id: &str, pair: Pair, tenant: Tenant, now: Instant) -> bool {
        if let Some(shared) = &self.shared {
            shared.queue(id, pair.clone(), tenant.owner);
        }
        self.memory.put(id, pair, tenant, now)
    }

    /// The pairs of `ids` (distinct) for a request of `owner`, or why each has none: memory,
    /// then Redis for what memory does not hand out, waiting briefly for ids Redis may be about
    /// to get (see the module's note).
    pub async fn lookup(&self, ids: &[String], owner: Owner, now: Instant) -> Found {
        let mut found = HashMap::new();
        let mut missing = Vec::new();
        for id in ids {
            let kept = self.memory.get(id, owner, now);
            if matches!(kept, Err(Gone::Expired | Gone::Evicted | Gone::NotKept)) {
                missing.push(id.clone());
            }
            found.insert(id.clone(), kept);
        }
        if let Some(shared) = &self.shared {
            let mut waits = RACE_WAITS.iter();
            while !missing.is_empty() && shared.link.is_up() {
                missing = shared.fetch(missing, owner, &mut found).await;
                // Only ids this replica never saw may be on their way to Redis.
                missing.retain(|id| matches!(found.get(id), Some(Err(Gone::NotKept))));
                match waits.next() {
                    Some(wait) if !missing.is_empty() => tokio::time::sleep(*wait).await,
                    _ => break,
                }
            }
        }
        Found(found)
    }

    /// The gateway's id behind a response id a client was shown in its place (the stream's
    /// `response.created` id where the gateway later changed it), for the next turn's
    /// `previous_response_id` of the same caller: memory, then Redis once, without waiting for
    /// a write in flight (every chained request asks, so it must cost nothing where no id was
    /// ever mended: Redis is asked only once this process has mended one).
    pub async fn response_id(&self, shown: &str, owner: Owner, now: Instant) -> Option<String> {
        if let Ok(entry) = self.memory.get(shown, owner, now) {
            return entry.as_response_id();
        }
        let shared = self.shared.as_ref()?;
        if !self.mended_ids.load(Ordering::Relaxed) || !shared.link.is_up() {
            return None;
        }
        let mut found = HashMap::new();
        shared
            .fetch(vec![shown.to_string()], owner, &mut found)
            .await;
        found.remove(shown)?.ok()?.as_response_id()
    }

    /// Keeps the gateway's id behind a response id a client was shown.
    pub fn put_response_id(&self, shown: &str, upstream: &str, tenant: Tenant, now: Instant) {
        self.mended_ids.store(true, Ordering::Relaxed);
        self.put(shown, Pair::response_id(upstream), tenant, now);
    }

    /// Entries and bytes in this process's memory.
    pub fn size(&self) -> (usize, usize) {
        self.memory.size()
    }
}

/// The pairs one request's lookup found, or why there was none, by id.
#[derive(Debug, Default)]
pub struct Found(pub HashMap<String, Result<Pair, Gone>>);

impl Found {
    /// What the lookup said of `id`; an id it was not asked for is not kept.
    pub fn get(&self, id: &str) -> Result<&Pair, Gone> {
        match self.0.get(id) {
            Some(Ok(pair)) => Ok(pair),
            Some(Err(why)) => Err(*why),
            None => Err(Gone::NotKept),
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn queue(&self, id: &str, pair: Pair, owner: Owner) {
        let bytes = id.len() + pair.call_item.len() + pair.output_item.len();
        let mut queue = self.lock();
        if queue.pairs.len() >= MAX_QUEUED_PAIRS || queue.bytes + bytes > MAX_QUEUED_BYTES {
            drop(queue);
            self.link.count_error(BusOp::HostedPut, 1);
            return;
        }
        queue.bytes += bytes;
        queue.pairs.push_back((id.to_string(), pair, owner));
        drop(queue);
        self.wake.notify_one();
    }

    fn take(&self) -> Vec<(String, Pair, Owner)> {
        let mut queue = self.lock();
        let n = queue.pairs.len().min(BATCH);
        let batch: Vec<_> = queue.pairs.drain(..n).collect();
        for (id, pair, _) in &batch {
            queue.bytes -= id.len() + pair.call_item.len() + pair.output_item.len();
        }
        if !queue.pairs.is_empty() {
            self.wake.notify_one();
        }
        batch
    }

    /// Writes what is queued, batch by batch, until the process ends.
    async fn write(self: Arc<Self>) {
        let ttl = u64::try_from(self.ttl.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        loop {
            self.wake.notified().await;
            let batch = self.take();
            if batch.is_empty() {
                continue;
            }
            if !self.link.is_up() {
                self.link.count_error(BusOp::HostedPut, batch.len() as u64);
                continue;
            }
            let mut pipe = redis::pipe();
            if let Some(shared) = &self.shared_key {
                let name = super::shared_key::redis_key(&self.link.prefix);
                pipe.cmd("SET").arg(name).arg(shared.secret()).arg("NX");
                pipe.ignore();
            }
            for (id, pair, owner) in &batch {
                let key = key(&self.link.prefix, id);
                pipe.cmd("SET")
                    .arg(key)
                    .arg(encode(pair, *owner))
                    .arg("PX")
                    .arg(ttl);
                pipe.ignore();
            }
            let mut conn = self.link.conn();
            self.link
                .run(BusOp::HostedPut, pipe.query_async::<()>(&mut conn))
                .await;
        }
    }

    /// Puts what Redis has of `ids` into `found` (the pair, or another caller's); returns the
    /// ids it did not have.
    async fn fetch(
        &self,
        ids: Vec<String>,
        owner: Owner,
        found: &mut HashMap<String, Result<Pair, Gone>>,
    ) -> Vec<String> {
        let mut command = redis::cmd("MGET");
        for id in &ids {
            command.arg(key(&self.link.prefix, id));
        }
        let mut conn = self.link.conn();
        let get = command.query_async::<Vec<Option<Vec<u8>>>>(&mut conn);
        let Some(values) = self.link.run(BusOp::HostedGet, get).await else {
            return Vec::new();
        };
        let mut missing = Vec::new();
        for (id, value) in ids.into_iter().zip(values) {
            match value.as_deref().and_then(decode) {
                Some((whose, pair)) if whose == owner => {
                    found.insert(id, Ok(pair));
                }
                Some(_) => {
                    found.insert(id, Err(Gone::AnotherCaller));
                }
                None => missing.push(id),
            }
        }
        missing
    }
}

fn key(prefix: &str, id: &str) -> String {
    format!("{prefix}:hosted:{id}")
}

/// `<owner, 32 hex digits>/<length of the call item>:<call item><output item>`: both items
/// are JSON objects whose text is kept exactly. (A value without its owner, written before
/// pairs had one, is not handed to anyone.)
fn encode(pair: &Pair, owner: Owner) -> String {
    let mut out = String::with_capacity(48 + pair.call_item.len() + pair.output_item.len());
    for byte in owner.as_bytes() {
        out.push_str(&format!("{byte:02x}"));
    }
    out.push_str(&format!("/{}:", pair.call_item.len()));
    out.push_str(&pair.call_item);
    out.push_str(&pair.output_item);
    out
}

fn decode(value: &[u8]) -> Option<(Owner, Pair)> {
    let text = std::str::from_utf8(value).ok()?;
    let (owner, rest) = text.split_once('/')?;
    if owner.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (n, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(owner.get(2 * n..2 * n + 2)?, 16).ok()?;
    }
    let (length, rest) = rest.split_once(':')?;
    let length: usize = length.parse().ok()?;
    if !rest.is_char_boundary(length) {
        return None;
    }
    let (call_item, output_item) = rest.split_at(length);
    let pair = Pair {
        call_item: call_item.to_string(),
        output_item: output_item.to_string(),
    };
    Some((Owner::from_bytes(bytes), pair))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip_through_their_encoding() {
        let pair = Pair {
            call_item: r#"{"type":"function_call","arguments":"{\"q\":\"é:1\"}"}"#.into(),
            output_item: r#"{"type":"function_call_output","output":"12:ab"}"#.into(),
        };
        let owner = Owner::from_bytes([0xa5; 16]);
        assert_eq!(decode(encode(&pair, owner).as_bytes()), Some((owner, pair)));
        let anonymous = encode(&Pair::response_id("r"), Owner::ANONYMOUS);
        assert!(anonymous.starts_with("00000000000000000000000000000000/3:"));
        let old = "5:ab";
        for bad in ["", "x", old, "99:{}", "1:\u{e9}x", "zz/1:{}", "0/1:{}"] {
            assert_eq!(decode(bad.as_bytes()), None, "{bad}");
        }
    }
}
