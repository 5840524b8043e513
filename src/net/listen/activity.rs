//! Whether a connection is in use: how many of its requests are in flight (from the head read
//! to the response body's end), and since when none is. A connection none of whose requests
//! is in flight is idle, and an idle connection is closed after a while (by the listener's
//! `watched`, which reads this).
//!
//! And, for HTTP/2, which responses wait for the client: a response body that gave hyper a
//! frame is not asked for the next one until the client's flow-control window (or its TCP
//! window) has room, so a frame given and not followed by another ask is a response the
//! client is not taking. The oldest such wait is what `watched` holds against the send timeout
//! (HTTP/1's own server times its writes itself).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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
    /// The responses waiting for the client to take a frame, and since when; at most one per
    /// concurrent stream.
    waits: Mutex<Vec<(u64, Instant)>>,
    /// Names the next response whose waits are watched.
    next_watched: AtomicU64,
}

impl Activity {
    /// A connection accepted at `now`: idle from then on, not yet served.
    pub fn new(now: Instant) -> Arc<Activity> {
        Arc::new(Activity {
            since: now,
            active: AtomicUsize::new(0),
            idle_at: AtomicU64::new(0),
            served: AtomicBool::new(false),
            waits: Mutex::new(Vec::new()),
            next_watched: AtomicU64::new(0),
        })
    }

    fn waits(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Instant)>> {
        // Nothing panics while holding it; a poisoned list is still consistent.
        self.waits.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Since when the response that has waited longest for its client has waited.
    pub fn oldest_wait(&self) -> Option<Instant> {
        self.waits().iter().map(|(_, since)| *since).min()
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
    in_flight: InFlight,
    /// Set when its waits for the client are watched: its name, and whether it waits now.
    watched: Option<(u64, bool)>,
}

impl<B> Tracked<B> {
    pub fn new(body: B, in_flight: InFlight) -> Self {
        Tracked {
            body,
            in_flight,
            watched: None,
        }
    }

    /// Notes each frame given and not yet followed by another ask ([`Activity::oldest_wait`]).
    pub fn watch_waits(mut self) -> Self {
        let name = self
            .in_flight
            .0
            .next_watched
            .fetch_add(1, Ordering::Relaxed);
        self.watched = Some((name, false));
        self
    }

    fn stop_waiting(&mut self) {
        if let Some((name, waiting @ true)) = &mut self.watched {
            *waiting = false;
            self.in_flight.0.waits().retain(|(n, _)| n != name);
        }
    }
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        self.stop_waiting();
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        if this.watched.is_none() {
            // Every HTTP/1.1 response (its server times its writes itself): the body's poll
            // as it is, with no frame to look at on the way back.
            return Pin::new(&mut this.body).poll_frame(cx);
        }
        this.stop_waiting();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let (Some((name, waiting)), Poll::Ready(Some(Ok(_)))) = (&mut this.watched, &polled) {
            *waiting = true;
            this.in_flight.0.waits().push((*name, Instant::now()));
        }
        polled
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

    #[test]
    fn a_watched_body_waits_from_a_frame_given_until_it_is_asked_again() {
        use http_body_util::{BodyExt, StreamBody};
        let activity = Activity::new(Instant::now());
        let frames = futures::stream::iter([Ok::<_, std::convert::Infallible>(Frame::data(
            bytes::Bytes::from_static(b"x"),
        ))]);
        let mut body = Tracked::new(StreamBody::new(frames), activity.begin()).watch_waits();
        assert_eq!(activity.oldest_wait(), None);
        let given = Instant::now();
        futures::executor::block_on(body.frame())
            .expect("a frame")
            .expect("ok");
        assert!(activity.oldest_wait().is_some_and(|since| since >= given));
        assert!(futures::executor::block_on(body.frame()).is_none());
        assert_eq!(activity.oldest_wait(), None, "asked again");
        drop(body);
        assert_eq!(activity.oldest_wait(), None);
    }
}
