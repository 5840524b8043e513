//! The store of the gateway's pairs behind hosted items, for the next turn: keyed by the hosted
//! item's whole (verified) id, bounded by entries, bytes and age, each pair bound to the caller
//! that made it ([`Owner`]). [`MemoryStore`] keeps one replica's pairs (the progress bus's
//! Redis can keep them for every replica: the shared store, built on this one).
//!
//! Invariants:
//! - a pair is handed only to a request of its owner; to anyone else it is
//!   [`Gone::AnotherCaller`], whether it is still kept or not;
//! - one owner holds at most [`OWNER_SHARE`] of the entries and of the bytes, one response
//!   (one stream's pairs) at most [`RESPONSE_SHARE`]: past its share a caller's (or a
//!   response's) own oldest pairs go, never another's. Requests without credentials cannot be
//!   told apart, so they share one owner, bounded by the response share only;
//! - a pair no longer kept says why, while the id is remembered ([`MAX_GONE`] ids).
//!
//! Time comes in as `now`, so eviction is a plain unit test.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::id::Owner;
use super::share::{HasPutTime, Ledger, Share};
use crate::metrics::HostedRefusal;

/// An owner's part of the store (entries and bytes): a quarter.
pub const OWNER_SHARE: Share = Share(4);
/// A response's part of the store: an eighth (18 tool outputs of 15 MB in one stream cannot
/// empty a 256 MiB store).
pub const RESPONSE_SHARE: Share = Share(8);
/// Ids no longer kept whose reason is remembered (about 100 bytes each).
pub const MAX_GONE: usize = 8192;

/// What the gateway knows behind an id the client was shown. For a hosted item, the gateway's
/// own items of one call, as it streamed them (JSON objects): its `function_call` and
/// `function_call_output`, or its own hosted item alone (`output_item` empty) where it streamed
/// one (LiteLLM's `mcp_call`). For a response id toolpulse mended ([`Pair::response_id`]), the
/// gateway's own id as a JSON string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub call_item: String,
    pub output_item: String,
}

impl Pair {
    /// The entry behind a response id the client was shown in place of the gateway's
    /// `upstream` one.
    pub fn response_id(upstream: &str) -> Pair {
        Pair {
            call_item: serde_json::Value::from(upstream).to_string(),
            output_item: String::new(),
        }
    }

    /// The gateway's response id, when this is the entry behind a response id.
    pub fn as_response_id(&self) -> Option<String> {
        if !self.output_item.is_empty() {
            return None;
        }
        serde_json::from_str(&self.call_item).ok()
    }

    /// The items as they go back into a request's `input` (comma-separated).
    pub fn input_items(&self) -> String {
        if self.output_item.is_empty() {
            return self.call_item.clone();
        }
        format!("{},{}", self.call_item, self.output_item)
    }

    pub fn bytes(&self, id: &str) -> usize {
        id.len() + self.call_item.len() + self.output_item.len()
    }
}

/// Who a pair was made for: the caller, and the response (stream) that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tenant {
    pub owner: Owner,
    pub response: u64,
}

/// Why a verified id has no pair for this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// Kept longer than `[hosted] ttl_ms`.
    Expired,
    /// Removed to make room (the store's bounds, or its caller's or response's share).
    Evicted,
    /// Made for a request with other credentials.
    AnotherCaller,
    /// Not kept here, for a reason no longer known (expired or evicted long ago, or made by a
    /// replica whose pairs this one cannot see).
    NotKept,
}

impl Gone {
    /// The `reason` label of `toolpulse_hosted_refusals_total`.
    pub fn reason(self) -> HostedRefusal {
        match self {
            Gone::Expired => HostedRefusal::Expired,
            Gone::Evicted => HostedRefusal::Evicted,
            Gone::AnotherCaller => HostedRefusal::AnotherCaller,
            Gone::NotKept => HostedRefusal::NotKept,
        }
    }
}

/// Pairs in this process's memory: the oldest go first when a bound is reached.
pub struct MemoryStore {
    max_entries: usize,
    max_bytes: usize,
    ttl: Duration,
    inner: Mutex<Inner>,
}

struct Entry {
    pair: Pair,
    tenant: Tenant,
    at: Instant,
}

impl HasPutTime for Entry {
    fn put_at(&self) -> Instant {
        self.at
    }
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// Ids in the order they were put (an id put again appears twice; the stale one is skipped
    /// when its time comes, by its put time).
    order: VecDeque<(String, Instant)>,
    bytes: usize,
    owners: Ledger<Owner>,
    responses: Ledger<Tenant>,
    /// Ids no longer kept: why, and whose they were.
    gone: HashMap<String, (Gone, Owner)>,
    gone_order: VecDeque<String>,
}

