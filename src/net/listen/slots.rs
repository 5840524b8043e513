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
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Instant;

use super::activity::Activity;
use crate::net::drain::{Signal, Watch};

pub struct Slots {
    max: usize,
    open: Mutex<BTreeMap<u64, Entry>>,
    next_id: AtomicU64,
}

struct Entry {
    activity: Arc<Activity>,
    evict: Signal,
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
    /// Raised when the connection is evicted; looked at with an atomic load at each poll of a
    /// connection whose task's waker stays the same ([`Watch`]), where a channel's receiver
    /// was polled at every event of every stream.
    evicted: Watch,
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
        let mut evicted_one = false;
        if open.len() >= self.max {
            let now = Instant::now();
            let idle = open
                .iter()
                .find(|(_, e)| e.activity.idle_for(now).is_some());
            let Some((&at, _)) = idle else {
                return Admit::Refused;
            };
            let oldest = open.remove(&at).expect("a key of the map");
            // Nobody watches when its connection ended meanwhile.
            oldest.evict.raise();
            evicted_one = true;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let evict = Signal::default();
        let evicted = evict.watch();
        let activity = activity.clone();
        open.insert(id, Entry { activity, evict });
        let slot = Slot {
            id,
            slots: self.clone(),
            evicted,
        };
        match evicted_one {
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
        let mut connection = pin!(connection);
        // The connection first, at every poll: an eviction is rare.
        std::future::poll_fn(|cx| {
            if let Poll::Ready(done) = connection.as_mut().poll(cx) {
                return Poll::Ready(Some(done));
            }
            match self.evicted.poll(cx) {
                true => Poll::Ready(None),
                false => Poll::Pending,
            }
        })
        .await
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
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(slot_b.evicted.poll(&mut cx), "b was told");
        assert!(!slot_a.evicted.poll(&mut cx), "a is busy");
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
