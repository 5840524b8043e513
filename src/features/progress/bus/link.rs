//! The connection to Redis and whether it works now.
//!
//! Every operation has a time limit ([`OP_TIMEOUT`]) and a name (`op`, the label of
//! `toolpulse_progress_bus_errors_total`). The first failure of an outage marks the bus down
//! and logs it once; while it is down nothing waits for Redis: the hub decides from this
//! replica's own streams (exact matches only) and the registrar probes with back-off, marks the
//! bus back (logged once) and registers the open calls again.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::Notify;

use super::scripts::Scripts;
use crate::metrics::{BusOp, Metrics};

/// One command, script or pipeline: Redis answers in well under a millisecond when healthy, so
/// this only bounds how long a report or an MCP call's binding can wait when it is not.
pub const OP_TIMEOUT: Duration = Duration::from_millis(500);
/// Opening a connection (TCP, TLS, AUTH).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Back-off between attempts to reach a bus that is down: doubled per failure, up to the max.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);

const CONNECTING: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

/// The shared connection and the bus's state.
pub struct Link {
    pub client: redis::Client,
    conn: ConnectionManager,
    pub prefix: String,
    /// This process's id in the registry (random, per start).
    pub replica: String,
    pub scripts: Scripts,
    pub metrics: Arc<Metrics>,
    state: AtomicU8,
    /// Woken when the bus goes down, so the registrar starts probing at once.
    pub went_down: Notify,
    /// Woken when the bus is back, so the subscriber reconnects at once.
    pub came_back: Notify,
    /// Woken when the first probe has its answer, up or down ([`Link::settled`]).
    first_answer: Notify,
}

impl Link {
    /// A link to `url`; nothing is connected yet (the registrar's first probe does it), so
    /// toolpulse starts and serves whether or not Redis is there.
    pub fn new(url: &str, prefix: &str, metrics: Arc<Metrics>) -> redis::RedisResult<Link> {
        // rediss:// uses rustls with the process's default provider: ring, as the proxy's client.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(OP_TIMEOUT))
            .set_min_delay(BACKOFF_MIN)
            .set_max_delay(BACKOFF_MAX)
            .set_number_of_retries(1);
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
        metrics.progress_bus_up.set(0);
        Ok(Link {
            client,
            conn,
            prefix: prefix.to_string(),
            replica: format!("{:016x}", crate::features::progress::random_u64()),
            scripts: Scripts::default(),
            metrics,
            state: AtomicU8::new(CONNECTING),
            went_down: Notify::new(),
            came_back: Notify::new(),
            first_answer: Notify::new(),
        })
    }

    /// A handle on the shared connection (cheap: the manager is reference-counted).
    pub fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    pub fn is_up(&self) -> bool {
        self.state.load(Ordering::Acquire) == UP
    }

    /// Returns once the first probe has its answer, up or down (at once if it has). A replica
    /// that serves before would keep a first turn's hosted pairs to itself.
    pub async fn settled(&self) {
        let answered = self.first_answer.notified();
        tokio::pin!(answered);
        // Registered before the look, so an answer between the two is not missed.
        answered.as_mut().enable();
        if self.state.load(Ordering::Acquire) != CONNECTING {
            return;
        }
        answered.await;
    }

    /// Runs one operation with the time limit; a failure is counted and marks the bus down.
    pub async fn run<T, E: Display>(
        &self,
        op: BusOp,
        operation: impl Future<Output = Result<T, E>>,
    ) -> Option<T> {
        match tokio::time::timeout(OP_TIMEOUT, operation).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(error)) => {
                self.failed(op, &error);
                None
            }
            Err(_) => {
                let message = format!("no answer within {} ms", OP_TIMEOUT.as_millis());
                self.failed(op, &message);
                None
            }
        }
    }

    /// Counts a failed operation; the first of an outage logs that the bus is down.
    pub fn failed(&self, op: BusOp, error: &dyn Display) {
        self.count_error(op, 1);
        let before = self.state.swap(DOWN, Ordering::AcqRel);
        if before == CONNECTING {
            self.first_answer.notify_waiters();
        }
        if before != DOWN {
            self.metrics.progress_bus_up.set(0);
            tracing::warn!(
                op = op.as_str(),
                %error,
                "progress bus down: progress is matched by call_id or trace id only, on this \
                 replica's own streams, until it is back"
            );
            self.went_down.notify_one();
        }
    }

    /// Counts `n` failures of `op` that did not try Redis (it was down, or a queue was full).
    pub fn count_error(&self, op: BusOp, n: u64) {
        self.metrics.bus_error(op, n);
    }

    /// The bus answered a probe: it is up (logged when it comes back from an outage).
    pub fn reached(&self) {
        let before = self.state.swap(UP, Ordering::AcqRel);
        self.metrics.progress_bus_up.set(1);
        match before {
            DOWN => {
                tracing::info!("progress bus back: registering the open calls again");
                // A permit, not a wake-up of current waiters: the subscriber may be between
                // two attempts right now, and must not then sleep out its back-off.
                self.came_back.notify_one();
            }
            CONNECTING => {
                tracing::info!(replica = %self.replica, "progress bus connected");
                self.first_answer.notify_waiters();
            }
            _ => {}
        }
    }

    /// `PING`, with the time limit.
    pub async fn probe(&self) -> bool {
        let mut conn = self.conn();
        let command = redis::cmd("PING");
        let ping = command.query_async::<String>(&mut conn);
        match tokio::time::timeout(OP_TIMEOUT, ping).await {
            Ok(Ok(_)) => true,
            Ok(Err(error)) => {
                self.failed(BusOp::Connect, &error);
                false
            }
            Err(_) => {
                self.failed(BusOp::Connect, &"no answer to PING");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn link() -> Link {
        // Lazy: nothing connects to this address.
        Link::new("redis://127.0.0.1:1", "t", Arc::new(Metrics::new())).expect("a link")
    }

    fn is_pending(settled: std::pin::Pin<&mut impl Future<Output = ()>>) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        settled.poll(&mut cx) == Poll::Pending
    }

    /// `settled` waits for the first probe's answer, up or down, and then no longer waits.
    #[tokio::test]
    async fn settled_waits_for_the_first_answer_either_way() {
        let up = link();
        let mut settled = pin!(up.settled());
        assert!(is_pending(settled.as_mut()), "no answer yet");
        up.reached();
        settled.await;
        up.settled().await;

        let down = link();
        let mut settled = pin!(down.settled());
        assert!(is_pending(settled.as_mut()), "no answer yet");
        down.failed(BusOp::Connect, &"refused");
        settled.await;
        assert!(!down.is_up());
    }
}
