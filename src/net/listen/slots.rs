//! A listener's connections, oldest first, at most its `max_connections`. Past them a new
//! connection takes the place of the oldest one without a request in flight (one that has
//! sent no request head yet, or a part of one, or waits between requests), which is closed:
//! connections that only hold the listener (silent ones, a byte of a preface, a head trickled)
//! cannot keep a client with a request out, and the listener never holds more than its cap.
//! Only when every connection has a request in flight is the new one refused.
//!
//! Kept in accept order by a counter, so the oldest is the first key: admitting past the cap
//! looks at the busy connections before the first idle one, dropping a connection is a
//! logarithmic removal.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::oneshot;

use super::activity::Activity;

pub struct Slots {
    max: usize,
    open: Mutex<BTreeMap<u64, Entry>>,
    next_id: AtomicU64,
}

struct Entry {
    activity: Arc<Activity>,
    evict: oneshot::Sender<()>,
}

/// What became of a new connection.
pub enum Admit {
    Taken(Slot),
    /// Admitted in place of the oldest connection without a request in flight.
    Evicted(Slot),
    /// Every connection has a request in flight.
    Refused,
}

/// An admitted connection's place; given back when dropped.
pub struct Slot {
    id: u64,
    slots: Arc<Slots>,
    evicted: oneshot::Receiver<()>,
}

impl Slots {
    pub fn new(max: usize) -> Self {
        Slots {
            max: max.max(1),
            open: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(0),
        }
    }

    fn open(&self) -> MutexGuard<'_, BTreeMap<u64, Entry>> {
        // Nothing panics while holding it; a poisoned list is still consistent.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a connection whose requests in flight `activity` counts.
    pub fn admit(self: &Arc<Self>, activity: &Arc<Activity>) -> Admit {
        let mut open = self.open();
        let mut evicted = false;
        if open.len() >= self.max {
            let now = Instant::now();
            let idle = open
                .iter()
                .find(|(_, e)| e.activity.idle_for(now).is_some());
            let Some((&at, _)) = idle else {
                return Admit::Refused;
            };
            let oldest = open.remove(&at).expect("a key of the map");
            // Gone already when its connection ended meanwhile.
            let _ = oldest.evict.send(());
            evicted = true;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (evict, evicted_rx) = oneshot::channel();
        let activity = activity.clone();
        open.insert(id, Entry { activity, evict });
        let slot = Slot {
            id,
            slots: self.clone(),
            evicted: evicted_rx,
        };
        match evicted {
            true => Admit::Evicted(slot),
            false => Admit::Taken(slot),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.open().len()
    }
}

impl Slot {
    /// Runs `connection` until it ends (`Some`), or until the connection is evicted (`None`,
    /// and the connection dropped).
    pub async fn serve<F: Future>(mut self, connection: F) -> Option<F::Output> {
        tokio::select! {
            // The connection first, at every poll: an eviction is rare, and an unbiased select
            // draws a random number at every poll (every event of a stream) to pick an order.
            biased;
            done = connection => Some(done),
            _ = &mut self.evicted => None,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.open().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_the_oldest_without_a_request_goes_and_busy_ones_stay() {
        let slots = Arc::new(Slots::new(2));
        let (a, b, c) = (
            Activity::new(Instant::now()),
            Activity::new(Instant::now()),
            Activity::new(Instant::now()),
        );
        let busy_a = a.begin();
        let Admit::Taken(mut slot_a) = slots.admit(&a) else {
            panic!("room")
        };
        let Admit::Taken(mut slot_b) = slots.admit(&b) else {
            panic!("room")
        };
        let Admit::Evicted(_slot_c) = slots.admit(&c) else {
            panic!("b has no request in flight")
        };
        assert!(slot_b.evicted.try_recv().is_ok(), "b was told");
        assert!(slot_a.evicted.try_recv().is_err(), "a is busy");
        drop(slot_b);
        assert_eq!(slots.len(), 2, "b's place went to c");
        let _busy_c = c.begin();
        assert!(matches!(slots.admit(&b), Admit::Refused), "all busy");
        drop(busy_a);
        assert!(matches!(slots.admit(&b), Admit::Evicted(_)));
        drop(slot_a);
        assert_eq!(slots.len(), 1, "c alone once the new one is dropped too");
    }
}
