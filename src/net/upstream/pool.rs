//! Idle HTTP/1 connections to the upstream, kept for the next request like nginx's `keepalive`:
//! at most [`POOL_MAX_IDLE`], each for at most [`POOL_IDLE_TIMEOUT`], the most recently used
//! first. A connection is checked for closure (driven once) before it is handed out; while
//! connections wait, a reaper closes the expired and the closed ones every [`REAP_EVERY`].
//!
//! Written here rather than taken from hyper-util: its pool comes with its client, which gives
//! every connection a task of its own (see the module above), and holds hyper's connections.
//! It holds any [`Reusable`] connection: toolpulse's own HTTP/1 ones.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// Idle connections closed after this long (gateways often close at 60–120 s).
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// At most this many idle connections are kept: after a burst of streams the rest close at
/// once instead of holding file descriptors until the idle timeout.
pub const POOL_MAX_IDLE: usize = 128;
/// How often waiting connections are checked (the upstream may close them).
pub const REAP_EVERY: Duration = Duration::from_secs(10);

/// A connection that may be kept for another request.
pub trait Reusable: Send + 'static {
    /// Whether it can still take a request; looks without waiting.
    fn is_open(&mut self) -> bool;
}

/// A connection with no request on it.
pub struct Idle<C> {
    pub conn: Box<C>,
    since: Instant,
}

impl<C: Reusable> Idle<C> {
    pub fn new(conn: Box<C>) -> Idle<C> {
        Idle {
            conn,
            since: Instant::now(),
        }
    }

    /// Whether the connection can still take a request (the upstream did not close or reset
    /// it, or send anything, while it waited); looks without waiting.
    fn is_open(&mut self) -> bool {
        self.conn.is_open()
    }

    fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.since) >= POOL_IDLE_TIMEOUT
    }
}

/// The idle connections to one upstream, and whether a reaper runs for them.
pub struct Pool<C> {
    /// Oldest first.
    idle: Mutex<VecDeque<Idle<C>>>,
    reaping: AtomicBool,
}

impl<C> Default for Pool<C> {
    fn default() -> Self {
        Pool {
            idle: Mutex::default(),
            reaping: AtomicBool::default(),
        }
    }
}

impl<C: Reusable> Pool<C> {
    fn idle(&self) -> std::sync::MutexGuard<'_, VecDeque<Idle<C>>> {
        self.idle
            .lock()
            .expect("never poisoned: no panics while held")
    }

    pub fn len(&self) -> usize {
        self.idle().len()
    }

    /// The most recently used connection that is still open.
    pub fn take(&self) -> Option<Idle<C>> {
        let now = Instant::now();
        loop {
            let mut candidate = self.idle().pop_back()?;
            if candidate.expired(now) {
                // The rest are older.
                self.idle().clear();
                return None;
            }
            if candidate.is_open() {
                return Some(candidate);
            }
        }
    }

    /// Keeps `idle` for the next request (the oldest goes when the pool is full).
    pub fn put(self: &Arc<Self>, mut idle: Idle<C>) {
        if !idle.is_open() {
            return;
        }
        idle.since = Instant::now();
        let oldest = {
            let mut pool = self.idle();
            pool.push_back(idle);
            (pool.len() > POOL_MAX_IDLE).then(|| pool.pop_front())
        };
        drop(oldest);
        // Outside a runtime (a body dropped after it ended) nothing reaps; `take` still checks.
        if let Ok(runtime) = tokio::runtime::Handle::try_current()
            && !self.reaping.swap(true, Ordering::AcqRel)
        {
            runtime.spawn(reap(Arc::downgrade(self)));
        }
    }

    /// Closes the expired and the closed connections; whether any are left.
    fn reap(&self) -> bool {
        let now = Instant::now();
        let mut pool = self.idle();
        pool.retain_mut(|idle| !idle.expired(now) && idle.is_open());
        !pool.is_empty()
    }
}

/// Runs while connections wait in the pool.
async fn reap<C: Reusable>(pool: std::sync::Weak<Pool<C>>) {
    loop {
        tokio::time::sleep(REAP_EVERY).await;
        let Some(pool) = pool.upgrade() else { return };
        if !pool.reap() {
            pool.reaping.store(false, Ordering::Release);
            // One put may have come between the reap and the flag: it found the flag set.
            if pool.len() == 0 || pool.reaping.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }
}
