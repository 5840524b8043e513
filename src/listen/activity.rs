//! Whether a connection is in use: how many of its requests are in flight (from the head read
//! to the response body's end), and since when none is. A connection none of whose requests
//! is in flight is idle, and an idle connection is closed after a while ([`super::watched`]).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body::{Body, Frame, SizeHint};

/// One connection's requests in flight.
#[derive(Debug)]
pub struct Activity {
    since: Instant,
    active: AtomicUsize,
    /// When the last request in flight ended, as nanoseconds after `since`.
    idle_at: AtomicU64,
    /// Whether a request head was ever read.
    served: AtomicBool,
}

impl Activity {
    /// A connection accepted at `now`: idle from then on, not yet served.
    pub fn new(now: Instant) -> Arc<Activity> {
        Arc::new(Activity {
            since: now,
            active: AtomicUsize::new(0),
            idle_at: AtomicU64::new(0),
            served: AtomicBool::new(false),
        })
    }

    /// A request head was read: the connection is in use until the guard is dropped.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.served.store(true, Ordering::Relaxed);
        self.active.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// Whether any request head was read.
    pub fn served(&self) -> bool {
        self.served.load(Ordering::Relaxed)
    }

    /// How long the connection has been idle at `now`; `None` while a request is in flight.
    pub fn idle_for(&self, now: Instant) -> Option<Duration> {
        if self.active.load(Ordering::Acquire) > 0 {
            return None;
        }
        let idle_at = self.since + Duration::from_nanos(self.idle_at.load(Ordering::Acquire));
        Some(now.saturating_duration_since(idle_at))
    }
}

/// A request in flight; dropped with its response body.
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        let nanos = activity.since.elapsed().as_nanos();
        // Stored before the count drops, so an idle count always has its time.
        activity
            .idle_at
            .fetch_max(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::AcqRel);
        activity.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request in flight until it ends or is dropped.
pub struct Tracked<B> {
    body: B,
    _in_flight: InFlight,
}

impl<B> Tracked<B> {
    pub fn new(body: B, in_flight: InFlight) -> Self {
        Tracked {
            body,
            _in_flight: in_flight,
        }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_from_accept_busy_while_a_request_is_in_flight_idle_again_after() {
        let start = Instant::now();
        let activity = Activity::new(start);
        assert!(!activity.served());
        let later = start + Duration::from_secs(3);
        assert_eq!(activity.idle_for(later), Some(Duration::from_secs(3)));
        let (one, two) = (activity.begin(), activity.begin());
        assert!(activity.served());
        assert_eq!(activity.idle_for(later), None);
        drop(one);
        assert_eq!(activity.idle_for(later), None, "one still in flight");
        drop(two);
        let idle = activity.idle_for(Instant::now() + Duration::from_secs(5));
        assert!(idle.is_some_and(|d| d >= Duration::from_secs(5)));
        assert!(idle.is_some_and(|d| d < Duration::from_secs(6)), "{idle:?}");
    }
}