impl MemoryStore {
    pub fn new(max_entries: usize, max_bytes: usize, ttl: Duration) -> Self {
        MemoryStore {
            max_entries,
            max_bytes,
            ttl,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `pair` behind `id` for `tenant`; `false` when it is larger than its response's
    /// whole share (it is then not kept, and the id says it was evicted).
    pub fn put(&self, id: &str, pair: Pair, tenant: Tenant, now: Instant) -> bool {
        let bytes = pair.bytes(id);
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.expire(now, self.ttl);
        inner.remove(id, None);
        let response = RESPONSE_SHARE.of(self.max_entries, self.max_bytes);
        if bytes > response.1 {
            inner.forget(id, Gone::Evicted, tenant.owner);
            return false;
        }
        // Past its response's share, then its owner's, a caller's own oldest pairs go first.
        while inner.responses.over(&tenant, response, bytes) {
            let Some(oldest) = inner.responses.oldest(&tenant, &inner.entries) else {
                break;
            };
            inner.remove(&oldest, Some(Gone::Evicted));
        }
        let owner = OWNER_SHARE.of(self.max_entries, self.max_bytes);
        while tenant.owner != Owner::ANONYMOUS && inner.owners.over(&tenant.owner, owner, bytes) {
            let Some(oldest) = inner.owners.oldest(&tenant.owner, &inner.entries) else {
                break;
            };
            inner.remove(&oldest, Some(Gone::Evicted));
        }
        while inner.entries.len() >= self.max_entries || inner.bytes + bytes > self.max_bytes {
            if !inner.evict_oldest(Gone::Evicted) {
                break;
            }
        }
        inner.bytes += bytes;
        inner.owners.add(tenant.owner, id, bytes, now);
        inner.responses.add(tenant, id, bytes, now);
        inner.gone.remove(id);
        inner.entries.insert(
            id.to_string(),
            Entry {
                pair,
                tenant,
                at: now,
            },
        );
        inner.order.push_back((id.to_string(), now));
        // Stale order entries of ids put again are bounded by the live ones.
        if inner.order.len() > 2 * self.max_entries {
            let entries = &inner.entries;
            let order = std::mem::take(&mut inner.order);
            inner.order = order
                .into_iter()
                .filter(|(id, at)| entries.get(id).is_some_and(|e| e.at == *at))
                .collect();
        }
        true
    }

    /// The pair behind `id` for a request of `owner`, or why there is none.
    pub fn get(&self, id: &str, owner: Owner, now: Instant) -> Result<Pair, Gone> {
        let inner = self.lock();
        if let Some(entry) = inner.entries.get(id) {
            if entry.tenant.owner != owner {
                return Err(Gone::AnotherCaller);
            }
            if now.saturating_duration_since(entry.at) >= self.ttl {
                return Err(Gone::Expired);
            }
            return Ok(entry.pair.clone());
        }
        match inner.gone.get(id) {
            Some((_, whose)) if *whose != owner => Err(Gone::AnotherCaller),
            Some((why, _)) => Err(*why),
            None => Err(Gone::NotKept),
        }
    }

    /// Entries and bytes kept now.
    pub fn size(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.entries.len(), inner.bytes)
    }
}

impl Inner {
    /// Removes `id` (if kept), remembering why when `why` is given.
    fn remove(&mut self, id: &str, why: Option<Gone>) {
        let Some(entry) = self.entries.remove(id) else {
            return;
        };
        let bytes = entry.pair.bytes(id);
        self.bytes -= bytes;
        self.owners
            .remove(&entry.tenant.owner, bytes, &self.entries);
        self.responses.remove(&entry.tenant, bytes, &self.entries);
        if let Some(why) = why {
            self.forget(id, why, entry.tenant.owner);
        }
    }

    /// Remembers that `id` is no longer kept, and why (the oldest such ids are forgotten).
    fn forget(&mut self, id: &str, why: Gone, owner: Owner) {
        if self.gone.insert(id.to_string(), (why, owner)).is_none() {
            self.gone_order.push_back(id.to_string());
        }
        while self.gone_order.len() > MAX_GONE {
            if let Some(old) = self.gone_order.pop_front() {
                self.gone.remove(&old);
            }
        }
    }

    /// Removes the oldest entry; `false` when there is none.
    fn evict_oldest(&mut self, why: Gone) -> bool {
        while let Some((id, put_at)) = self.order.pop_front() {
            if self.entries.get(&id).is_some_and(|e| e.at == put_at) {
                self.remove(&id, Some(why));
                return true;
            }
        }
        false
    }

