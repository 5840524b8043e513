//! A served connection under watch: closed gracefully (HTTP/1 after its response, HTTP/2 with
//! GOAWAY) when it has been idle too long or toolpulse drains, and dropped outright when a
//! graceful close does not finish in [`CLOSE_GRACE`]. hyper-util's `GracefulShutdown` cannot
//! watch a wrapped connection (its trait is sealed), so [`Shutdown`] does its work here: a
//! token every connection watches and a tracker of the connections still open.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::time::Sleep;
use tokio_util::task::TaskTracker;

use super::activity::Activity;
use crate::metrics::ConnectionClose;
use crate::net::drain::{Signal, Watch};

/// How long an idle connection asked to close gracefully may take before it is dropped.
pub const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Why a watched connection was closed by toolpulse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// No request head within the head timeout of the accept (or, on HTTP/1, of the previous
    /// response: the connection times that itself).
    NoRequest,
    /// No request in flight for the idle timeout.
    Idle,
    /// The client took no byte of a response for the send timeout.
    SendTimeout,
}

impl Closed {
    /// The `reason` label of `toolpulse_client_connections_closed_total` (and of the log line).
    pub fn reason(self) -> ConnectionClose {
        match self {
            Closed::NoRequest => ConnectionClose::NoRequest,
            Closed::Idle => ConnectionClose::Idle,
            Closed::SendTimeout => ConnectionClose::SendTimeout,
        }
    }
}

/// The connections of one listener, and the signal that drains them.
#[derive(Clone, Default)]
pub struct Shutdown {
    draining: Signal,
    open: TaskTracker,
}

impl Shutdown {
    /// Runs `task` (a connection's) until it ends; drain waits for it.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.open.spawn(task);
    }

    /// Asks every connection to close gracefully; the returned future resolves once all did.
    pub fn drain(&self) -> impl Future<Output = ()> + use<> {
        self.draining.raise();
        self.open.close();
        let open = self.open.clone();
        async move { open.wait().await }
    }
}

/// A connection `C` and how to ask it to close gracefully.
pub struct Watched<C> {
    conn: Pin<Box<C>>,
    close: fn(Pin<&mut C>),
    activity: Arc<Activity>,
    /// Before the first request head: how long from the accept.
    head_timeout: Duration,
    /// After it: how long with no request in flight.
    idle_timeout: Duration,
    /// How long a response may wait for the client ([`Activity::oldest_wait`]).
    send_timeout: Duration,
    timer: Pin<Box<Sleep>>,
    /// The timer was reset since it was last polled (its waker must be registered again).
    timer_reset: bool,
    drain: Watch,
    /// The waker the timer holds: while the task polls with the same one, the timer is looked
    /// at (an atomic load), not polled, so a busy connection pays next to nothing per event
    /// for its watch (the drain's [`Watch`] does the same).
    registered: Option<Waker>,
    closing: bool,
    closed: Option<Closed>,
    /// Given up on: dropped after one more poll (which flushes what the close queued).
    dropping: bool,
}

impl<C> Watched<C> {
    /// Watches `conn`, accepted when `activity` began; `close` asks it to close gracefully.
    pub fn new(
        conn: C,
        close: fn(Pin<&mut C>),
        activity: Arc<Activity>,
        shutdown: &Shutdown,
        limits: &crate::config::ClientLimits,
    ) -> Self {
        let (head_timeout, idle_timeout) = (limits.head_timeout, limits.idle_timeout);
        let first = tokio::time::Instant::now() + head_timeout;
        Watched {
            conn: Box::pin(conn),
            close,
            activity,
            head_timeout,
            idle_timeout,
            send_timeout: limits.send_timeout,
            timer: Box::pin(tokio::time::sleep_until(first)),
            timer_reset: false,
            drain: shutdown.draining.watch(),
            registered: None,
            closing: false,
            closed: None,
            dropping: false,
        }
    }

    /// Why toolpulse closed it, if it did (for the caller's metrics and log).
    pub fn closed(&self) -> Option<Closed> {
        self.closed
    }

    /// The connection watched.
    pub fn conn(&self) -> &C {
        &self.conn
    }

    fn close(&mut self) {
        if !self.closing {
            self.closing = true;
            (self.close)(self.conn.as_mut());
        }
    }

    /// The timer fired: closes an idle connection, or sets the timer for when it would be
    /// idle long enough. A connection that never sent a request head is given up at once (a
    /// graceful close has nothing to finish, and hyper's version sniffing would only notice it
    /// on its next read); one that was served gets [`CLOSE_GRACE`] to close, then is given up
    /// too. A drain's graceful close has no grace of its own: the drain timeout ends it. A
    /// connection whose response has waited for the client for the send timeout is given up
    /// at once, its streams with it: the stream cannot be ended alone, as hyper asks its body
    /// for nothing more until the client makes room.
    fn on_timer(&mut self) {
        if self.closed.is_some() {
            self.dropping = true;
            return;
        }
        let now = Instant::now();
        let (limit, reason) = match self.activity.served() {
            false => (self.head_timeout, Closed::NoRequest),
            true => (self.idle_timeout, Closed::Idle),
        };
        let wait = match self.activity.idle_for(now) {
            Some(idle) if idle >= limit => {
                self.closed = Some(reason);
                self.close();
                self.dropping = reason == Closed::NoRequest;
                CLOSE_GRACE
            }
            Some(idle) => limit - idle,
            None => match self.activity.oldest_wait() {
                Some(since) if now.saturating_duration_since(since) >= self.send_timeout => {
                    self.closed = Some(Closed::SendTimeout);
                    self.close();
                    self.dropping = true;
                    CLOSE_GRACE
                }
                Some(since) => {
                    let waited = now.saturating_duration_since(since);
                    self.send_timeout.saturating_sub(waited)
                }
                // Looked at again within the send timeout: a wait that starts meanwhile is
                // then seen with time to spare, and timed to its end.
                None => limit.min(self.send_timeout),
            },
        };
        let deadline = tokio::time::Instant::from_std(now) + wait;
        self.timer.as_mut().reset(deadline);
        self.timer_reset = true;
    }
}

impl<C, E> Future for Watched<C>
where
    C: Future<Output = Result<(), E>>,
{
    type Output = Result<(), E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Every field is boxed or Unpin: so is Watched.
        let this = self.get_mut();
        let fresh = !this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()));
        if fresh {
            this.registered = Some(cx.waker().clone());
        }
        if !this.closing && this.drain.poll(cx) {
            this.close();
        }
        loop {
            if let Poll::Ready(done) = this.conn.as_mut().poll(cx) {
                return Poll::Ready(done);
            }
            if this.dropping {
                return Poll::Ready(Ok(()));
            }
            let poll = fresh || this.timer_reset || this.timer.is_elapsed();
            if !poll || this.timer.as_mut().poll(cx).is_pending() {
                this.timer_reset = false;
                return Poll::Pending;
            }
            this.on_timer();
        }
    }
}
