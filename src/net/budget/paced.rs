//! A request body streamed through as it arrives ([`Paced`]), which may pause at most its
//! timeout between two frames; and the [`Fault`] it leaves when the client's body fails (cut
//! short, malformed, too slow), so that the request is answered as the client's error (400 or
//! 408, counted with the refused bodies), not as the upstream's.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::error::ReadError;
use crate::net::listen::ClientBody;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Set once when a streamed body failed on the client's side; the first failure is kept.
#[derive(Debug, Clone, Default)]
pub struct Fault(Arc<Mutex<Option<ReadError>>>);

impl Fault {
    /// The client's failure, if its body failed (taken: the next call gets `None`).
    pub fn take(&self) -> Option<ReadError> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn set(&self, error: ReadError) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(error);
    }
}

/// A request body streamed as it arrives, which may pause at most its timeout between frames.
pub struct Paced {
    body: ClientBody,
    timeout: Duration,
    timer: Pin<Box<Sleep>>,
    fault: Fault,
}

impl Paced {
    pub fn new(body: ClientBody, timeout: Duration) -> Self {
        Paced {
            body,
            timeout,
            timer: Box::pin(tokio::time::sleep(timeout)),
            fault: Fault::default(),
        }
    }

    /// Where this body's failure is told, if it fails.
    pub fn fault(&self) -> Fault {
        self.fault.clone()
    }

    /// Records the client's failure and returns it as the body's error.
    fn fail(&self, error: ReadError) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let message = error.to_string();
        self.fault.set(error);
        Poll::Ready(Some(Err(message.into())))
    }
}

impl Body for Paced {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Err(error))) => this.fail(ReadError::Client(error)),
            Poll::Ready(frame) => {
                let next = Instant::now() + this.timeout;
                this.timer.as_mut().reset(next);
                Poll::Ready(frame)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => this.fail(ReadError::Timeout(this.timeout)),
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