    fn expire(&mut self, now: Instant, ttl: Duration) {
        while let Some((_, put_at)) = self.order.front() {
            if now.saturating_duration_since(*put_at) < ttl {
                break;
            }
            self.evict_oldest(Gone::Expired);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(n: usize) -> Pair {
        Pair {
            call_item: "c".repeat(n),
            output_item: "o".repeat(n),
        }
    }

    const ANON: Tenant = Tenant {
        owner: Owner::ANONYMOUS,
        response: 0,
    };

    fn tenant(owner: u8, response: u64) -> Tenant {
        Tenant {
            owner: Owner::from_bytes([owner; 16]),
            response,
        }
    }

    #[test]
    fn keeps_pairs_within_entries_bytes_and_age() {
        let t0 = Instant::now();
        let store = MemoryStore::new(2, 8000, Duration::from_secs(60));
        let any = Owner::ANONYMOUS;
        // Each its own response: the response share (a quarter of 2 entries: 1) allows one.
        let r = |n| Tenant {
            response: n,
            ..ANON
        };
        store.put("a", pair(10), r(1), t0);
        store.put("b", pair(10), r(2), t0);
        assert_eq!(store.get("a", any, t0), Ok(pair(10)));
        store.put("c", pair(10), r(3), t0);
        assert_eq!(store.get("a", any, t0), Err(Gone::Evicted), "the oldest");
        assert_eq!(store.size().0, 2);
        let later = t0 + Duration::from_secs(60);
        assert_eq!(store.get("b", any, later), Err(Gone::Expired));

        store.put("big", pair(480), r(4), t0);
        assert_eq!(store.get("big", any, t0), Ok(pair(480)));
        store.put("huge", pair(600), r(5), t0);
        assert_eq!(
            store.get("huge", any, t0),
            Err(Gone::Evicted),
            "over a share"
        );
        assert_eq!(store.get("never", any, t0), Err(Gone::NotKept));

        let later = t0 + Duration::from_secs(61);
        store.put("d", pair(1), r(6), later);
        assert_eq!(store.size(), (1, 3), "expired entries left at the next put");
        assert_eq!(store.get("c", any, later), Err(Gone::Expired));
    }

    #[test]
    fn pairs_are_their_owners_only() {
        let t0 = Instant::now();
        let store = MemoryStore::new(100, 1 << 20, Duration::from_secs(60));
        store.put("a", pair(10), tenant(1, 1), t0);
        let (one, two) = (tenant(1, 0).owner, tenant(2, 0).owner);
        assert_eq!(store.get("a", one, t0), Ok(pair(10)));
        assert_eq!(store.get("a", two, t0), Err(Gone::AnotherCaller));
        assert_eq!(
            store.get("a", Owner::ANONYMOUS, t0),
            Err(Gone::AnotherCaller)
        );
        let later = t0 + Duration::from_secs(61);
        store.put("z", pair(1), tenant(3, 1), later);
        assert_eq!(store.get("a", one, later), Err(Gone::Expired));
        assert_eq!(store.get("a", two, later), Err(Gone::AnotherCaller));
    }

    #[test]
    fn one_caller_or_one_response_cannot_evict_the_others() {
        let t0 = Instant::now();
        // 1000 bytes: an owner may hold 250, a response 125 (pairs of 50 bytes each here).
        let store = MemoryStore::new(1000, 1000, Duration::from_secs(60));
        store.put("victim", pair(24), tenant(9, 1), t0);
        for n in 0..100u64 {
            store.put(&format!("x{n:02}"), pair(23), tenant(1, n), t0);
        }
        let victim = tenant(9, 0).owner;
        assert_eq!(store.get("victim", victim, t0), Ok(pair(24)));
        let (entries, bytes) = store.size();
        assert!(bytes <= 250 + 50 && entries <= 6, "{entries} {bytes}");
        assert_eq!(store.get("x99", tenant(1, 0).owner, t0), Ok(pair(23)));
        assert_eq!(
            store.get("x00", tenant(1, 0).owner, t0),
            Err(Gone::Evicted),
            "its own oldest went"
        );
        // One response of one owner: at most 125 bytes, its own oldest go.
        for n in 0..10 {
            store.put(&format!("y{n}"), pair(23), tenant(2, 7), t0);
        }
        assert_eq!(store.get("y9", tenant(2, 0).owner, t0), Ok(pair(23)));
        assert_eq!(store.get("y7", tenant(2, 0).owner, t0), Err(Gone::Evicted));
        assert_eq!(store.get("victim", victim, t0), Ok(pair(24)));
    }

    #[test]
    fn putting_an_id_again_replaces_it() {
        let t0 = Instant::now();
        let store = MemoryStore::new(100, 100_000, Duration::from_secs(60));
        for i in 0..10 {
            let at = t0 + Duration::from_millis(i as u64);
            store.put("a", pair(i), ANON, at);
        }
        assert_eq!(store.size(), (1, 19));
        assert_eq!(store.get("a", Owner::ANONYMOUS, t0), Ok(pair(9)));
    }
}
