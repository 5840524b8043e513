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

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// The bytes of request bodies held in memory at once.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: usize,
}

impl BodyBudget {
    pub fn new(total: usize) -> Self {
        BodyBudget {
            bytes: Arc::new(Semaphore::new(total.min(Semaphore::MAX_PERMITS))),
            total,
        }
    }

    /// The bytes held now.
    pub fn held(&self) -> usize {
        self.total.saturating_sub(self.bytes.available_permits())
    }

    /// Takes `n` bytes of the budget into `held`; false when there are not that many left.
    fn take(&self, n: usize, held: &mut Option<OwnedSemaphorePermit>) -> bool {
        let Ok(n) = u32::try_from(n) else {
            return false;
        };
        match self.bytes.clone().try_acquire_many_owned(n) {
            Ok(permit) => {
                match held {
                    Some(held) => held.merge(permit),
                    None => *held = Some(permit),
                }
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
    Client(#[from] hyper::Error),
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

/// A body read (up to a limit): its frames, the part of the budget they hold, and the unread
/// rest of a body over the limit.
pub struct Read {
    pub frames: VecDeque<Frame<Bytes>>,
    pub held: Option<OwnedSemaphorePermit>,
    pub rest: Option<Paced>,
}

/// Reads `body` to its end, or until more than `limit` bytes were read (then the unread rest
/// comes back too), within `timeout` and `budget`.
pub async fn read_up_to(
    mut body: Incoming,
    limit: usize,
    budget: &BodyBudget,
    timeout: Duration,
) -> Result<Read, ReadError> {
    let deadline = Instant::now() + timeout;
    let mut read = Read {
        frames: VecDeque::new(),
        held: None,
        rest: None,
    };
    let mut bytes = 0;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(ReadError::Timeout(timeout)),
            Ok(None) => return Ok(read),
            Ok(Some(frame)) => frame?,
        };
        let len = frame.data_ref().map_or(0, Bytes::len);
        if !budget.take(len, &mut read.held) {
            return Err(ReadError::OverBudget);
        }
        bytes += len;
        read.frames.push_back(frame);
        if bytes > limit {
            read.rest = Some(Paced::new(body, timeout));
            return Ok(read);
        }
    }
}

/// A request body streamed as it arrives, which may pause at most its timeout between frames.
pub struct Paced {
    body: Incoming,
    timeout: Duration,
    timer: Pin<Box<Sleep>>,
}

impl Paced {
    pub fn new(body: Incoming, timeout: Duration) -> Self {
        Paced {
            body,
            timeout,
            timer: Box::pin(tokio::time::sleep(timeout)),
        }
    }

    pub fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    pub fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
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
                Poll::Ready(frame.map(|f| f.map_err(BoxError::from)))
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
    fn the_budget_is_taken_and_given_back() {
        let budget = BodyBudget::new(100);
        let mut held = None;
        assert!(budget.take(60, &mut held));
        assert!(budget.take(40, &mut held));
        assert_eq!(budget.held(), 100);
        let mut other = None;
        assert!(!budget.take(1, &mut other), "over the budget");
        drop(held);
        assert_eq!(budget.held(), 0);
        assert!(budget.take(100, &mut other));
    }
}
