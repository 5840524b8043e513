//! The store of the gateway's pairs behind hosted items, for the next turn: keyed by the hosted
//! item's whole (verified) id, bounded by entries, bytes and age. [`PairStore`] is what the
//! proxy needs of it; [`MemoryStore`] keeps one replica's pairs (the progress bus's Redis can
//! keep them for every replica).
//!
//! Time comes in as `now`, so eviction is a plain unit test.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

    fn bytes(&self, id: &str) -> usize {
        id.len() + self.call_item.len() + self.output_item.len()
    }
}

/// Where pairs are kept between turns.
pub trait PairStore: Send + Sync {
    fn put(&self, id: &str, pair: Pair, now: Instant);
    fn get(&self, id: &str, now: Instant) -> Option<Pair>;
    /// Entries and bytes kept now.
    fn size(&self) -> (usize, usize);
}

/// Pairs in this process's memory: the oldest go first when a bound is reached.
pub struct MemoryStore {
    max_entries: usize,
    max_bytes: usize,
    ttl: Duration,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, (Pair, Instant)>,
    /// Ids in the order they were put (an id put again appears twice; the stale one is skipped
    /// when its time comes, by its put time).
    order: VecDeque<(String, Instant)>,
    bytes: usize,
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
}

impl Inner {
    /// Removes the oldest entry; `false` when there is none.
    fn evict_oldest(&mut self) -> bool {
        while let Some((id, put_at)) = self.order.pop_front() {
            if self.entries.get(&id).is_some_and(|(_, at)| *at == put_at) {
                if let Some((pair, _)) = self.entries.remove(&id) {
                    self.bytes -= pair.bytes(&id);
                }
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
            self.evict_oldest();
        }
    }
}

impl PairStore for MemoryStore {
    fn put(&self, id: &str, pair: Pair, now: Instant) {
        let bytes = pair.bytes(id);
        if bytes > self.max_bytes {
            return;
        }
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.expire(now, self.ttl);
        if let Some((old, _)) = inner.entries.remove(id) {
            inner.bytes -= old.bytes(id);
        }
        while inner.entries.len() >= self.max_entries || inner.bytes + bytes > self.max_bytes {
            if !inner.evict_oldest() {
                break;
            }
        }
        inner.bytes += bytes;
        inner.entries.insert(id.to_string(), (pair, now));
        inner.order.push_back((id.to_string(), now));
        // Stale order entries of ids put again are bounded by the live ones.
        if inner.order.len() > 2 * self.max_entries {
            let entries = &inner.entries;
            let order = std::mem::take(&mut inner.order);
            inner.order = order
                .into_iter()
                .filter(|(id, at)| entries.get(id).is_some_and(|(_, put)| put == at))
                .collect();
        }
    }

    fn get(&self, id: &str, now: Instant) -> Option<Pair> {
        let inner = self.lock();
        let (pair, put_at) = inner.entries.get(id)?;
        (now.saturating_duration_since(*put_at) < self.ttl).then(|| pair.clone())
    }

    fn size(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.entries.len(), inner.bytes)
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

    #[test]
    fn keeps_pairs_within_entries_bytes_and_age() {
        let t0 = Instant::now();
        let store = MemoryStore::new(2, 1000, Duration::from_secs(60));
        store.put("a", pair(10), t0);
        store.put("b", pair(10), t0);
        assert_eq!(store.get("a", t0), Some(pair(10)));
        store.put("c", pair(10), t0);
        assert_eq!(store.get("a", t0), None, "the oldest went first");
        assert_eq!(store.size().0, 2);
        assert_eq!(
            store.get("b", t0 + Duration::from_secs(60)),
            None,
            "too old"
        );

        store.put("big", pair(480), t0);
        assert_eq!(store.size(), (2, 963 + 21), "made room by bytes: b went");
        assert_eq!(store.get("b", t0), None);
        store.put("huge", pair(600), t0);
        assert_eq!(store.get("huge", t0), None, "larger than the whole store");
        assert_eq!(store.size(), (2, 984));

        let later = t0 + Duration::from_secs(61);
        store.put("d", pair(1), later);
        assert_eq!(store.size(), (1, 3), "expired entries left at the next put");
    }

    #[test]
    fn putting_an_id_again_replaces_it() {
        let t0 = Instant::now();
        let store = MemoryStore::new(2, 1000, Duration::from_secs(60));
        for i in 0..10 {
            store.put("a", pair(i), t0 + Duration::from_millis(i as u64));
        }
        assert_eq!(store.size(), (1, 19));
        store.put("b", pair(1), t0);
        store.put("c", pair(1), t0 + Duration::from_secs(1));
        assert_eq!(store.get("a", t0 + Duration::from_secs(1)), None);
        assert_eq!(store.size().0, 2);
    }
}
