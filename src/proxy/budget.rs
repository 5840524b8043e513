//! Request bodies toolpulse reads whole (a `POST …/responses` on the proxy, an MCP POST on the
//! front), held in memory until they are sent on: all of them together within one budget of
//! bytes (`[clients] body_buffer_bytes`, shared by the listeners), each within a deadline
//! (`body_timeout_ms`). A body that would go over the budget is refused at once (503, counted)
//! rather than waited for: a waiting body would hold its part of the budget while it waits.
//! Bodies toolpulse does not read stream through, and may pause at most `body_timeout_ms`
//! between two frames ([`Paced`]).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::listen::ClientBody;
use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Bodies up to this size may use the small bodies' reserve.
pub const SMALL_BODY_BYTES: usize = 64 * 1024;

/// The bytes of request bodies held in memory at once. A quarter is kept for small bodies
/// (at most [`SMALL_BODY_BYTES`]): large bodies stalled to pin memory can take the rest but
/// never that, so ordinary requests (most are a few KiB) go on being read while such an
/// attack lasts.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    shared: Arc<Semaphore>,
    small: Arc<Semaphore>,
    total: usize,
}

/// The part of the budget one body holds; given back when dropped or released.
#[derive(Debug, Default)]
pub struct Held {
    shared: Option<OwnedSemaphorePermit>,
    small: Option<OwnedSemaphorePermit>,
}

impl Held {
    pub fn release(&mut self) {
        self.shared.take();
        self.small.take();
    }
}

fn merge(into: &mut Option<OwnedSemaphorePermit>, permit: OwnedSemaphorePermit) {
    match into {
        Some(held) => held.merge(permit),
        None => *into = Some(permit),
    }
}

impl BodyBudget {
    pub fn new(total: usize) -> Self {
        let total = total.min(Semaphore::MAX_PERMITS);
        let small = total / 4;
        BodyBudget {
            shared: Arc::new(Semaphore::new(total - small)),
            small: Arc::new(Semaphore::new(small)),
            total,
        }
    }

    /// The bytes held now.
    pub fn held(&self) -> usize {
        let free = self.shared.available_permits() + self.small.available_permits();
        self.total.saturating_sub(free)
    }

    /// Takes `n` more bytes of the budget for a body whose buffer is then `size` bytes; false
    /// when there are not that many left for it. (Also for the body a next turn's mapping
    /// builds, `super::request_body`.)
    pub(crate) fn take(&self, n: usize, size: usize, held: &mut Held) -> bool {
        let Ok(n) = u32::try_from(n) else {
            return false;
        };
        if let Ok(permit) = self.shared.clone().try_acquire_many_owned(n) {
            merge(&mut held.shared, permit);
            return true;
        }
        if size > SMALL_BODY_BYTES {
            return false;
        }
        match self.small.clone().try_acquire_many_owned(n) {
            Ok(permit) => {
                merge(&mut held.small, permit);
                true
            }
            Err(_) => false,
        }
    }
}

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("could not read the request body: {0}")]
    Client(BoxError),
    #[error("the request body did not arrive within {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("toolpulse holds as many request bodies as it may (body_buffer_bytes); retry shortly")]
    OverBudget,
}

impl ReadError {
    /// The `reason` label of `toolpulse_request_bodies_refused_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            ReadError::Client(_) => "unreadable",
            ReadError::Timeout(_) => "timeout",
            ReadError::OverBudget => "budget",
        }
    }
}

/// A body read (up to a limit): its frames (the data in one, then trailers if any), the part
/// of the budget they hold, and the unread rest of a body over the limit.
pub struct Read {
    pub frames: VecDeque<Frame<Bytes>>,
    pub held: Held,
    pub rest: Option<Paced>,
}

/// The first buffer of a body whose length is not announced; it doubles from there.
const FIRST_BUFFER_BYTES: usize = 16 * 1024;

/// Reads `body` to its end, or until more than `limit` bytes were read (then the unread rest
/// comes back too), within `timeout` and `budget`. The data is copied into one buffer of its
/// own as it arrives, sized by `Content-Length` when there is one (else doubling), and the
/// budget is charged for that buffer's capacity, not the data's length: a frame of hyper's
/// keeps its whole read buffer alive, so holding frames would hold more than they say.
pub async fn read_up_to(
    mut body: ClientBody,
    limit: usize,
    budget: &BodyBudget,
    timeout: Duration,
) -> Result<Read, ReadError> {
    let deadline = Instant::now() + timeout;
    let announced = body
        .size_hint()
        .exact()
        .and_then(|n| usize::try_from(n).ok());
    let mut held = Held::default();
    let mut data = BytesMut::new();
    let mut trailers = None;
    let mut rest = None;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(ReadError::Timeout(timeout)),
            Ok(None) => break,
            Ok(Some(frame)) => frame.map_err(ReadError::Client)?,
        };
        let chunk = match frame.into_data() {
            Ok(chunk) => chunk,
            Err(frame) => {
                trailers = Some(frame);
                continue;
            }
        };
        let needed = data.len() + chunk.len();
        if needed > data.capacity() {
            let first = announced
                .filter(|n| *n <= limit)
                .unwrap_or(FIRST_BUFFER_BYTES);
            let target = needed.max(2 * data.capacity()).max(first);
            if !budget.take(target - data.capacity(), target, &mut held) {
                return Err(ReadError::OverBudget);
            }
            data.reserve(target - data.len());
            // Whatever the allocator gave beyond the target is charged too.
            let extra = data.capacity().saturating_sub(target);
            if extra > 0 && !budget.take(extra, data.capacity(), &mut held) {
                return Err(ReadError::OverBudget);
            }
        }
        data.extend_from_slice(&chunk);
        if data.len() > limit {
            rest = Some(Paced::new(body, timeout));
            break;
        }
    }
    let mut frames = VecDeque::from([Frame::data(data.freeze())]);
    frames.extend(trailers);
    Ok(Read { frames, held, rest })
}

/// A request body streamed as it arrives, which may pause at most its timeout between frames.
pub struct Paced {
    body: ClientBody,
    timeout: Duration,
    timer: Pin<Box<Sleep>>,
}

impl Paced {
    pub fn new(body: ClientBody, timeout: Duration) -> Self {
        Paced {
            body,
            timeout,
            timer: Box::pin(tokio::time::sleep(timeout)),
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Body for Paced {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = Instant::now() + this.timeout;
                this.timer.as_mut().reset(next);
                Poll::Ready(frame)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(ReadError::Timeout(this.timeout).into()))),
                Poll::Pending => Poll::Pending,
            },
        }
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
    fn the_budget_is_taken_and_given_back_and_a_quarter_is_kept_for_small_bodies() {
        let mib = 1 << 20;
        let budget = BodyBudget::new(8 * mib);
        let mut large = Held::default();
        assert!(budget.take(4 * mib, 4 * mib, &mut large));
        assert!(budget.take(2 * mib, 6 * mib, &mut large));
        assert_eq!(budget.held(), 6 * mib);
        let mut other = Held::default();
        assert!(
            !budget.take(mib, mib, &mut other),
            "large bodies get three quarters"
        );
        let mut small = Held::default();
        assert!(
            budget.take(1000, 1000, &mut small),
            "a small body still fits"
        );
        assert_eq!(budget.held(), 6 * mib + 1000);
        drop(large);
        small.release();
        assert_eq!(budget.held(), 0);
        assert!(budget.take(6 * mib, 6 * mib, &mut other));
    }
}
