//! What each caller and each response holds of the pair store, so that past its share one
//! evicts its own oldest pairs, not another's (the pair store's). A [`Ledger`] counts entries
//! and bytes per key and keeps the key's ids in the order they were put; ids removed by other
//! means (the store's own eviction, a put again) are skipped when their turn comes, and the
//! order is compacted so that it never holds more than twice the key's live ids (plus a few).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Instant;

/// A part of the store: one `n`th of its entries and of its bytes (at least one of each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share(pub usize);

impl Share {
    /// `(entries, bytes)` this share allows of a store of `max_entries` and `max_bytes`.
    pub fn of(self, max_entries: usize, max_bytes: usize) -> (usize, usize) {
        ((max_entries / self.0).max(1), (max_bytes / self.0).max(1))
    }
}

/// Stale order entries a key may carry beyond twice its live ones before it is compacted.
const SLACK: usize = 16;

struct Usage {
    entries: usize,
    bytes: usize,
    order: VecDeque<(String, Instant)>,
}

/// Entries, bytes and the order of ids, per key.
pub struct Ledger<K> {
    keys: HashMap<K, Usage>,
}

impl<K> Default for Ledger<K> {
    fn default() -> Self {
        Ledger {
            keys: HashMap::new(),
        }
    }
}

/// What the ledger needs to know of the store's entries: the put time of a live id.
pub trait Live {
    fn put_at(&self, id: &str) -> Option<Instant>;
}

impl<E: HasPutTime> Live for HashMap<String, E> {
    fn put_at(&self, id: &str) -> Option<Instant> {
        self.get(id).map(HasPutTime::put_at)
    }
}

/// An entry of the store, by its put time.
pub trait HasPutTime {
    fn put_at(&self) -> Instant;
}

impl<K: Hash + Eq + Clone> Ledger<K> {
    /// Whether `key` holding one more entry of `bytes` would pass `(entries, bytes)`.
    pub fn over(&self, key: &K, (entries, max_bytes): (usize, usize), bytes: usize) -> bool {
        self.keys
            .get(key)
            .is_some_and(|u| u.entries + 1 > entries || u.bytes + bytes > max_bytes)
    }

    pub fn add(&mut self, key: K, id: &str, bytes: usize, at: Instant) {
        let usage = self.keys.entry(key).or_insert_with(|| Usage {
            entries: 0,
            bytes: 0,
            order: VecDeque::new(),
        });
        usage.entries += 1;
        usage.bytes += bytes;
        usage.order.push_back((id.to_string(), at));
    }

    /// One entry of `bytes` of `key` is gone.
    pub fn remove(&mut self, key: &K, bytes: usize, live: &dyn Live) {
        let Some(usage) = self.keys.get_mut(key) else {
            return;
        };
        usage.entries = usage.entries.saturating_sub(1);
        usage.bytes = usage.bytes.saturating_sub(bytes);
        if usage.entries == 0 {
            self.keys.remove(key);
            return;
        }
        if usage.order.len() > 2 * usage.entries + SLACK {
            usage
                .order
                .retain(|(id, at)| live.put_at(id).is_some_and(|put| put == *at));
        }
    }

    /// The oldest live id of `key` (taken out of its order).
    pub fn oldest(&mut self, key: &K, live: &dyn Live) -> Option<String> {
        let usage = self.keys.get_mut(key)?;
        while let Some((id, at)) = usage.order.pop_front() {
            if live.put_at(&id).is_some_and(|put| put == at) {
                return Some(id);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl HasPutTime for Instant {
        fn put_at(&self) -> Instant {
            *self
        }
    }

    #[test]
    fn counts_per_key_and_finds_the_oldest_live_id() {
        let t0 = Instant::now();
        let mut live: HashMap<String, Instant> = HashMap::new();
        let mut ledger = Ledger::default();
        for (n, id) in ["a", "b", "c"].into_iter().enumerate() {
            let at = t0 + std::time::Duration::from_millis(n as u64);
            live.insert(id.into(), at);
            ledger.add(1, id, 10, at);
        }
        assert!(!ledger.over(&1, (4, 40), 10));
        assert!(ledger.over(&1, (3, 100), 1), "entries");
        assert!(ledger.over(&1, (10, 35), 10), "bytes");
        assert!(!ledger.over(&2, (1, 1), 1), "a key with nothing");
        live.remove("a");
        ledger.remove(&1, 10, &live);
        assert_eq!(ledger.oldest(&1, &live).as_deref(), Some("b"), "a skipped");
        assert_eq!(Share(8).of(100, 1000), (12, 125));
        assert_eq!(Share(8).of(2, 3), (1, 1));
    }
}
